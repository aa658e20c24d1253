"""Copies and reminders (SPEC §15): the `cc` and `remind` circle fields, their analysis,
and what the engine says is owed and when (`engine.nudges`, `Engine.wake_at`)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engine import nudges
from engine.analysis import analyze
from tests.engine.helpers import FORM, circle, finish, template, waits

ALICE = {"id": 1, "username": "alice", "roles": ["user"]}
CONFIRM = {"confirm": "Pay?"}
APPROVAL = {"action": {"type": "approval", "to": ["bob"], "subject": "s", "body": "b"}}


def body(*circles):
    return {"name": "t", "circles": list(circles)}


def codes(raw):
    return sorted((e["code"], e["path"]) for e in analyze(raw).errors)


# ------------------------------------------------------------------ analysis
def test_well_formed_cc_and_remind_pass():
    ok = body(circle("a", box={"form": [{"name": "m", "type": "user"}]}),
              circle("b", "a", box=CONFIRM, due=7200, cc={"users": ["${a.m}", "carol"],
                                                           "roles": ["finance"], "on": "ready"},
                     remind={"before_due": 600, "every": 3600}),
              circle("c", "b", box=APPROVAL, remind={"every": 86400}, cc={"users": ["dave"]}),
              circle("end", "c"))
    assert analyze(ok).valid, analyze(ok).errors


@pytest.mark.parametrize("bad, expected", [
    ({"cc": []}, ("schema", "/circles/0/cc")),
    ({"cc": {}}, ("invalid_box", "/circles/0/cc")),
    ({"cc": {"users": ["bob"], "on": "later"}}, ("invalid_box", "/circles/0/cc")),
    ({"cc": {"users": "bob"}}, ("invalid_box", "/circles/0/cc")),
    ({"cc": {"groups": ["x"]}}, ("invalid_box", "/circles/0/cc")),
    ({"remind": {}}, ("invalid_timeout", "/circles/0/remind")),
    ({"remind": {"every": 5}}, ("invalid_timeout", "/circles/0/remind")),
    ({"remind": {"every": "daily"}}, ("invalid_timeout", "/circles/0/remind")),
    ({"remind": {"after": 60}}, ("invalid_timeout", "/circles/0/remind")),
    ({"remind": {"before_due": 60}}, ("invalid_timeout", "/circles/0/remind/before_due")),
    ({"remind": {"before_due": 0}, "due": 60}, ("invalid_timeout", "/circles/0/remind")),
])
def test_malformed_cc_and_remind_are_errors_with_paths(bad, expected):
    assert expected in codes(body(circle("a", box=FORM, **bad), circle("end", "a")))


def test_remind_on_a_circle_nobody_waits_for_is_refused():
    found = codes(body(circle("a", box={"action": {"type": "mail", "to": "x"}},
                              remind={"every": 60}), circle("end", "a")))
    assert ("invalid_timeout", "/circles/0/remind") in found


def test_cc_placeholders_are_checked_like_assigns():
    found = codes(body(circle("a", box=FORM, cc={"users": ["${later.who}"]}),
                       circle("later", "a", box=FORM), circle("end", "later")))
    assert ("unknown_variable", "/circles/0/cc/users/0") in found
    found = codes(body(circle("a", box=FORM, cc={"users": ["${a.x"]}), circle("end", "a")))
    assert ("invalid_expression", "/circles/0/cc/users/0") in found


# ------------------------------------------------------------------ copies owed
def test_a_copy_on_done_is_owed_once_the_circle_succeeds(engine, clock):
    tpl = template(waits("a", cc={"users": ["carol"]}), circle("end", "a"))
    inst = engine.start(tpl, user=ALICE)
    assert nudges.owed(inst) == [] and engine.wake_at(inst) is None
    clock.advance(10)
    finish(engine, inst, "a", {"x": "1"})
    assert inst.status == "completed"
    assert nudges.owed(inst) == ["a"]
    assert engine.wake_at(inst) is not None  # a completed flow still owes its copy
    nudges.sent_cc(inst, engine.clock, "a", ["carol"], "worker")
    assert nudges.owed(inst) == [] and engine.wake_at(inst) is None
    event = inst.events[-1]
    assert (event.kind, event.circle, event.data) == ("cc_sent", "a", {"users": ["carol"]})


def test_a_copy_on_ready_is_owed_as_soon_as_it_waits(engine):
    tpl = template(waits("a", cc={"users": ["carol"], "on": "ready"}), circle("end", "a"))
    inst = engine.start(tpl, user=ALICE)
    assert nudges.owed(inst) == ["a"]
    assert engine.wake_at(inst) == inst.circles["a"].ready_at
    nudges.sent_cc(inst, engine.clock, "a", ["carol"], "worker")
    finish(engine, inst, "a", {"x": "1"})
    assert nudges.owed(inst) == []  # sent for this attempt, not again on done


def test_a_terminated_flow_owes_no_copy(engine):
    tpl = template(waits("a", cc={"users": ["carol"], "on": "ready"}), circle("end", "a"))
    inst = engine.start(tpl, user=ALICE)
    engine.abort(inst)
    assert nudges.owed(inst) == [] and engine.wake_at(inst) is None


# ------------------------------------------------------------------ urges, reminders
def test_urging_again_waits_an_hour(engine, clock):
    inst = engine.start(template(waits("a"), circle("end", "a")), user=ALICE)
    run = inst.circles["a"]
    assert nudges.urge_wait(run, clock()) == 0
    nudges.urged(inst, engine.clock, "a", ["alice"], "alice", "please")
    assert nudges.urge_wait(inst.circles["a"], clock()) == 3600
    clock.advance(3599)
    assert nudges.urge_wait(inst.circles["a"], clock()) == 1
    clock.advance(1)
    assert nudges.urge_wait(inst.circles["a"], clock()) == 0
    event = inst.events[-1]
    assert (event.kind, event.actor, event.data) == ("urge_sent", "alice",
                                                     {"users": ["alice"], "comment": "please"})


def test_remind_every_and_before_due_wake_the_flow(engine, clock):
    tpl = template(waits("a", due=7200, remind={"every": 3000, "before_due": 600}),
                   circle("end", "a"))
    inst = engine.start(tpl, user=ALICE)
    start = clock()
    assert engine.wake_at(inst) == start + timedelta(seconds=3000)
    clock.advance(3000)
    nudges.reminded(inst, engine.clock, "a", ["alice"])
    # the next: every (6000 s) before before_due (6600 s)
    assert engine.wake_at(inst) == start + timedelta(seconds=6000)
    clock.advance(3000)
    nudges.reminded(inst, engine.clock, "a", ["alice"])
    assert engine.wake_at(inst) == start + timedelta(seconds=6600)
    clock.advance(600)
    nudges.reminded(inst, engine.clock, "a", ["alice"])
    assert engine.wake_at(inst) == start + timedelta(seconds=9600)
    finish(engine, inst, "a", {"x": "1"})
    assert engine.wake_at(inst) is None  # answered: nobody is reminded any more
    reminders = [e for e in inst.events if e.kind == "urge_sent"]
    assert len(reminders) == 3 and reminders[0].data == {"users": ["alice"], "remind": True}


def test_a_reminder_of_an_earlier_attempt_does_not_count(engine, clock):
    tpl = template(waits("a", remind={"every": 100}), circle("end", "a"))
    inst = engine.start(tpl, user=ALICE)
    clock.advance(100)
    nudges.reminded(inst, engine.clock, "a", ["alice"])
    clock.advance(5)
    finish(engine, inst, "a", {"x": "1"})
    engine.reset(inst, "a")
    assert engine.wake_at(inst) == clock() + timedelta(seconds=100)
