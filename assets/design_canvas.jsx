// The designer's canvas (SPEC §16): React Flow draws the nodes and edges the server gives
// and reports each edit to it (`onEdit`); the server owns the template and sends the
// picture back. Node positions are kept here only while a node is dragged, so a drag is
// smooth; the move is reported when it ends. `keys` maps a key ("Alt+1", "Control+z") to
// the edit it reports.
import { memo, useCallback, useEffect, useMemo, useRef, useState } from "react";
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

// a node redrawn only when its own data or state changes
const NODE_TYPES = { circle: memo(Circle), junction: memo(Junction) };
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

// The server sends the picture whole (`{version, nodes, edges}`: when the page opens, or
// when the canvas asks for it), else as a change to the version the canvas holds
// (`{version, base, nodes, edges, gone_nodes, gone_edges}`: the nodes and edges that
// differ or are new, the ids of those gone; `designview.changed`): typing into a
// 200-circle flow sends and redraws one node (bench/designer.py). Nodes and edges a
// change leaves alone keep their objects (with what React Flow measured of them). A
// change to another version than the one held (one was missed) asks for the whole.
function patched(current, given, gone) {
  const out = new Map((current || []).map((x) => [x.id, x]));
  for (const id of gone || []) out.delete(id);
  for (const x of given || []) out.set(x.id, x);
  return [...out.values()];
}

export function DesignCanvas({ picture, keys, onEdit, label, words, ...rest }) {
  const report = useCallback((edit) => onEdit && onEdit(edit), [onEdit]);
  const held = useRef({ version: undefined, nodes: [], edges: [] });
  const drawn = useMemo(() => {
    const was = held.current;
    if (!picture) return was;
    if (picture.base === undefined) {  // whole
      held.current = { version: picture.version, nodes: picture.nodes || [],
                       edges: picture.edges || [] };
    } else if (picture.base === was.version && was.version !== undefined) {
      held.current = { version: picture.version,
                       nodes: patched(was.nodes, picture.nodes, picture.gone_nodes),
                       edges: patched(was.edges, picture.edges, picture.gone_edges) };
    } else if (picture.version !== was.version) {
      held.current = { ...was, missed: picture.version };
    }
    return held.current;
  }, [picture]);
  useEffect(() => {  // a change missed: the whole picture again
    if (drawn.missed !== undefined) report({ kind: "picture" });
  }, [drawn, report]);

  const [local, setLocal] = useState(drawn.nodes);
  const lastNodes = useRef(drawn.nodes);
  useEffect(() => {
    if (lastNodes.current === drawn.nodes) return;
    const before = lastNodes.current;
    lastNodes.current = drawn.nodes;
    // keep React Flow's own objects (measured, dragged) of the nodes the server left alone
    setLocal((ns) => {
      const mine = new Map(ns.map((n) => [n.id, n]));
      const was = new Set(before);
      return drawn.nodes.map((n) => (was.has(n) && mine.has(n.id) ? mine.get(n.id) : n));
    });
  }, [drawn]);
  const nodes = drawn.nodes;
  const shownEdges = drawn.edges;

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
