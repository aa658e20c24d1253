"""Runtime rules (SPEC §4), each through the public Engine operations."""

from __future__ import annotations

import pytest

from engine.analysis import load_template
from engine.errors import BookmarkError, TransitionError
from engine.instance import Instance
from engine.runtime import Engine
from tests.engine.helpers import FORM, circle, fail, finish, states, template, waits


# ---------------------------------------------------------------- readiness
def test_entries_are_ready_at_start_and_markers_succeed_at_once(engine):
    tpl = template(waits("a"), circle("mark", "a"), waits("b", "mark"), circle("end", "b"))
    inst = engine.start(tpl)
    assert inst.status == "running" and engine.ready(inst) == ["a"]
    finish(engine, inst, "a", {"x": 1})
    assert states(inst)["mark"] == "success" and engine.ready(inst) == ["b"]


def test_and_arrows_wait_for_every_group(engine):
    tpl = template(waits("a"), waits("b"), waits("c", "a", "b"), circle("end", "c"))
    inst = engine.start(tpl)
    finish(engine, inst, "a")
    assert engine.ready(inst) == ["b"]
    finish(engine, inst, "b")
    assert engine.ready(inst) == ["c"]


def test_or_join_fires_on_the_first_success(engine):
    tpl = template(waits("a"), waits("b"), waits("join", ["a", "b"]), circle("end", "join"))
    inst = engine.start(tpl)
    finish(engine, inst, "b")
    assert "join" in engine.ready(inst) and states(inst)["a"] == "waiting"
    finish(engine, inst, "join")
    assert inst.status == "completed"
    assert engine.ready(inst) == []  # `a` still waits but is no longer ready


def test_when_false_skips_and_all_skipped_group_skips_the_dependent(engine):
    tpl = template(waits("a"), waits("b", "a", when="${a.n} > 10"), waits("c", "b"),
                   waits("d", "a"), circle("end", ["c", "d"]))
    inst = engine.start(tpl)
    finish(engine, inst, "a", {"n": 3})
    assert states(inst)["b"] == "skipped" and states(inst)["c"] == "skipped"
    assert [e.data["why"] for e in inst.events if e.circle == "b" and e.data.get("why")] == [
        "condition is false: ${a.n} > 10"]
    finish(engine, inst, "d")
    assert inst.status == "completed"  # the OR-arrow from `d` still carries the flow


def test_all_skipped_group_skips_the_terminal_and_fails_the_instance(engine):
    tpl = template(waits("a"), waits("b", "a", when="false"), circle("end", "b"))
    inst = engine.start(tpl)
    finish(engine, inst, "a")
    assert states(inst)["end"] == "skipped" and inst.status == "failed"


def test_when_that_cannot_be_evaluated_fails_the_circle_not_the_engine(engine):
    tpl = template(waits("a"), waits("b", "a", when="${a.n} > 1"), circle("end", "b"))
    inst = engine.start(tpl)
    finish(engine, inst, "a", {"n": "text"})
    assert states(inst)["b"] == "failure" and "string" in inst.circles["b"].reason
    assert inst.status == "failed"


def test_failed_group_blocks_and_the_instance_fails_with_its_failures(engine):
    tpl = template(waits("a"), waits("b"), waits("c", "a", "b"), circle("end", "c"))
    inst = engine.start(tpl)
    fail(engine, inst, "a", "no stock")
    assert inst.status == "failed" and "a: no stock" in inst.reason
    assert engine.statuses(inst)["c"] == "blocked"
    assert engine.view(inst)["c"]["blocked"] is True
    assert "b" in engine.ready(inst)  # other branches may still move


def test_or_group_blocks_only_when_no_member_can_succeed(engine):
    tpl = template(waits("a"), waits("b"), waits("j", ["a", "b"]), circle("end", "j"))
    inst = engine.start(tpl)
    fail(engine, inst, "a")
    assert inst.status == "running" and engine.statuses(inst)["j"] == "pending"
    fail(engine, inst, "b")
    assert inst.status == "failed" and engine.statuses(inst)["j"] == "blocked"


def test_compute_outputs_become_the_result_with_types_kept(engine):
    tpl = template(waits("a"), circle("calc", "a", box={"action": {"type": "compute", "outputs": {
        "double": "${a.n} * 2", "big": "${a.n} > 5", "label": "'n=' + str(${a.n})"}}}),
        circle("end", "calc"))
    inst = engine.start(tpl)
    finish(engine, inst, "a", {"n": 4})
    assert inst.circles["calc"].result == {"double": 8, "big": False, "label": "n=4"}
    assert engine.variables(inst)["calc"]["double"] == 8


