"""The arrows of one flow, and the questions the analysis asks of them, in linear time.

Circles are numbered in template order. `preds`/`succs` keep the order in which the
arrows are written (as networkx would), so the drawing is the same whichever way it is
computed. networkx is used only to name cycles, which happens on invalid templates.

`Ancestry` answers "is circle t upstream of circle v?" for a batch of questions with one
sweep in topological order, each circle carrying the set of asked-about circles upstream
of it as the bits of a Python int. The bits live only while a circle still has arrows to
follow, and when even that would take more memory than `BUDGET_BITS` the asked-about
circles are split into chunks, one sweep each.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import networkx as nx

BUDGET_BITS = 2**30  # 128 MiB of live bit sets at most


class FlowGraph:
    def __init__(self, uris: list[str], deps: Iterable[Iterable[str]]):
        """`deps[i]`: the uris circle i depends on (every group, flattened), all known."""
        self.uris = uris
        self.index = {u: i for i, u in enumerate(uris)}
        self.preds: list[list[int]] = [list(dict.fromkeys(self.index[d] for d in ds))
                                       for ds in deps]
        self.succs: list[list[int]] = [[] for _ in uris]
        for v, ps in enumerate(self.preds):
            for p in ps:
                self.succs[p].append(v)
        self.order = self._topological()  # acyclic part only
        self.position = [-1] * len(uris)
        for k, v in enumerate(self.order):
            self.position[v] = k

    def _topological(self) -> list[int]:
        """Kahn's algorithm, smallest template index first among the ready circles."""
        missing = [len(ps) for ps in self.preds]
        ready = deque(v for v, m in enumerate(missing) if m == 0)
        order = []
        while ready:
            v = ready.popleft()
            order.append(v)
            for s in self.succs[v]:
                missing[s] -= 1
                if missing[s] == 0:
                    ready.append(s)
        return order

    @property
    def acyclic(self) -> bool:
        return len(self.order) == len(self.uris)

    def cycles(self) -> list[tuple[int, list[str]]]:
        """(first circle, names around the cycle) for each strongly connected part."""
        if self.acyclic:
            return []
        rest = [v for v in range(len(self.uris)) if self.position[v] < 0]
        graph = nx.DiGraph()
        graph.add_nodes_from(rest)
        graph.add_edges_from((v, s) for v in rest for s in self.succs[v] if self.position[s] < 0)
        found = []
        for scc in nx.strongly_connected_components(graph):
            first = min(scc)
            if len(scc) == 1 and not graph.has_edge(first, first):
                continue
            edges = nx.find_cycle(graph.subgraph(scc), source=first)
            names = [self.uris[u] for u, _ in edges] + [self.uris[edges[0][0]]]
            found.append((first, names))
        return found

    def sinks(self) -> list[int]:
        return [v for v, ss in enumerate(self.succs) if not ss]

    def upstream(self, v: int) -> set[int]:
        """v and every circle with a path to it."""
        seen, todo = {v}, [v]
        while todo:
            for p in self.preds[todo.pop()]:
                if p not in seen:
                    seen.add(p)
                    todo.append(p)
        return seen


class Ancestry:
    """Questions "is t an ancestor of v?" (t != v), asked first and answered together."""

    def __init__(self, graph: FlowGraph):
        self.graph = graph
        self.asked: list[tuple[int, int, Any]] = []
        self._pred_sets: dict[int, set[int]] = {}

    def ask(self, t: int, v: int, payload: Any) -> None:
        self.asked.append((t, v, payload))

    def answer(self, check: Callable[[], None]) -> list[tuple[bool, Any]]:
        """(is an ancestor, payload) for every question, in the order asked; `check` is
        called now and then (the deadline)."""
        g = self.graph
        if not g.acyclic:
            return self._through_components(check)
        pos = g.position
        results: list[bool | None] = [None] * len(self.asked)
        pending: list[int] = []
        for q, (t, v, _) in enumerate(self.asked):
            if t == v or pos[t] >= pos[v]:
                results[q] = False
            elif t in self._preds(v):
                results[q] = True
            else:
                pending.append(q)
        if pending:
            self._sweep(pending, results, check)
        return [(bool(r), payload) for r, (_, _, payload) in zip(results, self.asked,
                                                                  strict=True)]

    def _through_components(self, check: Callable[[], None]) -> list[tuple[bool, Any]]:
        """The same answers for a flow with cycles (an invalid one, still checked): on the
        graph of its strongly connected parts, where two circles of one cycle are each
        other's ancestors."""
        g = self.graph
        full = nx.DiGraph()
        full.add_nodes_from(range(len(g.uris)))
        full.add_edges_from((p, v) for v, ps in enumerate(g.preds) for p in ps)
        parts = nx.condensation(full)
        part = parts.graph["mapping"]
        names = [str(c) for c in range(len(parts))]
        inner = Ancestry(FlowGraph(names, ([names[p] for p in parts.predecessors(c)]
                                           for c in range(len(parts)))))
        same: dict[int, bool] = {}
        for q, (t, v, _) in enumerate(self.asked):
            if part[t] == part[v]:
                same[q] = t != v and len(parts.nodes[part[t]]["members"]) > 1
            else:
                inner.ask(part[t], part[v], q)
        for ok, q in inner.answer(check):
            same[q] = ok
        return [(same[q], payload) for q, (_, _, payload) in enumerate(self.asked)]

    def _preds(self, v: int) -> list[int] | set[int]:
        preds = self.graph.preds[v]
        if len(preds) <= 8:
            return preds
        if v not in self._pred_sets:
            self._pred_sets[v] = set(preds)
        return self._pred_sets[v]

    def _sweep(self, pending: list[int], results: list[bool | None],
               check: Callable[[], None]) -> None:
        g = self.graph
        pos, order, preds = g.position, g.order, g.preds
        targets = sorted({self.asked[q][0] for q in pending}, key=pos.__getitem__)
        at_node: dict[int, list[int]] = {}
        for q in pending:
            at_node.setdefault(self.asked[q][1], []).append(q)
        chunk = max(64, BUDGET_BITS // max(1, self._live_peak()))
        for lo in range(0, len(targets), chunk):
            part = targets[lo:lo + chunk]
            bit = {t: 1 << k for k, t in enumerate(part)}
            start = pos[part[0]]
            end = max((pos[v] for v, qs in at_node.items()
                       if any(self.asked[q][0] in bit for q in qs)), default=start)
            left = [0] * len(order)  # arrows still to follow out of each circle
            for v in order[start:end + 1]:
                for p in preds[v]:
                    left[p] += 1
            have: dict[int, int] = {}  # circle -> bits of itself and its asked-about ancestors
            for k in range(start, end + 1):
                if not k & 4095:
                    check()
                v = order[k]
                a = bit.get(v, 0)
                for p in preds[v]:
                    a |= have.get(p, 0)
                    left[p] -= 1
                    if not left[p]:
                        have.pop(p, None)
                for q in at_node.get(v, ()):
                    b = bit.get(self.asked[q][0])
                    if b is not None:
                        results[q] = bool(a & b)
                if a and left[v]:
                    have[v] = a

    def _live_peak(self) -> int:
        """The most circles holding bits at once in a sweep over the whole flow."""
        g = self.graph
        left = [len(ss) for ss in g.succs]
        live = peak = 0
        for v in g.order:
            for p in g.preds[v]:
                left[p] -= 1
                if not left[p]:
                    live -= 1
            if left[v]:
                live += 1
                peak = max(peak, live)
        return peak
