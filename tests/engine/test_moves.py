"""Moves (SPEC §4): reset and its reach, and the instance moves suspend, resume and abort,
each through the public Engine operations."""

from __future__ import annotations

import pytest

from engine.errors import BookmarkError, TransitionError
from tests.engine.helpers import circle, fail, finish, states, template, waits


# -------------------------------------------------------------------- reset
def diamond(engine):
    """a → b → c → end, with c weakly tied to a, and a side branch a → s → end."""
    tpl = template(waits("a"), waits("b", "a"), waits("c", "b", weak=["a"]), waits("s", "a"),
                   circle("end", "c", "s"))
    inst = engine.start(tpl)
    for cid in ("a", "b", "s"):
        finish(engine, inst, cid, {"v": cid})
    fail(engine, inst, "c")
    return inst


def test_reset_self_resets_the_circle_and_what_follows(engine):
    inst = diamond(engine)
    changed = engine.reset(inst, "c", "self", actor="ann")
    assert changed == ["c"]
    assert states(inst) == {"a": "success", "b": "success", "c": "waiting", "s": "success",
                            "end": "waiting"}
    assert inst.status == "running" and engine.ready(inst) == ["c"]
    reset_events = [e for e in inst.events if e.kind == "circle_reset"]
    assert reset_events[-1].actor == "ann" and reset_events[-1].before["state"] == "failure"


def test_reset_levels_follows_deps_and_weak_edges_and_everything_downstream(engine):
    inst = diamond(engine)
    preview = engine.reset_preview(inst, "c", "levels", 1)
    assert preview == ["a", "b", "c", "s"]  # a through the weak edge, s downstream of a
    assert engine.reset(inst, "c", "levels", 1) == preview
    assert set(states(inst).values()) == {"waiting"} and engine.ready(inst) == ["a"]


def test_reset_levels_two_without_weak_edge_reaches_the_grandparent(engine):
    tpl = template(waits("a"), waits("b", "a"), waits("c", "b"), circle("end", "c"))
    inst = engine.start(tpl)
    for cid in "ab":
        finish(engine, inst, cid)
    fail(engine, inst, "c")
    assert engine.reset_preview(inst, "c", "levels", 1) == ["b", "c"]
    assert engine.reset_preview(inst, "c", "levels", 2) == ["a", "b", "c"]


def test_reset_all_restarts_a_completed_instance(engine):
    inst = engine.start(template(waits("a"), circle("end", "a")))
    finish(engine, inst, "a")
    assert inst.status == "completed"
    engine.reset(inst, "end", "all")
    assert inst.status == "running" and engine.ready(inst) == ["a"]


def test_reset_refuses_waiting_circles_and_terminated_instances(engine):
    inst = engine.start(template(waits("a"), circle("end", "a")))
    with pytest.raises(TransitionError, match="still waiting"):
        engine.reset(inst, "a", "self")
    finish(engine, inst, "a")
    inst.status = "running"  # pretend more work is pending, then abort
    engine.abort(inst, "stop")
    with pytest.raises(TransitionError, match="terminated"):
        engine.reset(inst, "a", "self")
    with pytest.raises(ValueError):
        engine.reset_preview(inst, "a", "sideways")


def test_reset_invalidates_the_old_bookmark(engine):
    inst = engine.start(template(waits("a"), waits("b", "a"), circle("end", "b")))
    finish(engine, inst, "a")
    old = engine.bookmark(inst, "b")
    engine.reset(inst, "a", "self")
    finish(engine, inst, "a")
    with pytest.raises(BookmarkError, match="stale"):
        engine.complete(inst, "b", old)


# ------------------------------------------------------ suspend/resume/abort
def test_suspend_blocks_moves_until_resume(engine):
    inst = engine.start(template(waits("a"), circle("end", "a")))
    mark = engine.bookmark(inst, "a")
    engine.suspend(inst, actor="admin")
    assert inst.status == "suspended" and engine.ready(inst) == []
    with pytest.raises(TransitionError, match="suspended"):
        engine.complete(inst, "a", mark)
    with pytest.raises(TransitionError):
        engine.suspend(inst)
    engine.resume(inst)
    engine.complete(inst, "a", mark)
    assert inst.status == "completed"


def test_abort_terminates_and_nothing_moves_after(engine):
    inst = engine.start(template(waits("a"), circle("end", "a")))
    engine.abort(inst, "customer cancelled", actor="bob")
    assert inst.status == "terminated" and inst.reason == "customer cancelled"
    with pytest.raises(TransitionError):
        finish(engine, inst, "a")
    with pytest.raises(TransitionError):
        engine.resume(inst)


def test_completed_instance_cannot_be_aborted(engine):
    inst = engine.start(template(circle("end")))
    assert inst.status == "completed"
    with pytest.raises(TransitionError):
        engine.abort(inst)