# ------------------------------------------------------------- variables
def test_whole_string_placeholder_keeps_its_type(engine):
    tpl = template(waits("a"), waits("b", "a"), circle("end", "b"))
    inst = engine.start(tpl, inputs={"k": [1, 2]}, user={"username": "ann"})
    finish(engine, inst, "a", {"amount": 12.5, "ok": True, "tags": ["x"]})
    rendered = engine.render(inst, "b", {"n": "${a.amount}", "ok": "${a.ok}", "t": "${a.tags}",
                                         "text": "paid ${a.amount} to ${user.username}",
                                         "list": ["${workflow.input.k}", "${instance.id}"]})
    assert rendered == {"n": 12.5, "ok": True, "t": ["x"], "text": "paid 12.5 to ann",
                        "list": [[1, 2], inst.id]}


def test_reading_a_circle_without_result_names_it(engine):
    from engine.errors import VariableError
    tpl = template(waits("a"), waits("b"), waits("c", ["a", "b"]), circle("end", "c"))
    inst = engine.start(tpl)
    finish(engine, inst, "a", {"v": 1})
    with pytest.raises(VariableError, match="'b' is waiting"):
        engine.render(inst, "c", "${b.v}")


# ---------------------------------------------------------------- bookmarks
def test_a_bookmark_works_once(engine):
    inst = engine.start(template(waits("a"), circle("end", "a")))
    mark = engine.bookmark(inst, "a")
    engine.complete(inst, "a", mark, {"x": 1})
    with pytest.raises(TransitionError):
        engine.complete(inst, "a", mark, {"x": 2})
    assert inst.circles["a"].result == {"x": 1}


def test_forged_and_stale_bookmarks_are_refused(engine, clock):
    tpl = template(waits("a", retry=[5]), circle("end", "a"))
    inst = engine.start(tpl)
    first = engine.bookmark(inst, "a")
    with pytest.raises(BookmarkError, match="not valid"):
        engine.complete(inst, "a", first[:-2] + "xx")
    with pytest.raises(BookmarkError):
        engine.complete(inst, "a", "garbage")
    other = Engine(b"another key", clock)
    with pytest.raises(BookmarkError):
        engine.complete(inst, "a", other.bookmark(inst, "a"))
    engine.fail(inst, "a", first, "try again")
    clock.advance(5)
    engine.tick(inst)
    with pytest.raises(BookmarkError, match="stale"):
        engine.complete(inst, "a", first)
    finish(engine, inst, "a")
    assert inst.status == "completed"


def test_a_bookmark_is_bound_to_its_circle(engine):
    inst = engine.start(template(waits("a"), waits("b"), circle("end", "a", "b")))
    with pytest.raises(BookmarkError):
        engine.complete(inst, "b", engine.bookmark(inst, "a"))


def test_only_ready_circles_take_a_completion(engine):
    inst = engine.start(template(waits("a"), waits("b", "a"), circle("end", "b")))
    with pytest.raises(TransitionError, match="not ready"):
        engine.complete(inst, "b", engine.bookmark(inst, "b"))
    with pytest.raises(TransitionError, match="no circle"):
        engine.complete(inst, "zzz", "0.x")


# ------------------------------------------------------------------ retries
def test_retries_follow_the_list_and_then_fail(engine, clock):
    inst = engine.start(template(waits("a", retry=[1, 5, 30]), circle("end", "a")))
    expected_waits = [1, 5, 30]
    for attempt, wait in enumerate(expected_waits, start=1):
        fail(engine, inst, "a", f"attempt {attempt}")
        run = inst.circles["a"]
        assert run.state == "waiting" and run.attempts == attempt
        assert (run.next_attempt_at - clock.now).total_seconds() == wait
        assert engine.ready(inst) == [] and engine.wake_at(inst) == run.next_attempt_at
        clock.advance(wait - 0.5)
        engine.tick(inst)
        assert engine.ready(inst) == []
        clock.advance(0.5)
        engine.tick(inst)
        assert engine.ready(inst) == ["a"]
    fail(engine, inst, "a", "attempt 4")
    assert inst.circles["a"].state == "failure" and inst.circles["a"].attempts == 4
    assert inst.circles["a"].reason == "attempt 4" and inst.status == "failed"
    kinds = [e.kind for e in inst.events if e.circle == "a"]
    assert kinds.count("circle_retry_scheduled") == 3 and kinds[-1] == "circle_failed"


