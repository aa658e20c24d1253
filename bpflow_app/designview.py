"""The designer's edits on a template body, and the canvas's picture of it (SPEC §16).

Pure functions on plain JSON (no Reflex): the page state (`pages/design_state.py`) keeps
the body and calls these, so every edit the canvas reports is one function here, tested
without a browser. The canvas draws what `picture` gives: a node per circle, an arrow per
dependency, and a junction node for each OR-arrow (a `deps` group of two or more).

Element ids (what the canvas reports and the problems list selects):
- a circle: its uri;
- a junction: `j:<target>:<group>` (the OR-group `group` of `target`'s `deps`);
- an arrow: `a:<target>:<group>:<source>` (into the circle or into its junction), the
  junction's own arrow `o:<target>:<group>`, a weak edge `w:<target>:<source>`.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bpflow_app.drawing import STATE_STYLE
from engine.definition import FIELD_TYPES
from engine.graph import FlowGraph
from engine.layout import layout

Say = Callable[..., str]  # (key, **values) -> an accessible name's words
URI = re.compile(r"[a-z][a-z0-9_-]*\Z")
COLUMN, ROW = 230.0, 120.0  # the auto layout's spacing on the canvas
JUNCTION_DX = 110.0  # a junction sits this far left of its circle
MAX_BODY = 1_000_000  # characters of the JSON view (as an upload's bytes)
MAX_FIELDS = 200  # fields of one form the form builder adds

# the palette: each kind's box as it is added (a valid start the panel then refines)
PALETTE: dict[str, dict[str, Any] | None] = {
    "form": {"form": [{"name": "field", "type": "string", "label": "Field"}]},
    "confirm": {"confirm": "Continue?"},
    "http": {"action": {"type": "http", "method": "GET", "url": "http://127.0.0.1:9000/"}},
    "approval": {"action": {"type": "approval", "to": "admin", "subject": "Please approve"}},
    "mail": {"action": {"type": "mail", "to": "admin", "subject": "Notice"}},
    "timer": {"action": {"type": "timer", "delay": 60}},
    "signal": {"action": {"type": "signal", "name": "event"}},
    "flow": {"action": {"type": "flow", "circles": [{"uri": "step"}]}},
    "compute": {"action": {"type": "compute", "outputs": {"value": "1"}}},
    "marker": None,
}
FIELD_KINDS = tuple(t for t in FIELD_TYPES if t != "password")  # the form builder's types
# an action's keys the panel edits as text (the others as JSON)
TEXT_KEYS = {"method", "url", "subject", "body", "cron", "template", "name", "key"}


@dataclass
class Problem:
    """One analysis error (or warning) and the element of the canvas it concerns."""
    pointer: str
    code: str
    message: str
    warning: bool = False
    element: str = ""  # a circle's uri, or "" for the template


def empty(name: str = "") -> dict[str, Any]:
    return {"name": name, "circles": []}


def kind_of(circle: dict[str, Any]) -> str:
    """The palette kind a circle is drawn as."""
    box = circle.get("box")
    if not isinstance(box, dict):
        return "marker"
    action = box.get("action")
    if isinstance(action, dict) and isinstance(action.get("type"), str):
        return action["type"]
    if "confirm" in box:
        return "confirm"
    return "form" if "form" in box else "marker"


def circles(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The body's circles (a list, made one if it was something else)."""
    if not isinstance(body.get("circles"), list):
        body["circles"] = []
    return [c for c in body["circles"] if isinstance(c, dict)]


def find(body: dict[str, Any], uri: str) -> dict[str, Any] | None:
    return next((c for c in circles(body) if c.get("uri") == uri), None)


def _linear(body: dict[str, Any]) -> bool:
    return body.get("kind") == "linear"


def fresh_uri(body: dict[str, Any], stem: str) -> str:
    taken = {c.get("uri") for c in circles(body)}
    if stem not in taken:
        return stem
    n = 2
    while f"{stem}_{n}" in taken:
        n += 1
    return f"{stem}_{n}"


def add_circle(body: dict[str, Any], kind: str) -> str:
    """A new circle of a palette kind (its uri returned); unplaced, so the auto layout
    puts it until someone moves it."""
    if kind not in PALETTE:
        raise ValueError(f"unknown kind {kind!r}")
    uri = fresh_uri(body, kind)
    circle: dict[str, Any] = {"uri": uri}
    if PALETTE[kind] is not None:
        circle["box"] = copy.deepcopy(PALETTE[kind])
    circles(body)
    body["circles"].append(circle)
    return uri


