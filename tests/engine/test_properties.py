"""Property-based tests: random DAGs and random operation sequences keep the invariants."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.analysis import analyze, load_template
from engine.errors import TransitionError
from engine.instance import SUCCESS, WAITING, Instance
from engine.runtime import Engine
from tests.engine.helpers import FORM, KEY, Clock

CODES = {"schema", "duplicate_uri", "unknown_dependency", "cycle", "multiple_terminals",
         "no_terminal", "unreachable", "unknown_variable", "invalid_box", "invalid_retry",
         "invalid_timeout", "invalid_expression", "unknown_template", "nesting_cycle",
         "too_large"}


@st.composite
def dags(draw: st.DrawFn) -> dict[str, Any]:
    """A valid template: random circles over earlier ones, OR-groups, weak edges, boxes,
    `when`, retries; one terminal joining every sink."""
    n = draw(st.integers(1, 9))
    circles: list[dict[str, Any]] = []
    has_succ: set[str] = set()
    for i in range(n):
        uri = f"c{i}"
        body: dict[str, Any] = {"uri": uri}
        earlier = [c["uri"] for c in circles]
        if earlier and draw(st.booleans()):
            groups = draw(st.lists(st.lists(st.sampled_from(earlier), min_size=1, max_size=3,
                                            unique=True), min_size=1, max_size=3))
            body["deps"] = groups
            has_succ.update(d for g in groups for d in g)
            if draw(st.booleans()):
                body["weak"] = draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True))
        kind = draw(st.sampled_from(["form", "form", "form", "marker", "when"]))
        if kind != "marker":
            body["box"] = FORM
        if kind == "when":
            body["when"] = draw(st.sampled_from(["true", "false", "1 + 1 == 2"]))
        if draw(st.booleans()):
            body["retry"] = draw(st.lists(st.integers(0, 20), max_size=2))
        circles.append(body)
    sinks = [c["uri"] for c in circles if c["uri"] not in has_succ]
    if draw(st.booleans()):
        end_deps = [sinks]  # one OR-arrow from all sinks
    else:
        end_deps = [[s] for s in sinks]
    circles.append({"uri": "end", "deps": end_deps})
    return {"name": "random", "circles": circles}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "circles", "uri", "deps", "box", "when", "retry", "timeout",
                         "weak", "action", "form", "type", "kind", "x"]), inner, max_size=5),
    max_leaves=25)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_analysis_never_crashes_and_only_uses_known_codes(body):
    report = analyze(body)
    assert all(e["code"] in CODES and isinstance(e["path"], str) and e["message"]
               for e in report.errors)
    assert report.valid == (report.template is not None)


@settings(max_examples=200, deadline=None)
@given(dags())
def test_layout_arrows_always_point_right(body):
    report = analyze(body)
    assert report.valid, report.errors
    a = report.analysis
    layout = a["layout"]
    right = a["longest_path"] - 1
    assert [u for u, p in layout.items() if p["col"] == right] == ["end"] == [a["terminal"]]
    for edge in a["edges"]:
        assert layout[edge["from"]]["col"] < layout[edge["to"]]["col"]
    columns: dict[int, list[int]] = {}
    for p in layout.values():
        assert 0 <= p["col"] <= right
        columns.setdefault(p["col"], []).append(p["row"])
    assert all(sorted(rows) == list(range(len(rows))) for rows in columns.values())
    assert a["width"] == max(len(rows) for rows in columns.values())
    assert sorted(columns) == list(range(right + 1))  # no empty column
    assert a["entries"] == sorted(c["uri"] for c in body["circles"] if not c.get("deps"))


def check_invariants(engine: Engine, inst: Instance) -> None:
    plan = inst.template.plan
    circles = inst.circles
    # Downstream-waiting (seed): a circle only leaves `waiting` on decided groups, so no
    # circle is settled while a group of its dependencies is still entirely undecided.
    for nid, run in circles.items():
        if run.state == WAITING:
            continue
        for group in plan.nodes[nid].deps:
            states = [circles[m].state for m in group]
            assert SUCCESS in states or WAITING not in states, (nid, group, states)
    ready = engine.ready(inst)
    for nid in ready:
        assert circles[nid].state == WAITING
        assert all(any(circles[m].state == SUCCESS for m in g) for g in plan.nodes[nid].deps)
    terminal = circles[plan.terminal].state
    if inst.status == "completed":
        assert terminal == SUCCESS and ready == []
    if inst.status == "running":
        assert terminal == WAITING
        assert engine.statuses(inst)[plan.terminal] != "blocked"
    if inst.status == "failed":
        assert terminal != SUCCESS
    seqs = [e.seq for e in inst.events]
    assert seqs == list(range(1, len(seqs) + 1)) and inst.seq == len(seqs)
    copy = Instance.from_dict(inst.template, inst.to_dict())
    assert copy.to_dict() == inst.to_dict()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.data())
def test_random_operations_keep_the_invariants(body, data):
    clock = Clock()
    engine = Engine(KEY, clock)
    inst = engine.start(load_template(body))
    check_invariants(engine, inst)
    uris = list(inst.circles)
    for _ in range(data.draw(st.integers(1, 25))):
        op = data.draw(st.sampled_from(["complete", "complete", "fail", "tick", "reset",
                                        "suspend", "resume", "stale"]))
        ready = engine.ready(inst)
        try:
            if op in ("complete", "fail") and ready:
                cid = data.draw(st.sampled_from(ready))
                mark = engine.bookmark(inst, cid)
                if op == "complete":
                    engine.complete(inst, cid, mark, {"v": 1})
                else:
                    engine.fail(inst, cid, mark, "no")
            elif op == "tick":
                clock.advance(data.draw(st.integers(0, 30)))
                engine.tick(inst)
            elif op == "reset":
                cid = data.draw(st.sampled_from(uris))
                scope = data.draw(st.sampled_from(["self", "levels", "all"]))
                levels = data.draw(st.integers(0, 3))
                if inst.circles[cid].state != WAITING and inst.status != "terminated":
                    preview = engine.reset_preview(inst, cid, scope, levels)
                    below = inst.template.plan.downstream(preview)
                    unsettled = {n for n in below if not inst.circles[n].pristine}
                    assert unsettled == set(preview) and cid in preview
                    seq = inst.seq
                    assert engine.reset(inst, cid, scope, levels) == preview
                    reset = {e.circle for e in inst.events[seq:] if e.kind == "circle_reset"}
                    assert reset == set(preview)  # each went back to waiting, then re-ran
            elif op == "suspend" and inst.status in ("running", "failed"):
                engine.suspend(inst)
            elif op == "resume" and inst.status == "suspended":
                engine.resume(inst)
            elif op == "stale" and ready:
                cid = data.draw(st.sampled_from(ready))
                mark = engine.bookmark(inst, cid)
                engine.complete(inst, cid, mark, {"v": 2})
                try:
                    engine.complete(inst, cid, mark, {"v": 3})
                    raise AssertionError("a bookmark was accepted twice")
                except TransitionError:
                    pass
        except TransitionError as exc:  # only legitimate refusals, never a crash
            assert op == "stale" and inst.status != "running", exc
        check_invariants(engine, inst)

