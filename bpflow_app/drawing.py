"""The flow drawing as plain shapes: circles, frames of expanded nested flows, arrows,
OR-junctions and weak edges, in SVG user coordinates.

Columns and rows come from the template analysis (terminal at the right, every arrow
pointing right). An expanded nested flow is drawn as a frame holding its own drawing, so
a column is as wide as its widest member and a column's members are stacked by row. The
shapes are plain data; `components/drawing.py` turns them into SVG elements (so every
text is escaped by React, never spliced into markup).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

R = 22  # circle radius
CELL_W, CELL_H = 150, 92  # room for one circle and its label
PAD, HEAD = 14, 28  # frame padding and title band
MARGIN, WEAK_ROOM = 20, 34
OR_GAP = 30  # junction distance before the target
MIN_WIDTH = 460

STATE_STYLE: dict[str, tuple[str, str, str]] = {  # state -> (fill, stroke, glyph)
    "waiting": ("#f1f3f5", "#adb5bd", ""),
    "ready": ("#e0e7ff", "#4f46e5", "●"),
    "retrying": ("#fef3c7", "#d97706", "↻"),
    "success": ("#dcfce7", "#16a34a", "✓"),
    "failure": ("#fee2e2", "#dc2626", "✕"),
    "skipped": ("#f8f9fa", "#ced4da", "–"),
}
# Where flows wait (SPEC §18's heat map): a circle's fill by its p95 wait against the
# longest p95 of the flow, short to long; light enough for every state's outline and glyph
HEAT = ("#fff9db", "#ffec99", "#ffe066", "#ffc078", "#ffa94d")
EDGE, OR_EDGE, WEAK_EDGE = "#868e96", "#7c3aed", "#ea580c"


@dataclass
class Node:
    id: str
    label: str
    x: int
    y: int
    state: str
    fill: str
    stroke: str
    glyph: str
    dash: str  # stroke-dasharray ("" for a solid outline)
    nested: bool  # a collapsed nested flow (drawn with a double outline)
    aria: str
    tip: str


@dataclass
class Frame:
    id: str
    label: str
    x: int
    y: int
    w: int
    h: int
    state: str
    stroke: str
    aria: str


@dataclass
class Edge:
    d: str
    stroke: str
    dash: str
    arrow: bool
    kind: str  # "plain", "or" or "weak"


@dataclass
class Junction:
    x: int
    y: int
    points: str


@dataclass
class Canvas:
    width: int = 0
    height: int = 0
    min_width: int = 0  # narrower screens scroll rather than shrink the drawing further


@dataclass
class Drawing(Canvas):
    nodes: list[Node] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    junctions: list[Junction] = field(default_factory=list)


@dataclass
class _Box:
    """One circle's place: its cell (x, y, w, h) and, expanded, its nested block."""

    id: str
    uri: str
    col: int
    row: int
    w: float
    h: float
    sub: _Block | None = None
    flow: bool = False  # holds a nested flow
    x: float = 0.0
    y: float = 0.0


@dataclass
class _Block:
    w: float
    h: float
    boxes: list[_Box]
    edges: list[dict[str, Any]]


def _block(analysis: dict[str, Any], prefix: str, expanded: set[str]) -> _Block:
    nested = analysis.get("nested") or {}
    boxes = []
    for uri, pos in analysis["layout"].items():
        nid = prefix + uri
        sub = _block(nested[uri], nid + ".", expanded) if (
            nid in expanded and uri in nested) else None
        w, h = (sub.w + 2 * PAD, sub.h + PAD + HEAD) if sub else (CELL_W, CELL_H)
        boxes.append(_Box(nid, uri, pos["col"], pos["row"], w, h, sub, uri in nested))
    cols = sorted({b.col for b in boxes})
    col_w = {c: max(b.w for b in boxes if b.col == c) for c in cols}
    col_h = {c: sum(b.h for b in boxes if b.col == c) for c in cols}
    height = max(col_h.values(), default=0)
    x = 0.0
    for c in cols:
        y = (height - col_h[c]) / 2
        for b in sorted((b for b in boxes if b.col == c), key=lambda b: b.row):
            b.x, b.y = x + (col_w[c] - b.w) / 2, y
            y += b.h
        x += col_w[c]
    return _Block(x, height, boxes, list(analysis.get("edges", [])))


