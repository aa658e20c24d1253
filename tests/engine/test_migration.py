"""Moving an instance to another version of its template (SPEC §11), without a database:
how circles match, what is kept, every reason an instance is refused, the invariant."""

from __future__ import annotations

import pytest

from engine import bookmarks
from engine.errors import BookmarkError
from engine.migration import (
    MIGRATED,
    MigrationRefused,
    in_flight,
    map_problems,
    match,
    migrate,
    prepare,
)
from tests.engine.helpers import circle, fail, finish, states, template, waits

ALICE = {"id": 1, "username": "alice", "roles": ["user"]}
V1 = template(waits("a"), waits("b", "a"), waits("c", "b"), circle("done", "c"))


def start(engine, tpl=V1):
    inst = engine.start(tpl, user=ALICE, version=1)
    return inst


def move(engine, inst, new, mapping=None, version=2, source=1):
    m = migrate(inst, new, version, mapping or {}, source, engine.clock, "admin")
    engine.tick(inst, "admin")
    return m


def refusal(engine, inst, new, mapping=None, source=1) -> list[str]:
    before, seq = inst.to_dict(), inst.seq
    with pytest.raises(MigrationRefused) as caught:
        move(engine, inst, new, mapping, source=source)
    assert inst.to_dict() == before and inst.seq == seq  # nothing changed
    return caught.value.reasons


# ------------------------------------------------------------------ matching
def test_circles_match_by_uri_and_by_the_map_and_a_flow_circle_carries_its_circles():
    old = template(waits("a"), circle("f", "a", box={"action": {"type": "flow", "circles": [
        waits("x"), circle("y", "x")]}}), circle("done", "f"))
    new = template(waits("a"), circle("g", "a", box={"action": {"type": "flow", "circles": [
        waits("x"), waits("z", "x"), circle("y", "z")]}}), waits("extra", "g"),
        circle("done", "extra"))
    m = match(old, new, {"f": "g"})
    assert m.sources == {"a": "a", "g": "f", "g.x": "f.x", "g.y": "f.y", "done": "done"}
    assert m.added == ["g.z", "extra"]
    assert m.removed == []
    # an explicit entry wins over a carried one, and a name the map gave away is not matched
    m = match(old, new, {"f": "g", "f.y": "g.z", "a": "extra"})
    assert m.sources["g.z"] == "f.y" and m.sources["extra"] == "a"
    assert "a" not in m.sources and m.removed == [] and m.added == ["a", "g.y"]


def test_a_map_naming_unknown_circles_or_one_target_twice_is_a_problem():
    new = template(waits("a"), waits("b2", "a"), waits("c", "b2"), circle("done", "c"))
    assert map_problems(V1, new, {"b": "b2"}) == []
    problems = map_problems(V1, new, {"nope": "b2", "b": "missing", "c": "b2"})
    assert "map: 'nope' is no circle of the old version" in problems
    assert "map: 'missing' is no circle of the new version" in problems
    assert "map: 'nope' and 'c' both map to 'b2'" in problems


# ------------------------------------------------------------- what is kept
def test_finished_circles_keep_results_attempts_and_epoch_and_new_ones_start_waiting(engine):
    inst = start(engine)
    finish(engine, inst, "a", {"x": "1"})
    mark = engine.bookmark(inst, "b")
    kept = inst.circles["a"]
    new = template(waits("a"), waits("b", "a"), waits("c", "b"), waits("d", "c"),
                   circle("done", "d"))
    m = move(engine, inst, new)
    assert m.added == ["d"] and m.removed == []
    assert inst.template is new and inst.version == 2
    assert inst.circles["a"] is kept and kept.result == {"x": "1"}
    assert inst.circles["d"].pristine
    # the kept ready circle's bookmark still works, and the flow goes on through `d`
    engine.complete(inst, "b", mark, {"x": "2"})
    finish(engine, inst, "c")
    assert engine.ready(inst) == ["d"]
    finish(engine, inst, "d")
    assert inst.status == "completed"


