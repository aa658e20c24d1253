"""People's work on circles (SPEC §10): candidates, claims, delegation, escalation, due
times, withdraw and return — and the analysis of `assign`, `due`, `escalate`, `user`."""

from __future__ import annotations

import pytest

from engine.analysis import analyze
from engine.errors import ReturnTargetError, TransitionError
from tests.engine.helpers import FORM, circle, finish, template, waits

ALICE = {"id": 1, "username": "alice", "roles": ["user"]}
CONFIRM = {"confirm": "Pay?"}


def claim_flow(**review):
    return template(
        circle("claim", box={"form": [{"name": "manager", "type": "user"}]}),
        circle("review", "claim", box=CONFIRM, **review),
        circle("done", "review"))


def codes(body):
    return sorted((e["code"], e["path"]) for e in analyze(body).errors)


# ------------------------------------------------------------------ candidates
def test_without_assign_the_starter_holds_the_task(engine):
    inst = engine.start(template(waits("a"), circle("end", "a")), user=ALICE)
    task = inst.circles["a"].task
    assert task["users"] == ["alice"] and task["roles"] == [] and task["assignee"] == "alice"
    view = engine.view(inst)["a"]
    assert view["assignee"] == "alice" and view["candidates"] == {"users": ["alice"],
                                                                  "roles": []}


def test_roles_and_users_are_candidates_nobody_holds_it_yet(engine):
    tpl = claim_flow(assign={"users": ["${claim.manager}", "carol"], "roles": ["finance"]})
    inst = engine.start(tpl, user=ALICE)
    assert inst.circles["claim"].task["assignee"] == "alice"
    finish(engine, inst, "claim", {"manager": "bob"})
    task = inst.circles["review"].task
    assert task == {"users": ["bob", "carol"], "roles": ["finance"], "assignee": None,
                    "due_at": None, "escalated": False}
    ready = [e for e in inst.events if e.kind == "circle_ready" and e.circle == "review"]
    assert ready[-1].data["task"]["users"] == ["bob", "carol"]


def test_one_user_and_no_role_is_assigned_at_once(engine):
    inst = engine.start(claim_flow(assign={"users": ["${claim.manager}"]}), user=ALICE)
    finish(engine, inst, "claim", {"manager": "bob"})
    assert inst.circles["review"].task["assignee"] == "bob"


def test_a_placeholder_resolving_to_a_list_gives_several(engine):
    tpl = template(circle("pick", box=FORM),
                   circle("c", "pick", box=CONFIRM, assign={"users": ["${pick.who}"]}),
                   circle("end", "c"))
    inst = engine.start(tpl, user=ALICE)
    finish(engine, inst, "pick", {"who": ["bob", "carol", "bob"]})
    assert inst.circles["c"].task["users"] == ["bob", "carol"]


def test_a_placeholder_that_names_no_user_fails_the_circle(engine):
    tpl = template(circle("pick", box=FORM),
                   circle("c", "pick", box=CONFIRM, assign={"users": ["${pick.who}"]}),
                   circle("end", "c"))
    inst = engine.start(tpl, user=ALICE)
    finish(engine, inst, "pick", {"who": 42})
    assert inst.circles["c"].state == "failure" and "must name a user" in inst.circles["c"].reason


def test_due_time_is_counted_from_ready(engine, clock):
    inst = engine.start(template(waits("a", due=3600), circle("end", "a")), user=ALICE)
    due = inst.circles["a"].task["due_at"]
    assert due == (clock.now.replace(hour=10)).isoformat()


# ------------------------------------------------------------------ claims
def test_claim_unclaim_transfer_are_history_events(engine):
    inst = engine.start(claim_flow(assign={"roles": ["finance"]}), user=ALICE)
    finish(engine, inst, "claim", {"manager": "bob"})
    assert engine.claim(inst, "review", "fred", actor="fred") is True
    assert engine.claim(inst, "review", "fred", actor="fred") is True  # already theirs
    assert engine.claim(inst, "review", "gina", actor="gina") is False  # fred holds it
    engine.transfer(inst, "review", "gina", actor="fred")
    assert inst.circles["review"].task["assignee"] == "gina"
    engine.unclaim(inst, "review", actor="gina")
    assert inst.circles["review"].task["assignee"] is None
    with pytest.raises(TransitionError):
        engine.unclaim(inst, "review", actor="gina")
    kinds = [(e.kind, e.actor, e.data) for e in inst.events if e.kind.startswith("task_")]
    assert kinds == [("task_claimed", "fred", {"assignee": "fred"}),
                     ("task_transferred", "fred", {"from": "fred", "to": "gina"}),
                     ("task_unclaimed", "gina", {"from": "gina"})]