def _shift(block: _Block, dx: float, dy: float) -> None:
    for b in block.boxes:
        b.x += dx
        b.y += dy
        if b.sub:
            _shift(b.sub, b.x + PAD, b.y + HEAD)


def _anchors(b: _Box) -> tuple[tuple[float, float], tuple[float, float]]:
    """(left, right) points where arrows end and start."""
    if b.sub:
        mid = b.y + b.h / 2
        return (b.x + 4, mid), (b.x + b.w - 4, mid)
    cx, cy = b.x + b.w / 2, b.y + CELL_H / 2 - 8
    return (cx - R, cy), (cx + R, cy)


def _curve(a: tuple[float, float], b: tuple[float, float]) -> str:
    (x1, y1), (x2, y2) = a, b
    dx = max(18.0, (x2 - x1) / 2)
    return (f"M {x1:.1f} {y1:.1f} C {x1 + dx:.1f} {y1:.1f}, {x2 - dx:.1f} {y2:.1f},"
            f" {x2:.1f} {y2:.1f}")


def _width(ch: str) -> int:
    """A character's width in half-em units (CJK and other wide characters: two)."""
    return 2 if ord(ch) >= 0x1100 and unicodedata.east_asian_width(ch) in "WF" else 1


def _short(text: str, n: int = 22) -> str:
    """`text` in at most `n` half-em units, cut with an ellipsis (a label under a circle
    has room for about 22 Latin or 11 Chinese characters)."""
    if sum(_width(c) for c in text) <= n:
        return text
    out, used = "", 1
    for c in text:
        if used + _width(c) > n:
            break
        out, used = out + c, used + _width(c)
    return out.rstrip() + "…"


def draw(analysis: dict[str, Any], states: dict[str, str], *,
         expanded: set[str] | frozenset[str] = frozenset(),
         weak: dict[str, tuple[str, ...]] | None = None,
         tips: dict[str, str] | None = None, names: dict[str, str] | None = None,
         aria: Callable[[str, str], str] | None = None) -> Drawing:
    """Shapes for a flow: `states` maps circle ids (dotted inside nested flows) to a key
    of STATE_STYLE; `weak` maps a circle id to the ids its weak edges point at (drawn
    only when given: intervention mode); `tips` are tooltips (descriptions); `names` the
    labels of the circles (default: their uris); `aria(name, state)` a circle's
    accessible name (default: "name: state")."""
    top = WEAK_ROOM if weak else 0
    root = _block(analysis, "", set(expanded))
    _shift(root, MARGIN, MARGIN + top)
    width = int(root.w + 2 * MARGIN)
    out = Drawing(width=width, height=int(root.h + 2 * MARGIN + top),
                  min_width=min(width, MIN_WIDTH))
    placed: dict[str, _Box] = {}
    _emit(root, states, tips or {}, out, placed, names or {},
          aria or (lambda name, state: f"{name}: {state}"))
    if weak:
        _weak_edges(weak, placed, out)
    return out