def test_the_migration_is_recorded_with_what_changed(engine):
    inst = start(engine)
    inst.drain_events()
    new = template(waits("a"), waits("b2", "a"), waits("n", "b2"), circle("done", "n"))
    move(engine, inst, new, {"b": "b2"})
    event = inst.events[0]
    assert event.kind == MIGRATED and event.actor == "admin"
    assert event.data == {"from": 1, "to": 2, "map": {"b": "b2"}, "added": ["n"],
                          "removed": ["c"]}
    assert event.before == {"version": 1} and event.after == {"version": 2}


def test_a_renamed_circle_keeps_its_state_under_its_new_uri(engine):
    inst = start(engine)
    finish(engine, inst, "a", {"x": "1"})
    finish(engine, inst, "b", {"x": "2"})
    new = template(waits("a"), waits("bee", "a"), waits("c", "bee"), circle("done", "c"))
    move(engine, inst, new, {"b": "bee"})
    assert "b" not in inst.circles
    assert inst.circles["bee"].state == "success" and inst.circles["bee"].result == {"x": "2"}
    assert engine.ready(inst) == ["c"]


def test_moves_on_a_copy_leave_the_instance_copied_as_it_was(engine):
    """`Instance.copy` (what a store's step changes): a migration and the steps after it
    change the copy only, its circles' runs included."""
    inst = start(engine)
    finish(engine, inst, "a", {"x": "1"})
    inst.drain_events()
    before = inst.to_dict()
    twin = inst.copy()
    new = template(waits("a"), waits("bee", "a"), waits("c", "bee"), circle("done", "c"))
    move(engine, twin, new, {"b": "bee"})
    finish(engine, twin, "bee", {"x": "2"})
    assert twin.version == 2 and twin.circles["bee"].state == "success" and twin.events
    assert inst.to_dict() == before and inst.template is V1 and inst.events == []
    assert inst.circles["b"].state == "waiting" and engine.ready(inst) == ["b"]


def test_new_circles_after_finished_ones_become_ready_at_once(engine):
    inst = start(engine)
    finish(engine, inst, "a")
    new = template(waits("a"), waits("side", "a"), waits("b", "a"), waits("c", "b"),
                   circle("done", ["c"], ["side"]))
    move(engine, inst, new)
    assert sorted(engine.ready(inst)) == ["b", "side"]


def test_removing_the_failed_circle_of_a_failed_instance_lets_it_run_again(engine):
    tpl = template(waits("a"), waits("b", "a"), circle("done", "b"))
    inst = start(engine, tpl)
    finish(engine, inst, "a")
    fail(engine, inst, "b")
    assert inst.status == "failed"
    new = template(waits("a"), waits("alt", "a"), circle("done", "alt"))
    m = move(engine, inst, new)
    assert m.removed == ["b"] and inst.status == "running"
    assert engine.ready(inst) == ["alt"]


def test_a_suspended_instance_moves_and_goes_on_once_resumed(engine):
    inst = start(engine)
    finish(engine, inst, "a")
    engine.suspend(inst)
    new = template(waits("a"), waits("n", "a"), waits("b", "n"), waits("c", "b"),
                   circle("done", "c"))
    move(engine, inst, new)
    assert inst.status == "suspended" and engine.ready(inst) == []
    engine.resume(inst)
    assert engine.ready(inst) == ["n"]


def test_a_ready_circle_that_gets_a_new_circle_before_it_waits_again(engine):
    inst = start(engine)
    finish(engine, inst, "a")
    mark = engine.bookmark(inst, "b")
    new = template(waits("a"), waits("n", "a"), waits("b", "n"), waits("c", "b"),
                   circle("done", "c"))
    move(engine, inst, new)
    assert engine.ready(inst) == ["n"]
    assert inst.circles["b"].ready_at is None and inst.circles["b"].state == "waiting"
    finish(engine, inst, "n")
    with pytest.raises(BookmarkError):  # a new attempt: the old bookmark is void
        engine.complete(inst, "b", mark, {})
    finish(engine, inst, "b")
    assert engine.ready(inst) == ["c"]