def test_a_delegate_answers_and_the_answer_waits_for_its_assignee(engine):
    """Delegate (委派): the task keeps its assignee; the delegate's answer is kept on it
    (once), and a transfer asks the delegate no more."""
    inst = engine.start(claim_flow(assign={"roles": ["finance"]}), user=ALICE)
    finish(engine, inst, "claim", {"manager": "bob"})
    engine.claim(inst, "review", "fred", actor="fred")
    engine.delegate(inst, "review", "hal", actor="fred", comment="you know this one")
    task = inst.circles["review"].task
    assert task["assignee"] == "fred" and task["delegate"] == {
        "from": "fred", "to": "hal", "comment": "you know this one", "answer": None}
    with pytest.raises(TransitionError, match="hal's answer"):
        engine.delegate(inst, "review", "gina", actor="fred")
    engine.answer(inst, "review", {"accept": True, "reason": ""}, actor="hal")
    task = inst.circles["review"].task
    assert task["delegate"]["answer"] == {"accept": True, "reason": ""}
    assert task["delegate"]["answered_at"]
    with pytest.raises(TransitionError, match="nobody was asked"):
        engine.answer(inst, "review", {"accept": False, "reason": ""}, actor="hal")
    engine.transfer(inst, "review", "gina", actor="fred")
    assert inst.circles["review"].task["delegate"] is None
    kinds = [(e.kind, e.actor) for e in inst.events if e.kind.startswith("task_")]
    assert kinds[1:] == [("task_delegated", "fred"), ("task_answered", "hal"),
                         ("task_transferred", "fred")]
    assert inst.circles["review"].state == "waiting"  # only its assignee completes it


def test_claim_needs_a_ready_person_task(engine):
    inst = engine.start(claim_flow(assign={"roles": ["finance"]}), user=ALICE)
    with pytest.raises(TransitionError):
        engine.claim(inst, "review", "fred")  # not ready yet
    with pytest.raises(TransitionError):
        engine.claim(inst, "nope", "fred")


def test_the_task_of_a_new_attempt_starts_unclaimed(engine):
    tpl = claim_flow(assign={"roles": ["finance"]}, retry=[0])
    inst = engine.start(tpl, user=ALICE)
    finish(engine, inst, "claim", {"manager": "bob"})
    engine.claim(inst, "review", "fred")
    engine.fail(inst, "review", engine.bookmark(inst, "review"), "declined")
    engine.tick(inst)
    assert inst.circles["review"].attempts == 1
    assert inst.circles["review"].task["assignee"] is None


# ------------------------------------------------------------------ escalation
def test_escalate_replaces_the_candidates_once(engine, clock):
    tpl = claim_flow(assign={"roles": ["finance"]},
                     timeout={"seconds": 60, "policy": "escalate",
                              "to": {"users": ["boss"], "roles": ["admin"]}})
    inst = engine.start(tpl, user=ALICE)
    finish(engine, inst, "claim", {"manager": "bob"})
    engine.claim(inst, "review", "fred")
    assert engine.wake_at(inst) == clock.now.replace(minute=1)
    clock.advance(59)
    engine.tick(inst)
    assert inst.circles["review"].task["roles"] == ["finance"]
    clock.advance(1)
    engine.tick(inst)
    task = inst.circles["review"].task
    assert task["users"] == ["boss"] and task["roles"] == ["admin"]
    assert task["assignee"] is None and task["escalated"]
    assert inst.circles["review"].state == "waiting" and inst.status == "running"
    event = [e for e in inst.events if e.kind == "task_escalated"]
    assert len(event) == 1 and event[0].actor == "worker"
    assert event[0].data["from"] == {"users": [], "roles": ["finance"], "assignee": "fred"}
    assert engine.wake_at(inst) is None  # escalated once; nothing more happens by itself
    clock.advance(3600)
    engine.tick(inst)
    assert len([e for e in inst.events if e.kind == "task_escalated"]) == 1


# ------------------------------------------------------------------ send back
def test_withdraw_sends_the_task_back_to_the_circle_before(engine):
    inst = engine.start(claim_flow(assign={"roles": ["finance"]}), user=ALICE)
    finish(engine, inst, "claim", {"manager": "bob"})
    epoch = inst.circles["review"].epoch
    changed = engine.send_back(inst, "review", "withdrawn", actor="alice")
    assert changed == ["claim", "review"]
    assert engine.ready(inst) == ["claim"] and inst.circles["review"].state == "waiting"
    assert inst.circles["review"].epoch > epoch and inst.circles["review"].task is None
    event = [e for e in inst.events if e.kind == "circle_withdrawn"][0]
    assert event.actor == "alice" and event.data["back_to"] == ["claim"]