# ----------------------------------------------------------------- timeouts
@pytest.mark.parametrize("policy", ["fail", "retry", "terminate"])
def test_timeout_policies(engine, clock, policy):
    tpl = template(waits("a", timeout={"seconds": 60, "policy": policy}, retry=[10]),
                   circle("end", "a"))
    inst = engine.start(tpl)
    assert engine.wake_at(inst) == clock.now + __import__("datetime").timedelta(seconds=60)
    clock.advance(59)
    engine.tick(inst)
    assert engine.ready(inst) == ["a"]
    clock.advance(1)
    engine.tick(inst)
    run = inst.circles["a"]
    if policy == "fail":
        assert run.state == "failure" and "timed out" in run.reason and inst.status == "failed"
    elif policy == "retry":
        assert run.state == "waiting" and run.attempts == 1 and inst.status == "running"
    else:
        assert inst.status == "terminated" and "timed out" in inst.reason


def test_timer_fires_after_its_delay(engine, clock):
    tpl = template(waits("a"), circle("wait", "a", box={"action": {"type": "timer", "delay": 30}}),
                   circle("end", "wait"))
    inst = engine.start(tpl)
    finish(engine, inst, "a")
    assert engine.wake_at(inst) == clock.now + __import__("datetime").timedelta(seconds=30)
    clock.advance(29)
    engine.tick(inst)
    assert inst.status == "running"
    clock.advance(1)
    engine.tick(inst)
    assert inst.status == "completed" and "fired_at" in inst.circles["wait"].result


def test_cron_timer_waits_for_the_next_match(engine, clock):
    tpl = template(circle("t", box={"action": {"type": "timer", "cron": "30 9 * * *"}}))
    inst = engine.start(tpl)  # clock: 09:00
    assert engine.wake_at(inst).strftime("%H:%M") == "09:30"
    clock.advance(1800)
    engine.tick(inst)
    assert inst.status == "completed"


# -------------------------------------------------------------- nested flows
def nested(levels: int) -> dict:
    """A flow nested `levels` deep; the innermost waits for a form."""
    inner = [waits("leaf"), circle("out", "leaf")]
    for depth in range(levels, 0, -1):
        inner = [circle(f"n{depth}", box={"action": {"type": "flow", "circles": inner}}),
                 circle("out", f"n{depth}")]
    return {"name": "deep", "circles": inner}


def test_nested_flow_three_levels_with_dotted_ids(engine):
    tpl = load_template(nested(3))
    inst = engine.start(tpl)
    assert engine.ready(inst) == ["n1.n2.n3.leaf"]
    finish(engine, inst, "n1.n2.n3.leaf", {"v": 7})
    assert inst.status == "completed"
    assert engine.variables(inst)["n1"]["n2"]["n3"]["leaf"] == {"v": 7}
    assert engine.render(inst, "out", "${n1.n2.n3.leaf.v}") == 7


def test_nested_flow_failure_fails_the_circle(engine):
    tpl = load_template(nested(1))
    inst = engine.start(tpl)
    fail(engine, inst, "n1.leaf", "bad")
    assert states(inst)["n1"] == "failure"
    assert "nested flow failed: leaf: bad" in inst.circles["n1"].reason
    assert inst.status == "failed"
    engine.reset(inst, "n1.leaf", "self")
    assert states(inst)["n1"] == "waiting" and engine.ready(inst) == ["n1.leaf"]
    finish(engine, inst, "n1.leaf")
    assert inst.status == "completed"


def test_nested_circles_read_outer_ancestors_innermost_first(engine):
    inner = [waits("a"), circle("b", "a", box={"confirm": "${a.x}/${top.x}"})]
    tpl = template(waits("top"), waits("a", "top"),
                   circle("sub", "a", box={"action": {"type": "flow", "circles": inner}}),
                   circle("end", "sub"))
    inst = engine.start(tpl)
    finish(engine, inst, "top", {"x": "T"})
    finish(engine, inst, "a", {"x": "outer"})
    finish(engine, inst, "sub.a", {"x": "inner"})
    confirm = tpl.plan.nodes["sub.b"].circle.box.confirm
    assert engine.render(inst, "sub.b", confirm) == "inner/T"


def test_a_nested_flow_circle_cannot_be_completed_from_outside(engine):
    inst = engine.start(load_template(nested(1)))
    with pytest.raises(TransitionError, match="nested flow"):
        engine.complete(inst, "n1", engine.bookmark(inst, "n1"))


def test_skipped_flow_circle_skips_its_circles(engine):
    inner = [waits("x")]
    tpl = template(waits("a"), circle("sub", "a", when="false",
                                      box={"action": {"type": "flow", "circles": inner}}),
                   circle("end", ["sub", "a"]))
    inst = engine.start(tpl)
    finish(engine, inst, "a")
    assert states(inst)["sub.x"] == "skipped" and inst.status == "completed"


