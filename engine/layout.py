"""The seed's drawing: terminal at the right, columns counted from it leftwards.

`depth(x)` is the number of arrows on the longest path from `x` to the terminal,
`col(x) = longest_path - 1 - depth(x)`, so every arrow points right.
Rows inside a column are ordered by the barycentre of their neighbours to keep
arrows short (one right-to-left sweep, then one left-to-right sweep).

Everything here is one pass over the arrows (plus sorting each column), on the
adjacency lists of a `FlowGraph` of a valid (acyclic, one terminal) flow.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.graph import FlowGraph


def depths(graph: FlowGraph) -> list[int]:
    """Arrows on the longest path from each circle to the terminal."""
    depth = [0] * len(graph.uris)
    succs = graph.succs
    for v in reversed(graph.order):
        if succs[v]:
            depth[v] = 1 + max(depth[s] for s in succs[v])
    return depth


def layout(graph: FlowGraph, terminal: int) -> dict:
    """Analysis figures of a valid DAG: entries, terminal, longest_path, width, layout.

    Circles are numbered in template order; the layout is keyed by uri in that order."""
    n = len(graph.uris)
    depth = depths(graph)
    longest = max(depth) + 1
    col = [longest - 1 - d for d in depth]
    columns: list[list[int]] = [[] for _ in range(longest)]
    for v in range(n):
        columns[col[v]].append(v)
    half = [(len(ns) - 1) / 2 for ns in columns]
    rows = [-1] * n

    def place(c: int, neighbours: Sequence[list[int]]) -> None:
        def key(v: int) -> tuple[float, int]:
            placed = [m for m in neighbours[v] if rows[m] >= 0]
            if not placed:
                return (0.0, v)
            return (sum(rows[m] - half[col[m]] for m in placed) / len(placed), v)
        for r, v in enumerate(sorted(columns[c], key=key)):
            rows[v] = r

    for c in range(longest - 1, -1, -1):  # right to left: follow successors
        place(c, graph.succs)
    for c in range(1, longest - 1):  # left to right: follow predecessors
        place(c, graph.preds)
    uris = graph.uris
    return {
        "entries": sorted(uris[v] for v in range(n) if not graph.preds[v]),
        "terminal": uris[terminal],
        "longest_path": longest,
        "width": max(len(ns) for ns in columns),
        "layout": {uris[v]: {"col": col[v], "row": rows[v]} for v in range(n)},
    }