def test_withdraw_refuses_what_is_not_pending(engine):
    inst = engine.start(claim_flow(), user=ALICE)
    with pytest.raises(TransitionError, match="nothing comes before"):
        engine.send_back(inst, "claim", "withdrawn")
    with pytest.raises(TransitionError, match="not a pending"):
        engine.send_back(inst, "review", "withdrawn")  # not ready
    with pytest.raises(TransitionError, match="not a pending approval or task"):
        engine.send_back(inst, "review", "returned")


def test_return_of_an_approval_with_a_comment(engine):
    tpl = template(circle("claim", box=FORM),
                   circle("approve", "claim", box={"action": {"type": "approval",
                                                              "to": "bob"}}),
                   circle("end", "approve"))
    inst = engine.start(tpl, user=ALICE)
    finish(engine, inst, "claim", {"x": "1"})
    engine.mark_pending(inst, "approve", engine.bookmark(inst, "approve"),
                        {"approval": {"approvers": ["bob"]}})
    engine.send_back(inst, "approve", "returned", actor="bob", comment="receipt missing")
    assert engine.ready(inst) == ["claim"]
    event = [e for e in inst.events if e.kind == "circle_returned"][0]
    assert event.actor == "bob" and event.data["comment"] == "receipt missing"


def three_steps():
    """A claim, a check by finance, then bob's approval."""
    return template(circle("start"),
                    circle("claim", "start", box={"form": [
                        {"name": "amount", "type": "number"},
                        {"name": "reason", "type": "string"}]}),
                    circle("check", "claim", box=FORM, assign={"users": ["fred"]}),
                    circle("approve", "check", box={"action": {"type": "approval",
                                                               "to": "bob"}}),
                    circle("end", "approve"))


def at_approval(engine):
    inst = engine.start(three_steps(), user=ALICE)
    finish(engine, inst, "claim", {"amount": 12.5, "reason": "taxi"})
    finish(engine, inst, "check", {"x": "ok"})
    engine.mark_pending(inst, "approve", engine.bookmark(inst, "approve"),
                        {"approval": {"approvers": ["bob"]}})
    return inst


def test_return_targets_are_the_succeeded_steps_upstream_and_the_start(engine):
    inst = at_approval(engine)
    assert engine.return_targets(inst, "approve") == ["start", "claim", "check", "@start"]
    with pytest.raises(TransitionError):
        engine.return_targets(inst, "check")  # done: nothing waits there


def test_return_to_a_chosen_step_resets_from_there_and_keeps_the_answers(engine):
    inst = at_approval(engine)
    changed = engine.send_back(inst, "approve", "returned", actor="bob",
                               comment="please attach the receipt", to="claim")
    assert changed == ["claim", "check", "approve"]
    assert engine.ready(inst) == ["claim"] and inst.circles["start"].state == "success"
    returned = inst.circles["claim"].task["returned"]
    assert returned["by"] == "bob" and returned["comment"] == "please attach the receipt"
    assert returned["answer"] == {"amount": 12.5, "reason": "taxi"}
    assert returned["step"] == "approve" and returned["kind"] == "returned"
    assert engine.view(inst)["claim"]["returned"] == returned
    event = [e for e in inst.events if e.kind == "circle_returned"][-1]
    assert event.data["to"] == "claim" and event.data["back_to"] == ["claim"]
    finish(engine, inst, "claim", {"amount": 12.5, "reason": "taxi, receipt attached"})
    assert "returned" not in (inst.circles["check"].task or {})  # a new attempt: fresh


def test_return_to_the_start_sends_it_back_to_the_first_form(engine):
    inst = at_approval(engine)
    changed = engine.send_back(inst, "approve", "returned", actor="bob", comment="why?",
                               to="@start")
    assert changed == ["start", "claim", "check", "approve"]
    assert engine.ready(inst) == ["claim"]  # the empty first circle ran again at once
    assert inst.circles["claim"].task["returned"]["answer"]["reason"] == "taxi"


def test_return_without_to_goes_back_one_step_as_before(engine):
    inst = at_approval(engine)
    assert engine.send_back(inst, "approve", "returned", actor="bob") == ["check", "approve"]
    assert engine.ready(inst) == ["check"]
    assert inst.circles["check"].task["returned"]["answer"] == {"x": "ok"}


