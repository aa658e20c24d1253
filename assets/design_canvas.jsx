// The designer's canvas (SPEC §16): React Flow draws the nodes and edges the server gives
// and reports each edit to it (`onEdit`); the server owns the template and sends the
// picture back. Node positions are kept here only while a node is dragged, so a drag is
// smooth; the move is reported when it ends. `keys` maps a key ("Alt+1", "Control+z") to
// the edit it reports.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import {
  Background, Controls, Handle, MarkerType, Panel, Position, ReactFlow, applyNodeChanges,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import "./design_canvas.css";

function Circle({ data, selected }) {
  const bad = data.errors && data.errors.length > 0;
  // while the draft is tried: its state's colours, as the flow page draws them
  const tried = data.state ? { background: data.fill, borderColor: data.stroke } : undefined;
  return (
    <div className={"dc-circle" + (bad ? " dc-bad" : "") + (selected ? " dc-selected" : "")}
         data-uri={data.uri} data-kind={data.kind} data-state={data.state} style={tried}>
      <Handle type="target" position={Position.Left} />
      <div className="dc-uri" translate="no">
        {data.glyph ? <span className="dc-glyph" aria-hidden="true"
                            style={{ color: data.stroke }}>{data.glyph} </span> : null}
        {data.uri}
      </div>
      <div className="dc-kind">{data.label}</div>
      {bad ? <div className="dc-errors" role="note">{data.errors.join("; ")}</div> : null}
      <Handle type="source" position={Position.Right} />
    </div>
  );
}

function Junction({ data, selected }) {
  return (
    <div className={"dc-junction" + (selected ? " dc-selected" : "")} title={data.label}>
      <Handle type="target" position={Position.Left} />
      <span aria-hidden="true">∨</span>
      <Handle type="source" position={Position.Right} />
    </div>
  );
}

const NODE_TYPES = { circle: Circle, junction: Junction };
const FIT = { padding: 0.2, maxZoom: 1 };

function keyName(e) {
  const mods = [e.ctrlKey || e.metaKey ? "Control" : "", e.altKey ? "Alt" : "",
                e.shiftKey ? "Shift" : ""].filter(Boolean);
  let key = e.code && e.code.startsWith("Digit") ? e.code.slice(5) : e.key;
  if (key.length === 1) key = key.toLowerCase();
  return [...mods, key].join("+");
}

function typing(target) {
  const tag = target && target.tagName;
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" ||
    (target && target.isContentEditable);
}

// React Flow's own words (its controls, the nodes' descriptions) in the reader's language:
// `words` holds them by React Flow's keys, and "moved" with {x} and {y}
function ariaConfig(words) {
  if (!words) return undefined;
  const { moved, ...rest } = words;
  return { ...rest, "node.a11yDescription.ariaLiveMessage": ({ x, y }) =>
    (moved || "{x}, {y}").replace("{x}", Math.round(x)).replace("{y}", Math.round(y)) };
}

// The server sends every node and edge at each change; those the change left as they were
// keep their objects (with what React Flow measured of them), so React Flow redraws only
// the changed ones: typing into a 200-circle flow stays quick (bench/designer.py).
function keeper() {
  let seen = new Map();  // id -> the server's node or edge as JSON
  return (current, given) => {
    const now = new Map((current || []).map((x) => [x.id, x]));
    const next = new Map();
    const out = (given || []).map((x) => {
      const text = JSON.stringify(x);
      next.set(x.id, text);
      return seen.get(x.id) === text && now.has(x.id) ? now.get(x.id) : x;
    });
    seen = next;
    return out;
  };
}

