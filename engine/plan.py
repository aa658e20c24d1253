"""A template flattened for the runtime: one node per circle, nested flows included.

Circles inside a nested flow get dotted ids (`main.approve`); deps, weak edges
and successors are translated to those ids once, so the runtime never walks the
template tree again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

from engine.model import Circle, Flow


@dataclass(frozen=True)
class Node:
    id: str
    circle: Circle
    parent: str | None  # id of the flow circle this one is nested in
    deps: tuple[tuple[str, ...], ...]
    weak: tuple[str, ...]
    succ: tuple[str, ...]
    children: tuple[str, ...]  # circles of the nested flow (flow circles only)
    inner_terminal: str | None  # terminal of the nested flow (flow circles only)
    visible: dict[str, str]  # uri -> id of each ancestor `${uri...}` may read, innermost first


class Plan:
    """Static facts about a flow tree that every runtime operation needs."""

    def __init__(self, flow: Flow):
        self.nodes: dict[str, Node] = {}
        self.order: list[str] = []  # deps before dependents, flow circles before children
        self.terminal = flow.terminal
        self._add(flow, None, {})

    def _add(self, flow: Flow, parent: str | None, outer: dict[str, str]) -> list[str]:
        prefix = f"{parent}." if parent else ""
        graph = nx.DiGraph()
        position = {c.uri: i for i, c in enumerate(flow.circles)}
        graph.add_nodes_from(position)
        graph.add_edges_from((d, c.uri) for c in flow.circles for g in c.deps for d in g)
        ids = []
        for uri in nx.lexicographical_topological_sort(graph, key=position.__getitem__):
            circle = flow.circle(uri)
            nid = prefix + uri
            ids.append(nid)
            self.order.append(nid)
            visible = {**outer, **{a: prefix + a for a in nx.ancestors(graph, uri)}}
            children: list[str] = []
            if circle.flow is not None:
                children = self._add(circle.flow, nid, visible)
            self.nodes[nid] = Node(
                id=nid, circle=circle, parent=parent,
                deps=tuple(tuple(prefix + d for d in g) for g in circle.deps),
                weak=tuple(prefix + w for w in circle.weak),
                succ=tuple(prefix + s for s in graph.successors(uri)),
                children=tuple(children),
                inner_terminal=f"{nid}.{circle.flow.terminal}" if circle.flow else None,
                visible=visible,
            )
        return ids

    def siblings_scope(self, nid: str) -> str:
        parent = self.nodes[nid].parent
        return f"{parent}." if parent else ""

    def descendants(self, nid: str) -> list[str]:
        out, todo = [], list(self.nodes[nid].children)
        while todo:
            cid = todo.pop()
            out.append(cid)
            todo.extend(self.nodes[cid].children)
        return out

    def ancestors(self, nid: str, levels: int) -> set[str]:
        """The circle and `levels` levels above it, through deps and weak edges."""
        seen, frontier = {nid}, deque([(nid, 0)])
        while frontier:
            cur, depth = frontier.popleft()
            if depth == levels:
                continue
            node = self.nodes[cur]
            for up in [d for g in node.deps for d in g] + list(node.weak):
                if up not in seen:
                    seen.add(up)
                    frontier.append((up, depth + 1))
        return seen

    def downstream(self, starts: Iterable[str]) -> set[str]:
        """Everything whose result depends on `starts`: successors, the nested circles
        of a flow circle reached, and enclosing flow circles (their result is the nested
        table), whose other nested circles stay as they are."""
        seen: set[str] = set()
        expanded: set[str] = set()
        todo = [(s, True) for s in starts]
        while todo:
            cur, whole = todo.pop()
            node = self.nodes[cur]
            if whole and cur not in expanded:
                expanded.add(cur)
                todo.extend((c, True) for c in node.children)
            if cur in seen:
                continue
            seen.add(cur)
            todo.extend((s, True) for s in node.succ)
            if node.parent:
                todo.append((node.parent, False))
        return seen