@pytest.mark.parametrize("to", ["approve", "end", "nowhere", "", "@START", "check.x"])
def test_return_to_a_step_not_allowed_is_refused_and_changes_nothing(engine, to):
    inst = at_approval(engine)
    seq = inst.seq
    with pytest.raises(ReturnTargetError, match="can be returned to"):
        engine.send_back(inst, "approve", "returned", actor="bob", to=to)
    assert inst.seq == seq and inst.circles["approve"].state == "waiting"


def test_a_task_may_be_returned_to_an_earlier_step(engine):
    inst = engine.start(three_steps(), user=ALICE)
    finish(engine, inst, "claim", {"amount": 3, "reason": "bus"})
    assert engine.return_targets(inst, "check") == ["start", "claim", "@start"]
    engine.send_back(inst, "check", "returned", actor="fred", comment="amount?", to="claim")
    assert engine.ready(inst) == ["claim"]
    assert inst.circles["claim"].task["returned"]["by"] == "fred"


def test_a_ready_timer_shows_when_it_fires(engine, clock):
    inst = engine.start(template(circle("t", box={"action": {"type": "timer", "delay": 90}}),
                                 circle("end", "t")))
    assert engine.view(inst)["t"]["next_attempt_at"] == clock.now.replace(
        minute=1, second=30).isoformat()


# ------------------------------------------------------------------ analysis
def body(*circles, **extra):
    return {"name": "t", "circles": list(circles), **extra}


def test_well_formed_people_fields_pass():
    ok = body(circle("a", box={"form": [{"name": "m", "type": "user", "role": "approver"}]}),
              circle("b", "a", box=CONFIRM, assign={"users": ["${a.m}"], "roles": ["finance"]},
                     due=3600, timeout={"seconds": 60, "policy": "escalate",
                                        "to": {"roles": ["admin"]}}),
              circle("end", "b"))
    assert analyze(ok).valid, analyze(ok).errors


@pytest.mark.parametrize("bad, expected", [
    ({"assign": []}, ("schema", "/circles/0/assign")),
    ({"assign": {"users": "bob"}}, ("invalid_box", "/circles/0/assign")),
    ({"assign": {}}, ("invalid_box", "/circles/0/assign")),
    ({"assign": {"roles": ["Finance!"]}}, ("invalid_box", "/circles/0/assign")),
    ({"assign": {"groups": ["x"]}}, ("invalid_box", "/circles/0/assign")),
    ({"due": "soon"}, ("schema", "/circles/0/due")),
    ({"due": -1}, ("invalid_timeout", "/circles/0/due")),
    ({"timeout": {"seconds": 5, "policy": "escalate"}}, ("invalid_timeout",
                                                          "/circles/0/timeout")),
    ({"timeout": {"seconds": 5, "policy": "fail", "to": {"roles": ["a"]}}},
     ("invalid_timeout", "/circles/0/timeout")),
])
def test_malformed_people_fields_are_errors_with_paths(bad, expected):
    assert expected in codes(body(circle("a", box=FORM, **bad), circle("end", "a")))


def test_assign_on_a_circle_nobody_acts_on_is_refused():
    found = codes(body(circle("a", box={"action": {"type": "mail", "to": "x"}},
                              assign={"roles": ["x"]}), circle("end", "a")))
    assert ("invalid_box", "/circles/0/assign") in found


def test_assign_placeholders_are_checked_like_any_other():
    found = codes(body(circle("a", box=FORM, assign={"users": ["${later.who}"]}),
                       circle("later", "a", box=FORM), circle("end", "later")))
    assert ("unknown_variable", "/circles/0/assign/users/0") in found
    found = codes(body(circle("a", box=FORM, timeout={
        "seconds": 1, "policy": "escalate", "to": {"users": ["${nobody.x}"]}}),
        circle("end", "a")))
    assert ("unknown_variable", "/circles/0/timeout/to/users/0") in found


def test_user_field_role_is_checked():
    found = codes(body(circle("a", box={"form": [{"name": "m", "type": "string",
                                                   "role": "x"}]}), circle("end", "a")))
    assert ("invalid_box", "/circles/0/box/form/0/role") in found
    found = codes(body(circle("a", box={"form": [{"name": "m", "type": "user",
                                                   "role": "Not A Role"}]}), circle("end", "a")))
    assert ("invalid_box", "/circles/0/box/form/0/role") in found