def _groups(circle: dict[str, Any]) -> list[list[str]]:
    deps = circle.get("deps")
    if not isinstance(deps, list):
        return []
    return [g for g in deps if isinstance(g, list)]


def _set_groups(circle: dict[str, Any], groups: list[list[str]]) -> None:
    groups = [g for g in groups if g]
    if groups:
        circle["deps"] = groups
    else:
        circle.pop("deps", None)


def connect(body: dict[str, Any], source: str, target: str) -> str | None:
    """An arrow from `source` to `target` (a circle: a new required dependency; a
    junction: one more member of its OR-group). None when done, else why not."""
    if _linear(body):
        return "linear"
    group: int | None = None
    if target.startswith("j:"):
        _, target, g = target.split(":", 2)
        group = int(g)
    into, start = find(body, target), find(body, source)
    if into is None or start is None or source == target:
        return "invalid"
    groups = _groups(into)
    if group is None:
        if [source] in groups:
            return "exists"
        groups.append([source])
    else:
        if group >= len(groups) or source in groups[group]:
            return "exists"
        groups[group].append(source)
    _set_groups(into, groups)
    return None


def join(body: dict[str, Any], arrow: str, other: str) -> str | None:
    """Make the group of `arrow` an OR-arrow with `other` as one more member."""
    parsed = parse_arrow(arrow)
    if parsed is None:
        return "invalid"
    target, group, _ = parsed
    return connect(body, other, f"j:{target}:{group}")


def parse_arrow(arrow: str) -> tuple[str, int, str | None] | None:
    """(target, group, source) of an arrow's or a junction's id (source None for the
    junction and its own arrow)."""
    parts = arrow.split(":")
    try:
        if parts[0] == "a" and len(parts) == 4:
            return parts[1], int(parts[2]), parts[3]
        if parts[0] in ("j", "o") and len(parts) == 3:
            return parts[1], int(parts[2]), None
    except ValueError:
        return None
    return None


def delete(body: dict[str, Any], ids: list[str]) -> None:
    """Delete circles (every reference to them too), arrows and junctions by id."""
    cut: dict[str, list[tuple[int, str | None]]] = {}
    gone = set()
    for element in ids:
        parsed = parse_arrow(element)
        if parsed is not None:
            target, group, source = parsed
            cut.setdefault(target, []).append((group, source))
        elif element.startswith("w:"):
            _, target, source = element.split(":", 2)
            circle = find(body, target)
            if circle is not None and isinstance(circle.get("weak"), list):
                circle["weak"] = [w for w in circle["weak"] if w != source]
                if not circle["weak"]:
                    del circle["weak"]
        elif find(body, element) is not None:
            gone.add(element)
    for target, cuts in cut.items():
        circle = find(body, target)
        if circle is None or _linear(body):
            continue
        groups = _groups(circle)
        for group, source in cuts:
            if group < len(groups):
                groups[group] = [] if source is None else [s for s in groups[group]
                                                           if s != source]
        _set_groups(circle, groups)
    if gone:
        body["circles"] = [c for c in body["circles"]
                           if not (isinstance(c, dict) and c.get("uri") in gone)]
        for circle in circles(body):
            _set_groups(circle, [[s for s in g if s not in gone] for g in _groups(circle)])
            if isinstance(circle.get("weak"), list):
                circle["weak"] = [w for w in circle["weak"] if w not in gone]
                if not circle["weak"]:
                    del circle["weak"]


def rename(body: dict[str, Any], old: str, new: str) -> str | None:
    """A circle's new uri, its arrows and weak edges kept (None, else why not)."""
    if not URI.match(new):
        return "uri"
    if new != old and find(body, new) is not None:
        return "exists"
    circle = find(body, old)
    if circle is None:
        return "invalid"
    circle["uri"] = new
    for c in circles(body):
        if _groups(c):
            c["deps"] = [[new if s == old else s for s in g] for g in _groups(c)]
        if isinstance(c.get("weak"), list):
            c["weak"] = [new if w == old else w for w in c["weak"]]
    return None


