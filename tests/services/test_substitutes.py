"""Substitutes (SPEC §15) on a real store (SQLite and PostgreSQL): who may set one, what
is refused, and what the substitute is offered while it is active: the user's tasks by
name (listed, claimed, completed) and their approval mail (decided as "ann for bob"),
one hop only, for the listed templates only."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bpflow import moves, substitutes
from bpflow.access import Caller
from bpflow.errors import Forbidden, NotFound
from bpflow.mailbox import Mailbox
from bpflow.worker import Worker
from tests.services.helpers import mark, start_approval, users

TASK = {"name": "errand", "circles": [
    {"uri": "do", "assign": {"users": ["bob", "dan"]}, "box": {"confirm": "Done?"}},
    {"uri": "end", "deps": [["do"]]}]}
OTHER = {**TASK, "name": "chore"}


def who(store, name) -> Caller:
    """The caller a token of `name` stands for now (with whom they stand in for)."""
    account = store.account(store.user(name)["id"])
    assert account is not None
    return account


def away(store, user, to, hours=(-1, 24), templates=None, by=None):
    now = store.clock()
    return substitutes.put(store, by or who(store, user), user, to,
                           now + timedelta(hours=hours[0]), now + timedelta(hours=hours[1]),
                           templates)


def tasks_of(store, name, assigned="all"):
    return [(r.instance_id, r.circle) for r in store.tasks(who(store, name), assigned)[0]]


def test_set_read_and_clear_ones_own_and_an_admin_anyones(store):
    users(store, "bob", "ann", "cid", "root:admin")
    got = away(store, "bob", "ann")
    assert (got["user"], got["to"], got["active"], got["set_by"], got["templates"]) == \
        ("bob", "ann", True, "bob", None)
    assert substitutes.get(store, who(store, "bob"), "bob") == got
    with pytest.raises(Forbidden, match="only admins may set another user's substitute"):
        away(store, "cid", "ann", by=who(store, "bob"))
    with pytest.raises(Forbidden):
        substitutes.get(store, who(store, "cid"), "bob")
    later = away(store, "cid", "bob", hours=(24, 48), by=who(store, "root"))
    assert (later["active"], later["set_by"]) == (False, "root")
    assert substitutes.clear(store, who(store, "root"), "bob") is True
    assert substitutes.clear(store, who(store, "bob"), "bob") is False
    assert substitutes.get(store, who(store, "bob"), "bob") is None
    with pytest.raises(NotFound):
        substitutes.get(store, who(store, "root"), "nobody")


@pytest.mark.parametrize("to,hours,templates,why", [
    ("bob", (-1, 24), None, "a user cannot be their own substitute"),
    ("zed", (-1, 24), None, "no user 'zed'"),
    ("gone", (-1, 24), None, "no user 'gone'"),
    ("ann", (24, 1), None, "'until' must be after 'from'"),
    ("ann", (-48, -24), None, "'until' is in the past"),
    ("ann", (0, 24 * 400), None, "at most 366 days"),
    ("ann", (-1, 24), ["missing"], "no template missing"),
    ("ann", (-1, 24), [f"t{i}" for i in range(51)], "at most 50 templates"),
])
def test_what_cannot_be_a_substitution_is_refused_with_the_reason(store, to, hours,
                                                                  templates, why):
    users(store, "bob", "ann", "gone")
    store.disable_user("gone")
    with pytest.raises(ValueError, match=why):
        away(store, "bob", to, hours, templates)
    assert substitutes.get(store, who(store, "bob"), "bob") is None


def test_a_cycle_of_substitutes_is_refused(store):
    users(store, "bob", "ann", "cid")
    away(store, "bob", "ann")
    away(store, "ann", "cid")
    with pytest.raises(ValueError, match="lead back to cid: substitutes may not form a cycle"):
        away(store, "cid", "bob")
    with pytest.raises(ValueError, match="lead back to ann"):
        away(store, "ann", "bob")


def test_the_substitute_is_offered_the_users_task_and_may_claim_and_complete_it(store):
    people = users(store, "bob", "ann", "cid", "dan", "starter")
    store.put_template(TASK)
    iid = moves.start(store, Caller.of(people["starter"]), "errand")[0].id
    assert tasks_of(store, "ann") == []
    with pytest.raises(NotFound):  # not hers to see before she stands in
        moves.visible(store, who(store, "ann"), iid)
    away(store, "bob", "ann")
    assert tasks_of(store, "ann") == [(iid, "do")] == tasks_of(store, "ann", "candidate")
    assert tasks_of(store, "ann", "me") == []
    assert tasks_of(store, "cid") == []  # nobody else's
    away(store, "ann", "cid")  # ann's substitute does not stand in for bob: one hop
    assert tasks_of(store, "cid") == []
    inst = moves.claim(store, who(store, "ann"), iid, "do")
    assert inst.circles["do"].task["assignee"] == "ann"
    moves.complete(store, who(store, "ann"), iid, "do", mark(store, iid, "do"), {})
    assert store.get(iid).circles["do"].state == "success"


def test_a_task_bob_holds_is_completed_by_his_substitute(store):
    people = users(store, "bob", "ann", "dan", "starter")
    store.put_template(TASK)
    iid = moves.start(store, Caller.of(people["starter"]), "errand")[0].id
    moves.claim(store, who(store, "bob"), iid, "do")
    away(store, "bob", "ann")
    assert tasks_of(store, "ann") == [(iid, "do")]
    moves.complete(store, who(store, "ann"), iid, "do", mark(store, iid, "do"), {})
    assert store.get(iid).circles["do"].state == "success"


def test_only_the_listed_templates_and_only_while_active(store):
    people = users(store, "bob", "ann", "dan", "starter")
    store.put_template(TASK)
    store.put_template(OTHER)
    errand = moves.start(store, Caller.of(people["starter"]), "errand")[0].id
    chore = moves.start(store, Caller.of(people["starter"]), "chore")[0].id
    away(store, "bob", "ann", templates=["chore"])
    assert tasks_of(store, "ann") == [(chore, "do")]
    with pytest.raises(NotFound):  # not a template she stands in for: not hers to see
        moves.claim(store, who(store, "ann"), errand, "do")
    away(store, "bob", "ann", hours=(1, 24))  # not yet
    assert tasks_of(store, "ann") == []
    with pytest.raises(NotFound):
        moves.claim(store, who(store, "ann"), chore, "do")


def test_the_substitute_decides_the_users_approval_as_ann_for_bob(store, units):
    iid, people = start_approval(store, units, ["cid", "dan"], "all")
    users(store, "eve")
    box = Mailbox(store)
    assert box.inbox(who(store, "eve"), kind="approval") == []
    away(store, "cid", "eve")
    mine = box.inbox(who(store, "eve"), kind="approval", status="pending")
    assert [m["payload"]["approver"] for m in mine] == ["cid"]
    assert store.mail_counts(who(store, "eve"))["approval"]["pending"] == 1
    assert moves.visible(store, who(store, "eve"), iid).id == iid  # she may follow it
    with pytest.raises(NotFound):  # dan's is not hers
        dan = box.inbox(people["dan"], kind="approval")[0]
        box.decide(dan["id"], who(store, "eve"), "approved")
    decided = box.decide(mine[0]["id"], who(store, "eve"), "approved", "fine")
    assert (decided["decision"], decided["decided_by"], decided["signature_ok"]) == \
        ("approved", "eve for cid", True)
    assert box.inbox(people["cid"], kind="approval")[0]["decided_by"] == "eve for cid"
    assert [m["decided_by"] for m in box.inbox(who(store, "eve"), kind="approval")] == \
        ["eve for cid"]
    box.decide(box.inbox(people["dan"], kind="approval")[0]["id"], people["dan"], "approved")
    done = [e for e in store.history(iid) if e["kind"] == "circle_succeeded"
            and e["circle"] == "approve"]
    assert [e["actor"] for e in done] == ["dan"]
    result = store.get(iid).circles["approve"].result
    assert {d["approver"] for d in result["decisions"]} == {"cid", "dan"}  # cid's decision


def test_a_substitutes_decision_settling_the_approval_is_in_the_history(store, units):
    iid, people = start_approval(store, units, ["cid"], "any")
    users(store, "eve")
    away(store, "cid", "eve")
    box = Mailbox(store)
    box.decide(box.inbox(who(store, "eve"), kind="approval")[0]["id"], who(store, "eve"),
               "rejected", "not now")
    failed = [e for e in store.history(iid) if e["kind"] == "circle_failed"]
    assert [e["actor"] for e in failed] == ["eve for cid"]
    Worker(store).run_once()


def test_after_the_substitution_ends_the_mail_is_no_longer_hers(store, units):
    iid, people = start_approval(store, units, ["cid"], "any")
    users(store, "eve")
    away(store, "cid", "eve")
    mail = Mailbox(store).inbox(who(store, "eve"), kind="approval")[0]
    substitutes.clear(store, who(store, "cid"), "cid")
    assert Mailbox(store).inbox(who(store, "eve"), kind="approval") == []
    with pytest.raises(NotFound):
        Mailbox(store).decide(mail["id"], who(store, "eve"), "approved")