def _emit(block: _Block, states: dict[str, str], tips: dict[str, str], out: Drawing,
          placed: dict[str, _Box], names: dict[str, str],
          aria_of: Callable[[str, str], str]) -> None:
    by_uri = {b.uri: b for b in block.boxes}
    for b in block.boxes:
        placed[b.id] = b
        state = states.get(b.id, "waiting")
        fill, stroke, glyph = STATE_STYLE.get(state, STATE_STYLE["waiting"])
        name = names.get(b.id)
        label = _short(name or b.id, 40) if b.sub else _short(name or b.uri)
        aria = aria_of(label, state)  # named by what it shows (the whole name: its tooltip)
        if b.sub:
            out.frames.append(Frame(b.id, label, round(b.x + 4),
                                    round(b.y + 4), round(b.w - 8), round(b.h - 8), state,
                                    stroke, aria))
            _emit(b.sub, states, tips, out, placed, names, aria_of)
            continue
        out.nodes.append(Node(b.id, label, round(b.x + b.w / 2),
                              round(b.y + CELL_H / 2 - 8),
                              state, fill, stroke, glyph, "4 3" if state == "skipped" else "",
                              b.flow, aria,
                              tips.get(b.id, "")))
    groups: dict[tuple[str, int], list[str]] = {}
    for e in block.edges:
        if e.get("or"):
            groups.setdefault((e["to"], e["group"]), []).append(e["from"])
        else:
            out.edges.append(Edge(_curve(_anchors(by_uri[e["from"]])[1],
                                         _anchors(by_uri[e["to"]])[0]), EDGE, "", True,
                                  "plain"))
    for (to, _), members in groups.items():
        end = _anchors(by_uri[to])[0]
        jx, jy = round(end[0] - OR_GAP), round(end[1])
        for m in members:
            out.edges.append(Edge(_curve(_anchors(by_uri[m])[1], (jx - 7, jy)), OR_EDGE, "",
                                  False, "or"))
        out.edges.append(Edge(f"M {jx + 7:.1f} {jy:.1f} L {end[0]:.1f} {end[1]:.1f}",
                              OR_EDGE, "", True, "or"))
        out.junctions.append(Junction(jx, jy, f"{jx - 7:.1f},{jy:.1f} {jx:.1f},{jy - 7:.1f}"
                                              f" {jx + 7:.1f},{jy:.1f} {jx:.1f},{jy + 7:.1f}"))



def _weak_edges(weak: dict[str, tuple[str, ...]], placed: dict[str, _Box],
                out: Drawing) -> None:
    """Dashed arcs over the circles between both ends (weak edges point backwards)."""
    visible = {n.id: n for n in out.nodes}
    for src, targets in weak.items():
        for dst in targets:
            a, b = visible.get(src), visible.get(dst)
            if a is None or b is None:
                continue  # hidden inside a collapsed nested flow
            lo, hi = sorted((a.x, b.x))
            top = min(n.y for n in out.nodes if lo <= n.x <= hi) - R
            apex = max(4.0, top - WEAK_ROOM + 8)
            start = min(a.y, b.y) - R
            lift = start + (apex - start) / 0.75  # a cubic reaches 3/4 of its controls
            out.edges.append(Edge(f"M {a.x:.1f} {a.y - R:.1f} C {a.x:.1f} {lift:.1f},"
                                  f" {b.x:.1f} {lift:.1f}, {b.x:.1f} {b.y - R:.1f}",
                                  WEAK_EDGE, "6 4", True, "weak"))


def heated(d: Drawing, figures: dict[str, dict[str, Any]],
           tip: Callable[[dict[str, Any]], str]) -> Drawing:
    """`d` as a heat map of where flows wait: each circle with waits (`figures`: circle
    id -> {"count", "p50", "p95", "max"} seconds, `bpflow.operations.durations`) filled
    by its p95 against the longest one (`HEAT`), its figures (`tip`) in its title."""
    longest = max((f["p95"] for f in figures.values() if f.get("count") and f.get("p95")),
                  default=0.0)
    nodes = []
    for n in d.nodes:
        f = figures.get(n.id)
        if not f or not f.get("count"):
            nodes.append(n)
            continue
        share = (f.get("p95") or 0.0) / longest if longest else 0.0
        nodes.append(replace(n, fill=HEAT[min(len(HEAT) - 1, int(share * len(HEAT)))],
                             tip=tip(f)))
    return replace(d, nodes=nodes)