# ------------------------------------------------------------------ refusals
def test_only_running_failed_or_suspended_instances_at_the_source_version_move(engine):
    done = start(engine, template(waits("a"), circle("done", "a")))
    finish(engine, done, "a")
    assert done.status == "completed"
    new = template(waits("a"), waits("b", "a"), circle("done", "b"))
    assert refusal(engine, done, new) == [
        "it is completed: only running, failed or suspended instances are migrated"]
    gone = start(engine, template(waits("a"), circle("done", "a")))
    engine.abort(gone)
    gone.drain_events()
    assert "it is terminated" in refusal(engine, gone, new)[0]
    running = start(engine, template(waits("a"), circle("done", "a")))
    running.drain_events()
    assert refusal(engine, running, new, source=3) == ["it is at version 1, not 3"]
    other = template(waits("a"), circle("done", "a"), name="other")
    assert refusal(engine, running, other) == [
        "it is an instance of 't', not of 'other'"]


def _staged(engine, inst, cid, info):
    engine.mark_pending(inst, cid, engine.bookmark(inst, cid), info)


@pytest.mark.parametrize("work, said", [
    ("claim", "its task is claimed by fred"),
    ("form", "a form was sent for its action"),
    ("approval", "an approval is out"),
])
def test_a_removed_circle_with_work_in_flight_refuses_the_instance(engine, work, said):
    tpl = template(waits("a"), circle("b", "a", assign={"roles": ["finance"]}, box={
        "form": [{"name": "x", "type": "string"}],
        "action": {"type": "http", "method": "POST", "url": "http://127.0.0.1:1/x"}}),
        circle("done", "b"))
    inst = start(engine, tpl)
    finish(engine, inst, "a")
    if work == "claim":
        assert engine.claim(inst, "b", "fred")
    elif work == "form":
        _staged(engine, inst, "b", {"form": {"x": "1"}})
    else:
        _staged(engine, inst, "b", {"approval": {"to": ["ann"]}})
    assert in_flight(inst.circles["b"]) == said
    inst.drain_events()
    new = template(waits("a"), circle("done", "a"))
    assert refusal(engine, inst, new) == [
        f"circle 'b' is removed but has work in flight ({said})"]


def test_a_removed_ready_circle_without_work_goes_quietly(engine):
    inst = start(engine)
    finish(engine, inst, "a")
    new = template(waits("a"), waits("c", "a"), circle("done", "c"))
    m = move(engine, inst, new)
    assert m.removed == ["b"] and engine.ready(inst) == ["c"]


def test_a_removed_finished_circle_is_refused_unless_a_kept_one_carries_it_on(engine):
    inst = start(engine, template(waits("a"), waits("b", "a"), waits("c", "b"),
                                  waits("d", "c"), circle("done", "d")))
    finish(engine, inst, "a")
    finish(engine, inst, "b")
    inst.drain_events()
    new = template(waits("a"), waits("c", "a"), waits("d", "c"), circle("done", "d"))
    assert refusal(engine, inst, new) == [
        "circle 'b' is removed and its result is progress no kept circle carries on"]
    finish(engine, inst, "c")  # now `c`, kept, went on from it
    m = move(engine, inst, new)
    assert m.removed == ["b"] and engine.ready(inst) == ["d"]


def test_a_new_circle_upstream_of_a_finished_one_breaks_the_invariant(engine):
    inst = start(engine)
    finish(engine, inst, "a")
    finish(engine, inst, "b")
    inst.drain_events()
    new = template(waits("a"), waits("n", "a"), waits("b", "n"), waits("c", "b"),
                   circle("done", "c"))
    assert refusal(engine, inst, new) == [
        "circle 'b' is success but would come after 'n', which is waiting (every circle"
        " after a waiting one must be waiting)"]