def move(body: dict[str, Any], uri: str, x: float, y: float) -> bool:
    """Keep where someone put a circle (`"ui": {"x", "y"}`)."""
    circle = find(body, uri)
    if circle is None or not (math.isfinite(x) and math.isfinite(y)):
        return False
    circle["ui"] = {"x": round(x), "y": round(y)}
    return True


def unplace(body: dict[str, Any]) -> None:
    """Forget every kept position: the auto layout places all circles again."""
    for circle in circles(body):
        circle.pop("ui", None)


def _arrows(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(uri, the uris it depends on) of each circle, as the analysis reads them."""
    cs = [c for c in circles(body) if isinstance(c.get("uri"), str)]
    if _linear(body):
        return [(c["uri"], [cs[i - 1]["uri"]] if i else []) for i, c in enumerate(cs)]
    return [(c["uri"], [s for g in _groups(c) for s in g if isinstance(s, str)]) for c in cs]


def auto_positions(body: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """The seed's layout (terminal right) of the circles, on any body being drawn: every
    circle without successors in the right-most column, cycles left as they fall."""
    arrows = _arrows(body)
    uris = list(dict.fromkeys(u for u, _ in arrows))
    if not uris:
        return {}
    known = set(uris)
    first = {u: ds for u, ds in reversed(arrows)}  # a duplicate uri: its first circle
    graph = FlowGraph(uris, [[d for d in first[u] if d in known and d != u] for u in uris])
    sinks = graph.sinks() or [len(uris) - 1]
    placed = layout(graph, sinks[0])["layout"]
    return {u: (p["col"] * COLUMN + JUNCTION_DX, p["row"] * ROW) for u, p in placed.items()}


def picture(body: dict[str, Any], problems: list[Problem], selected: str,
            show_weak: bool, say: Say = lambda key, **values: key,
            states: dict[str, str] | None = None) -> tuple[list[dict], list[dict]]:
    """The canvas's nodes and edges (React Flow's shapes) of `body`: each circle at its
    kept position or the auto layout's, its errors on it. `say(key, **values)` words the
    accessible names in the reader's language (keys: `kind:<kind>`, `node`, `node_bad`,
    `arrow`, `into_or`, `or_out`, `junction`, `weak`, `or`). With `states` (a try-it
    run's, `trial_states`), each circle is coloured as the flow page colours it and the
    arrows of the path taken are drawn bold."""
    nodes, edges = _picture(body, problems, selected, show_weak, say)
    return (nodes, edges) if states is None else _tried(nodes, edges, states)


def trial_states(circles: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each circle's colour key (`drawing.STATE_STYLE`) from a sandbox's circles
    (`bpflow.sandbox.state`): a waiting circle is ready, retrying or just waiting."""
    out = {}
    for uri, c in circles.items():
        state = str(c.get("state") or "waiting")
        if state == "waiting" and c.get("ready"):
            state = "ready"
        elif state == "waiting" and c.get("attempts") and c.get("fires_at"):
            state = "retrying"
        out[uri] = state if state in STATE_STYLE else "waiting"
    return out


PATH_STROKE = STATE_STYLE["success"][1]  # the arrows of the path taken
MOVED = ("ready", "retrying", "success", "failure")  # a circle the path has reached


def _tried(nodes: list[dict], edges: list[dict], states: dict[str, str]
           ) -> tuple[list[dict], list[dict]]:
    """The picture with a try-it run's states on its circles and its path: an arrow out of
    a circle that succeeded into one the run has reached (through a junction too)."""
    for n in nodes:
        if n["type"] == "circle":
            state = states.get(n["id"], "waiting")
            fill, stroke, glyph = STATE_STYLE[state]
            n["data"] = {**n["data"], "state": state, "fill": fill, "stroke": stroke,
                         "glyph": glyph}

    def circle(node_id: str) -> str:
        return node_id.split(":")[1] if node_id.startswith("j:") else node_id
    for e in edges:
        source, target = circle(e["source"]), circle(e["target"])
        if states.get(target) in MOVED and (e["source"].startswith("j:") or
                                            states.get(source) == "success"):
            e["className"] = "dc-path"
            e["style"] = {"stroke": PATH_STROKE, "strokeWidth": 3}
            e["markerEnd"] = {"type": "arrowclosed", "color": PATH_STROKE}
    return nodes, edges


def _picture(body: dict[str, Any], problems: list[Problem], selected: str, show_weak: bool,
             say: Say) -> tuple[list[dict], list[dict]]:
    auto = auto_positions(body)
    errors: dict[str, list[str]] = {}
    for p in problems:
        if p.element and not p.warning:
            errors.setdefault(p.element, []).append(p.message)
    nodes: list[dict] = []
    edges: list[dict] = []
    where: dict[str, tuple[float, float]] = {}
    for circle in circles(body):
        uri = circle.get("uri")
        if not isinstance(uri, str) or uri in where:
            continue
        where[uri] = _position(circle.get("ui"), auto.get(uri, (0.0, 0.0)))
        kind = kind_of(circle)
        mine = errors.get(uri, [])
        label = say(f"kind:{kind}")
        nodes.append({
            "id": uri, "type": "circle", "position": _xy(where[uri]),
            "selected": selected == uri,
            "ariaLabel": say("node_bad" if mine else "node", uri=uri, kind=label),
            "data": {"uri": uri, "kind": kind, "label": label, "errors": mine}})
    if _linear(body):
        order = [u for u, _ in _arrows(body) if u in where]
        for a, b in zip(order, order[1:], strict=False):
            edge = _edge(f"l:{b}:{a}", a, b, selected, say("arrow", source=a, target=b))
            edge["deletable"] = False
            edges.append(edge)
        return nodes, edges
    by_uri: dict[str, dict[str, Any]] = {}
    for c in circles(body):
        by_uri.setdefault(c.get("uri"), c)  # type: ignore[arg-type]
    for uri, (x, y) in where.items():
        circle = by_uri.get(uri) or {}
        for g, group in enumerate(_groups(circle)):
            members = [s for s in group if s in where]
            if len(group) == 1:
                edges += [_edge(f"a:{uri}:{g}:{s}", s, uri, selected,
                                say("arrow", source=s, target=uri)) for s in members]
                continue
            junction = f"j:{uri}:{g}"
            nodes.append({"id": junction, "type": "junction",
                          "position": {"x": x - JUNCTION_DX + 20 * g, "y": y + 30 + 16 * g},
                          "selected": selected == junction,
                          "ariaLabel": say("junction", target=uri),
                          "data": {"label": say("or")}})
            edges.append(_edge(f"o:{uri}:{g}", junction, uri, selected,
                               say("or_out", target=uri)))
            edges += [_edge(f"a:{uri}:{g}:{s}", s, junction, selected,
                            say("into_or", source=s, target=uri)) for s in members]
        weak = circle.get("weak") if show_weak else None
        for s in weak if isinstance(weak, list) else []:
            if s in where:
                edge = _edge(f"w:{uri}:{s}", s, uri, selected,
                             say("weak", source=s, target=uri))
                edge["className"] = "weak-edge"
                edge["style"] = {"strokeDasharray": "6 4"}
                edges.append(edge)
    return nodes, edges


def changed(drawn: dict[str, Any], graph: dict[str, list[dict]]
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The canvas's picture (`graph`: its nodes and edges) as the page is sent it, given
    what the page was last sent (`drawn`, this function's second value then: the picture's
    version, and its nodes and edges by id unless the next one is to be sent whole):
    `{"version", "nodes", "edges"}` whole, or the nodes and edges that differ or are new
    and the ids of those gone, `{"version", "base", "nodes", "edges", "gone_nodes",
    "gone_edges"}`, for a canvas that holds version `base`."""
    nodes = {n["id"]: n for n in graph["nodes"]}
    edges = {e["id"]: e for e in graph["edges"]}
    version = int(drawn.get("version") or 0) + 1
    kept = {"version": version, "nodes": nodes, "edges": edges}
    if "nodes" not in drawn:
        return {"version": version, "nodes": list(nodes.values()),
                "edges": list(edges.values())}, kept
    was_nodes, was_edges = drawn["nodes"], drawn["edges"]
    return {"version": version, "base": drawn["version"],
            "nodes": [n for i, n in nodes.items() if was_nodes.get(i) != n],
            "edges": [e for i, e in edges.items() if was_edges.get(i) != e],
            "gone_nodes": [i for i in was_nodes if i not in nodes],
            "gone_edges": [i for i in was_edges if i not in edges]}, kept


def _position(ui: Any, auto: tuple[float, float]) -> tuple[float, float]:
    """Where a circle is drawn: its kept `ui` position if it has a good one."""
    if isinstance(ui, dict) and all(isinstance(ui.get(k), (int, float))
                                    and not isinstance(ui.get(k), bool) for k in "xy"):
        return float(ui["x"]), float(ui["y"])
    return auto


def _xy(at: tuple[float, float]) -> dict[str, float]:
    return {"x": at[0], "y": at[1]}


def _edge(eid: str, source: str, target: str, selected: str, label: str) -> dict:
    return {"id": eid, "source": source, "target": target, "selected": selected == eid,
            "ariaLabel": label, "markerEnd": {"type": "arrowclosed"}}


def element_of(body: dict[str, Any], pointer: str) -> str:
    """The circle a JSON pointer names (a nested flow's circle: its flow circle), or ""
    for the template itself."""
    parts = pointer.split("/")
    if len(parts) > 2 and parts[1] == "circles" and parts[2].isdigit():
        cs = body.get("circles")
        i = int(parts[2])
        if isinstance(cs, list) and i < len(cs) and isinstance(cs[i], dict):
            uri = cs[i].get("uri")
            return uri if isinstance(uri, str) else ""
    return ""


def dumps(body: dict[str, Any]) -> str:
    return json.dumps(body, indent=2, ensure_ascii=False)


def value_text(value: Any) -> str:
    """A value as the panel's text input shows it: a string as it is, others as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def text_value(text: str, as_text: bool) -> Any:
    """What a panel's text input means: the text itself for a text key, else its JSON
    (the text as it is when it is not JSON); None when empty."""
    if text.strip() == "":
        return None
    if as_text:
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def text_of(text: str) -> Any:
    """A text for people as the panel takes it: a string, or a map of language to text
    when it is written as a JSON object (`{"en": "Claim", "zh-CN": "报销"}`, SPEC §17)."""
    if text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, dict):
            return value
    return text


def set_key(target: dict[str, Any], key: str, value: Any) -> None:
    if value is None or value == "" or value == [] or value == {}:
        target.pop(key, None)
    else:
        target[key] = value


def set_kind(circle: dict[str, Any], kind: str) -> None:
    """A circle's box made anew for another palette kind (a form kept where it may stay)."""
    if kind not in PALETTE:
        raise ValueError(f"unknown kind {kind!r}")
    old = circle.get("box") if isinstance(circle.get("box"), dict) else {}
    box = copy.deepcopy(PALETTE[kind]) if PALETTE[kind] is not None else None
    form = old.get("form") if isinstance(old, dict) else None
    if isinstance(form, list) and kind in ("form", "http", "approval", "mail"):
        box = dict(box or {})
        box["form"] = form
    if box:
        circle["box"] = box
    else:
        circle.pop("box", None)


# ------------------------------------------------------------------ the form builder
def form_of(circle: dict[str, Any]) -> list[dict[str, Any]]:
    """The circle's form (made, empty, if it has none)."""
    if not isinstance(circle.get("box"), dict):
        circle["box"] = {}
    box = circle["box"]
    if not isinstance(box.get("form"), list):
        box["form"] = []
    return box["form"]


def add_field(circle: dict[str, Any]) -> None:
    form = form_of(circle)
    if len(form) >= MAX_FIELDS:
        return
    taken = {f.get("name") for f in form if isinstance(f, dict)}
    n = len(form) + 1
    while f"field_{n}" in taken:
        n += 1
    form.append({"name": f"field_{n}", "type": "string", "label": f"Field {n}"})


def move_field(circle: dict[str, Any], index: int, by: int) -> None:
    form = form_of(circle)
    to = index + by
    if 0 <= index < len(form) and 0 <= to < len(form):
        form[index], form[to] = form[to], form[index]


def remove_field(circle: dict[str, Any], index: int) -> None:
    form = form_of(circle)
    if 0 <= index < len(form):
        del form[index]
    if not form:
        circle["box"].pop("form", None)
        if not circle["box"]:
            del circle["box"]


def set_field(circle: dict[str, Any], index: int, key: str, value: Any) -> None:
    """One property of a form field: name, type, label, required, options (a comma
    list), default, accept (a comma list)."""
    form = form_of(circle)
    if not 0 <= index < len(form) or not isinstance(form[index], dict):
        return
    field = form[index]
    if key in ("options", "accept") and isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    elif key == "label" and isinstance(value, str):
        value = text_of(value)
    if key == "required":
        value = bool(value) or None
    set_key(field, key, value)