def test_outer_flow_auth_then_the_session_starting_no_business_flow(engine):
    from bpflow.cli.validate import known_templates
    known = known_templates()
    tpl = load_template(known["signin"], known.get)
    inst = engine.start(tpl, user={"username": "bob"})
    assert engine.ready(inst) == ["auth"]
    finish(engine, inst, "auth", {"username": "bob", "roles": ["user"]})
    assert engine.ready(inst) == [] and set(inst.circles) == {"auth", "main"}
    assert states(inst)["main"] == "success" and inst.status == "completed"


# --------------------------------------------------------- history and data
def test_every_change_is_an_event_with_before_and_after(engine):
    inst = engine.start(template(waits("a"), circle("end", "a")), actor="bob")
    finish(engine, inst, "a", {"x": 1})
    events = inst.drain_events()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].kind == "instance_started" and events[0].actor == "bob"
    done = next(e for e in events if e.kind == "circle_succeeded" and e.circle == "a")
    assert done.before["state"] == "waiting" and done.after == {
        "state": "success", "result": {"x": 1}, "reason": None, "attempts": 0}
    assert events[-1].kind == "instance_completed"
    assert inst.events == [] and inst.seq == events[-1].seq


def test_instance_round_trips_through_a_dict(engine, clock):
    tpl = template(waits("a", retry=[5]), waits("b", "a"), circle("end", "b"))
    inst = engine.start(tpl, user={"username": "ann"})
    fail(engine, inst, "a")
    copy = Instance.from_dict(tpl, inst.to_dict())
    assert copy.to_dict() == inst.to_dict()
    clock.advance(5)
    engine.tick(copy)
    finish(engine, copy, "a")
    assert engine.ready(copy) == ["b"]


def test_view_shows_bookmarks_of_ready_circles_only(engine):
    inst = engine.start(template(waits("a"), waits("b", "a"), circle("end", "b")))
    view = engine.view(inst)
    assert view["a"]["ready"] and view["a"]["bookmark"]
    assert view["b"]["bookmark"] is None and not view["b"]["ready"]
    assert set(view["a"]) == {"state", "ready", "blocked", "result", "reason", "attempts",
                              "next_attempt_at", "bookmark", "assignee", "candidates",
                              "due_at", "delegate", "returned"}


def test_engine_needs_a_key():
    with pytest.raises(ValueError):
        Engine(b"")


def test_form_box_alone_waits_for_the_outside(engine):
    inst = engine.start(template(circle("a", box=FORM), circle("end", "a")))
    assert engine.ready(inst) == ["a"] and inst.circles["a"].state == "waiting"


def test_nested_circle_reads_the_outer_ancestor_not_an_unrelated_inner_namesake(engine):
    inner = [waits("a"), circle("b", box={"confirm": "${a.x}"}), circle("end", "a", "b")]
    tpl = template(waits("a"), circle("sub", "a", box={"action": {"type": "flow",
                                                                  "circles": inner}}),
                   circle("end", "sub"))
    inst = engine.start(tpl)
    finish(engine, inst, "a", {"x": "outer"})
    assert engine.render(inst, "sub.b", "${a.x}") == "outer"  # sub.a is no ancestor of sub.b


def test_timers_are_driven_by_the_clock_not_completed_from_outside(engine):
    inst = engine.start(template(circle("t", box={"action": {"type": "timer", "delay": 60}})))
    assert engine.ready(inst) == [] and engine.view(inst)["t"]["bookmark"] is None
    with pytest.raises(TransitionError, match="not ready"):
        engine.complete(inst, "t", engine.bookmark(inst, "t"))


def test_reused_bookmark_is_a_bookmark_error(engine):
    inst = engine.start(template(waits("a"), circle("end", "a")))
    mark = engine.bookmark(inst, "a")
    engine.complete(inst, "a", mark)
    with pytest.raises(BookmarkError, match="already used"):
        engine.complete(inst, "a", mark)


def test_names_moved_out_of_runtime_are_still_importable_from_it():
    from engine import inputs, moves, readiness, runtime
    assert runtime.InputError is inputs.InputError
    assert runtime.INPUT_TYPES is inputs.INPUT_TYPES
    assert runtime.CIRCLE_MOVES is moves.CIRCLE_MOVES
    assert runtime.INSTANCE_MOVES is moves.INSTANCE_MOVES
    assert runtime.ACTIVE is moves.ACTIVE
    assert (runtime.READY, runtime.PENDING, runtime.SCHEDULED, runtime.BLOCKED, runtime.DEAD) == (
        readiness.READY, readiness.PENDING, readiness.SCHEDULED, readiness.BLOCKED,
        readiness.DEAD)
