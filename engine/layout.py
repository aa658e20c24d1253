"""The seed's drawing: terminal at the right, columns counted from it leftwards.

`depth(x)` is the number of arrows on the longest path from `x` to the
terminal, `col(x) = longest_path - 1 - depth(x)`, so every arrow points right.
Rows inside a column are ordered by the barycentre of their neighbours to keep
arrows short (one right-to-left sweep, then one left-to-right sweep).
"""

from __future__ import annotations

from collections import defaultdict

import networkx as nx


def depths(graph: nx.DiGraph, terminal: str) -> dict[str, int]:
    depth = {terminal: 0}
    for node in reversed(list(nx.topological_sort(graph))):
        succ = list(graph.successors(node))
        if succ:
            depth[node] = 1 + max(depth[s] for s in succ)
        else:
            depth.setdefault(node, 0)
    return depth


def _centered(rows: dict[str, int], height: dict[int, int], col: dict[str, int],
              node: str) -> float:
    return rows[node] - (height[col[node]] - 1) / 2


def layout(graph: nx.DiGraph, terminal: str, order: list[str]) -> dict:
    """Analysis figures of a valid DAG: entries, terminal, longest_path, width, layout."""
    depth = depths(graph, terminal)
    longest = max(depth.values()) + 1
    col = {n: longest - 1 - depth[n] for n in graph}
    position = {n: i for i, n in enumerate(order)}
    columns: dict[int, list[str]] = defaultdict(list)
    for n in order:
        columns[col[n]].append(n)
    height = {c: len(ns) for c, ns in columns.items()}
    rows: dict[str, int] = {}

    def place(c: int, neighbours) -> None:
        def key(n: str) -> tuple[float, int]:
            placed = [m for m in neighbours(n) if m in rows]
            if not placed:
                return (0.0, position[n])
            bary = sum(_centered(rows, height, col, m) for m in placed) / len(placed)
            return (bary, position[n])
        for r, n in enumerate(sorted(columns[c], key=key)):
            rows[n] = r

    for c in range(longest - 1, -1, -1):  # right to left: follow successors
        place(c, graph.successors)
    for c in range(1, longest - 1):  # left to right: follow predecessors
        place(c, graph.predecessors)
    return {
        "entries": sorted(n for n in graph if graph.in_degree(n) == 0),
        "terminal": terminal,
        "longest_path": longest,
        "width": max(height.values()),
        "layout": {n: {"col": col[n], "row": rows[n]} for n in order},
    }
