"""A template flattened for the runtime: one node per circle, nested flows included.

Circles inside a nested flow get dotted ids (`main.approve`); deps, weak edges
and successors are translated to those ids once, so the runtime never walks the
template tree again.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from engine.definition import Circle, Flow


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
    # uri -> id of each ancestor `${uri...}` may read, innermost scope first
    visible: Mapping[str, str] = field(compare=False)


@dataclass(frozen=True)
class _Scope:
    """One flow of the tree: its circles' positions, arrows and topological ranks."""
    prefix: str
    position: dict[str, int]
    preds: list[list[int]]
    rank: list[int]


class Visible(Mapping[str, str]):
    """The circles one circle may read, found when asked (a dict of every ancestor of
    every circle would take memory quadratic in the size of the flow)."""

    def __init__(self, plan: Plan, nid: str):
        self._plan, self._nid = plan, nid

    def __getitem__(self, uri: str) -> str:
        found = self._plan.visible_id(self._nid, uri)
        if found is None:
            raise KeyError(uri)
        return found

    def __iter__(self) -> Iterator[str]:
        plan, seen = self._plan, set()
        cur: str | None = self._nid
        while cur is not None:
            scope = plan.scope_of(cur)
            for i in plan.upstream(scope, scope.position[plan.nodes[cur].circle.uri]):
                uri = plan.nodes_of(scope)[i]
                if uri not in seen:
                    seen.add(uri)
                    yield uri
            cur = plan.nodes[cur].parent

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Plan:
    """Static facts about a flow tree that every runtime operation needs."""

    def __init__(self, flow: Flow):
        self.nodes: dict[str, Node] = {}
        self.order: list[str] = []  # deps before dependents, flow circles before children
        self.terminal = flow.terminal
        self._scopes: dict[str, _Scope] = {}  # prefix -> scope
        self._uris: dict[str, list[str]] = {}  # prefix -> uris in template order
        self._seen: dict[tuple[str, str], str | None] = {}
        self._add(flow, None)
        # the circles that copy people (SPEC §15 `cc`), whose copies may be owed
        self.copying: tuple[str, ...] = tuple(n for n in self.order
                                              if self.nodes[n].circle.cc is not None)
        # ... and those that remind the people they wait for (`remind`)
        self.reminding: tuple[str, ...] = tuple(n for n in self.order
                                                if self.nodes[n].circle.remind is not None)

    def _add(self, flow: Flow, parent: str | None) -> list[str]:
        prefix = f"{parent}." if parent else ""
        circles = flow.circles
        position = {c.uri: i for i, c in enumerate(circles)}
        preds = [list(dict.fromkeys(position[d] for g in c.deps for d in g)) for c in circles]
        succs: list[list[int]] = [[] for _ in circles]
        for v, ps in enumerate(preds):
            for p in ps:
                succs[p].append(v)
        rank = [0] * len(circles)
        self._scopes[prefix] = _Scope(prefix, position, preds, rank)
        self._uris[prefix] = [c.uri for c in circles]
        ids = []
        for k, v in enumerate(_lexicographic(preds, succs)):
            rank[v] = k
            circle = circles[v]
            nid = prefix + circle.uri
            ids.append(nid)
            self.order.append(nid)
            children: list[str] = []
            if circle.flow is not None:
                children = self._add(circle.flow, nid)
            self.nodes[nid] = Node(
                id=nid, circle=circle, parent=parent,
                deps=tuple(tuple(prefix + d for d in g) for g in circle.deps),
                weak=tuple(prefix + w for w in circle.weak),
                succ=tuple(prefix + circles[s].uri for s in succs[v]),
                children=tuple(children),
                inner_terminal=f"{nid}.{circle.flow.terminal}" if circle.flow else None,
                visible=Visible(self, nid),
            )
        return ids

    def scope_of(self, nid: str) -> _Scope:
        return self._scopes[self.siblings_scope(nid)]

    def nodes_of(self, scope: _Scope) -> list[str]:
        return self._uris[scope.prefix]

    def visible_id(self, nid: str, uri: str) -> str | None:
        """The id `${uri...}` names as seen from `nid`: an ancestor in its own flow, else
        one of the flow circle around it, and so on up (as the analysis checks)."""
        key = (nid, uri)
        if key not in self._seen:
            found: str | None = None
            cur: str | None = nid
            while cur is not None and found is None:
                scope = self.scope_of(cur)
                t = scope.position.get(uri)
                v = scope.position[self.nodes[cur].circle.uri]
                if t is not None and t != v and scope.rank[t] < scope.rank[v] \
                        and t in self.upstream(scope, v, scope.rank[t]):
                    found = scope.prefix + uri
                cur = self.nodes[cur].parent
            if len(self._seen) > 100_000:
                self._seen.clear()
            self._seen[key] = found
            return found
        return self._seen[key]

    @staticmethod
    def upstream(scope: _Scope, v: int, floor: int = -1) -> set[int]:
        """Circles with a path to v (v excluded), ranked above `floor` only."""
        seen: set[int] = set()
        todo = [v]
        while todo:
            for p in scope.preds[todo.pop()]:
                if p not in seen and scope.rank[p] >= floor:
                    seen.add(p)
                    todo.append(p)
        return seen

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


def _lexicographic(preds: list[list[int]], succs: list[list[int]]) -> list[int]:
    """Topological order, the lowest template position first among the ready circles
    (networkx's lexicographical_topological_sort keyed by position)."""
    missing = [len(ps) for ps in preds]
    ready = [v for v, m in enumerate(missing) if m == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for s in succs[v]:
            missing[s] -= 1
            if not missing[s]:
                heapq.heappush(ready, s)
    return order