def test_a_ready_circle_with_work_in_flight_cannot_be_sent_back_to_wait(engine):
    inst = start(engine)
    finish(engine, inst, "a")
    _staged(engine, inst, "b", {"form": {"x": "1"}})
    inst.drain_events()
    new = template(waits("a"), waits("n", "a"), waits("b", "n"), waits("c", "b"),
                   circle("done", "c"))
    reasons = refusal(engine, inst, new)
    assert reasons == ["circle 'b' is ready with work in flight (a form was sent for its"
                       " action) but would wait for circles before it in the new version"]


def test_a_kept_circle_whose_box_changed_under_work_in_flight_is_refused(engine):
    inst = start(engine)
    finish(engine, inst, "a")
    _staged(engine, inst, "b", {"approval": {"to": ["ann"]}})
    inst.drain_events()
    new = template(waits("a"), circle("b", "a", box={"confirm": "Sure?"}), waits("c", "b"),
                   circle("done", "c"))
    assert refusal(engine, inst, new) == [
        "circle 'b' has work in flight (an approval is out) and its box changed"]


def test_every_reason_is_given_and_a_dry_run_says_the_same(engine, clock):
    inst = start(engine)
    finish(engine, inst, "a")
    finish(engine, inst, "b")
    engine.transfer(inst, "c", "bob")
    inst.drain_events()
    new = template(waits("n"), waits("a", "n"), circle("done", "a"))
    reasons = prepare(inst, new, {}, 1, clock()).reasons
    assert refusal(engine, inst, new) == reasons
    assert "circle 'c' is removed but has work in flight (its task is claimed by bob)" in reasons
    assert ("circle 'a' is success but would come after 'n', which is waiting (every circle"
            " after a waiting one must be waiting)") in reasons
    assert "circle 'b' is removed and its result is progress no kept circle carries on" \
        in reasons
    assert len(reasons) == 3
    assert states(inst) == {"a": "success", "b": "success", "c": "waiting",
                            "done": "waiting"}


def test_a_kept_ready_circles_bookmark_is_the_same_token(engine):
    inst = start(engine)
    mark = engine.bookmark(inst, "a")
    new = template(waits("a"), waits("c", "a"), circle("done", "c"))
    move(engine, inst, new)
    bookmarks.verify(engine.key, inst.id, "a", inst.circles["a"].epoch, mark)
    assert engine.view(inst)["a"]["bookmark"] == mark


def test_a_renamed_flow_circle_carries_its_nested_circles_and_their_progress(engine):
    old = template(waits("a"), circle("f", "a", box={"action": {"type": "flow", "circles": [
        waits("x"), waits("y", "x"), circle("end", "y")]}}), circle("done", "f"))
    new = template(waits("a"), circle("g", "a", box={"action": {"type": "flow", "circles": [
        waits("x"), waits("z", "x"), waits("y", "z"), circle("end", "y")]}}),
        circle("done", "g"))
    inst = start(engine, old)
    finish(engine, inst, "a")
    finish(engine, inst, "f.x", {"v": 1})
    mark = engine.bookmark(inst, "f.y")
    m = move(engine, inst, new, {"f": "g"})
    assert m.added == ["g.z"] and m.removed == []
    assert inst.circles["g.x"].result == {"v": 1}
    # `y` now waits for the new `z`: sent back to wait, its old bookmark void
    assert engine.ready(inst) == ["g.z"]
    finish(engine, inst, "g.z")
    with pytest.raises(BookmarkError):
        engine.complete(inst, "g.y", mark, {})
    finish(engine, inst, "g.y")
    assert inst.status == "completed"
    assert inst.circles["g"].result == {"x": {"v": 1}, "z": None, "y": None, "end": None}