export function DesignCanvas({ nodes, edges, keys, onEdit, label, words, ...rest }) {
  const [local, setLocal] = useState(nodes || []);
  const keepNodes = useRef(keeper());
  useEffect(() => setLocal((ns) => keepNodes.current(ns, nodes)), [nodes]);
  const keepEdges = useRef(keeper());
  const lastEdges = useRef([]);
  const shownEdges = useMemo(() => {
    lastEdges.current = keepEdges.current(lastEdges.current, edges);
    return lastEdges.current;
  }, [edges]);

  const report = useCallback((edit) => onEdit && onEdit(edit), [onEdit]);
  const [flow, setFlow] = useState(null);
  const box = useRef(null);
  useEffect(() => {  // the whole flow in view again when the canvas changes size
    if (!flow || !box.current || typeof ResizeObserver === "undefined") return undefined;
    // after React Flow has taken the new size itself (its own observer)
    const seen = new ResizeObserver(() => setTimeout(() => flow.fitView(FIT), 50));
    seen.observe(box.current);
    return () => seen.disconnect();
  }, [flow]);

  // the whole flow in view when circles come or go (not when one is moved)
  const count = (nodes || []).length;
  useEffect(() => {
    if (flow) requestAnimationFrame(() => flow.fitView(FIT));
  }, [flow, count]);

  useEffect(() => {
    const down = (e) => {
      if (!keys || typing(e.target)) return;
      const edit = keys[keyName(e)];
      if (edit) {
        e.preventDefault();
        report(edit);
      }
    };
    window.addEventListener("keydown", down);
    return () => window.removeEventListener("keydown", down);
  }, [keys, report]);

  const onNodesChange = useCallback((changes) => {
    const kept = changes.filter((c) => c.type === "position" || c.type === "dimensions");
    setLocal((ns) => applyNodeChanges(kept, ns));
    // a move by the arrow keys, or the end of a drag (also reported by onNodeDragStop;
    // the server takes a move to where a node already is as no change)
    const moved = changes.filter((c) => c.type === "position" && !c.dragging
                                      && c.position);
    if (moved.length) {
      report({ kind: "move", nodes: moved.map((c) => ({ id: c.id, x: c.position.x,
                                                        y: c.position.y })) });
    }
    const chosen = changes.find((c) => c.type === "select" && c.selected);
    if (chosen) report({ kind: "select", id: chosen.id });
  }, [report]);

  const onNodeDragStop = useCallback((_e, _node, dragged) => {
    report({ kind: "move", nodes: dragged.map((n) => ({ id: n.id, x: n.position.x,
                                                        y: n.position.y })) });
  }, [report]);

  const onEdgesChange = useCallback((changes) => {
    const chosen = changes.find((c) => c.type === "select" && c.selected);
    if (chosen) report({ kind: "select", id: chosen.id });
  }, [report]);

  const onConnect = useCallback((c) => {
    report({ kind: "connect", source: c.source, target: c.target });
  }, [report]);

  const onDelete = useCallback(({ nodes: ns, edges: es }) => {
    report({ kind: "delete", ids: [...ns.map((n) => n.id), ...es.map((e) => e.id)] });
  }, [report]);

  const onPaneClick = useCallback(() => report({ kind: "select", id: "" }), [report]);

  return (
    <div className="dc-canvas" role="application" aria-label={label} ref={box} {...rest}>
      <ReactFlow
        nodes={local}
        edges={shownEdges}
        nodeTypes={NODE_TYPES}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onNodeDragStop={onNodeDragStop}
        onConnect={onConnect}
        onDelete={onDelete}
        onPaneClick={onPaneClick}
        deleteKeyCode={["Delete", "Backspace"]}
        defaultEdgeOptions={{ markerEnd: { type: MarkerType.ArrowClosed } }}
        onInit={setFlow}
        ariaLabelConfig={ariaConfig(words)}
        fitView
        fitViewOptions={FIT}
        minZoom={0.2}
        proOptions={{ hideAttribution: true }}
      >
        <Background />
        <Controls />
        {/* React Flow's credit, as its own: a name, not words of the page */}
        <Panel position="bottom-right" className="dc-credit">
          <a href="https://reactflow.dev" target="_blank" rel="noopener noreferrer"
             translate="no">React Flow</a>
        </Panel>
      </ReactFlow>
    </div>
  );
}
