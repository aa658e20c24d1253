"""Approval rounds as business teams run them (SPEC §15) through the store (SQLite and
PostgreSQL): a sequence asked one by one, a vote by ratio, the first decision of "any"
settling, signers added before, after and with an addressee, signers removed; who may do
it, what is refused, what the history and the feed say, a race with a decision, and the
decision that settles a round taking its step with it."""

from __future__ import annotations

import json
import threading

import pytest
from sqlalchemy import text

from bpflow.errors import Conflict, Forbidden, NotFound, Tampered
from bpflow.forms import FormError
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.worker import Worker
from tests.conftest import SECRET, settled
from tests.services.helpers import approval_flow, mark, users

PEOPLE = ("bob", "ann:approver", "cid:approver", "dan:approver", "eve:approver",
          "fay:approver", "gus:approver", "zed", "root:admin")


def start(store, units, to, quorum):
    """bob's claim of 120 waiting for the approval of `to`."""
    people = users(store, *PEOPLE)
    store.put_template(approval_flow(to, quorum))
    iid = store.start("expense", {}, people["bob"]).id
    units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 120})
    Worker(store).run_once()
    return iid, people


def inbox(store, people, name):
    return Mailbox(store).inbox(people[name], kind="approval")


def mail(store, people, name):
    box = inbox(store, people, name)
    assert len(box) == 1, (name, box)
    return box[0]


def state(store, iid):
    return store.get(iid).circles["approve"].state


def decide(store, people, name, decision="approved", comment=""):
    return Mailbox(store).decide(mail(store, people, name)["id"], people[name], decision,
                                 comment)


def every_mail_signed_over(store, people, names, approvers):
    for name in names:
        m = mail(store, people, name)
        assert m["signature_ok"], (name, m["problem"])
        assert m["payload"]["approvers"] == approvers


# ---------------------------------------------------------------- the quorums
def test_a_sequence_asks_each_after_the_previous_approval(store, units):
    iid, people = start(store, units, ["ann", "cid", "dan"], "sequence")
    assert [len(inbox(store, people, n)) for n in ("ann", "cid", "dan")] == [1, 0, 0]
    decide(store, people, "ann", comment="ok")
    assert [len(inbox(store, people, n)) for n in ("ann", "cid", "dan")] == [1, 1, 0]
    decide(store, people, "cid")
    assert state(store, iid) == "waiting"
    decide(store, people, "dan")
    assert state(store, iid) == "success"
    result = store.get(iid).circles["approve"].result
    assert [d["approver"] for d in result["decisions"]] == ["ann", "cid", "dan"]


def test_a_rejection_settles_a_sequence_and_nobody_later_is_asked(store, units):
    iid, people = start(store, units, ["ann", "cid", "dan"], "sequence")
    decide(store, people, "ann")
    decide(store, people, "cid", "rejected", "too much")
    assert state(store, iid) == "failure"
    assert "cid rejected: too much" in store.get(iid).circles["approve"].reason
    assert inbox(store, people, "dan") == []


def test_the_first_rejection_settles_any(store, units):
    iid, people = start(store, units, ["ann", "cid", "dan"], "any")
    decide(store, people, "cid", "rejected")
    assert state(store, iid) == "failure"


def test_a_vote_by_three_of_five(store, units):
    iid, people = start(store, units, ["ann", "cid", "dan", "eve", "fay"], {"ratio": 0.6})
    decide(store, people, "ann", "rejected")
    decide(store, people, "cid")
    decide(store, people, "dan")
    assert state(store, iid) == "waiting"  # 2 of 5: 0.4
    round_ = Mailbox(store).round_of(iid, "approve", store.get(iid).circles["approve"].epoch)
    assert (round_["approved"], round_["needed"], round_["waiting"]) == (
        2, 3, ["eve", "fay"])
    decide(store, people, "eve")
    assert state(store, iid) == "success"  # 3 of 5: 0.6


def test_a_vote_is_rejected_once_the_ratio_cannot_be_reached(store, units):
    iid, people = start(store, units, ["ann", "cid", "dan", "eve", "fay"], {"ratio": 0.6})
    decide(store, people, "ann", "rejected")
    decide(store, people, "cid", "rejected")
    assert state(store, iid) == "waiting"  # 3 of 5 may still approve
    decide(store, people, "dan", "rejected")
    assert state(store, iid) == "failure"


def test_a_forged_decision_counted_by_a_vote_is_read_checked_and_refused(store, units):
    """A decision that cannot settle its vote leaves the others' mails unread; one
    written straight into the table makes the count enough, so they are read, checked,
    and the forged one refused and recorded, counting for nothing."""
    iid, people = start(store, units, ["ann", "cid", "dan", "eve", "fay"], {"ratio": 0.6})
    decide(store, people, "ann")
    forged = mail(store, people, "cid")["id"]
    with store.db.begin() as conn:
        conn.execute(text("UPDATE mailbox SET decision = 'approved' WHERE id = :i"),
                     {"i": forged})
    decide(store, people, "dan")  # 3 approvals by the table's count, 2 intact
    assert state(store, iid) == "waiting"
    whys = [e["data"] for e in store.history(iid) if e["kind"] == "approval_refused"]
    assert {"mail": forged, "why": "the decision does not match its signature"} in whys
    decide(store, people, "eve")
    assert state(store, iid) == "success"


# ----------------------------------------------------------------- add signers
def test_signers_added_before_decide_first_then_the_mail_comes_back(store, units):
    iid, people = start(store, units, ["ann", "dan"], "sequence")
    mb = Mailbox(store)
    ann = mail(store, people, "ann")
    mb.add_signers(ann["id"], people["ann"], ["cid"], "before", "cid knows the budget")
    every_mail_signed_over(store, people, ["ann", "cid"], ["cid", "ann", "dan"])
    with pytest.raises(Conflict, match="cid decide first"):
        mb.decide(ann["id"], people["ann"], "approved")
    decide(store, people, "cid", comment="fine by me")
    assert inbox(store, people, "dan") == []
    decide(store, people, "ann")
    decide(store, people, "dan")
    assert state(store, iid) == "success"
    added = [e for e in store.history(iid) if e["kind"] == "approval_signers_added"]
    assert [(e["actor"], e["data"]["users"], e["data"]["where"], e["data"]["comment"])
            for e in added] == [("ann", ["cid"], "before", "cid knows the budget")]
    refused = [e for e in store.history(iid) if e["kind"] == "approval_refused"]
    assert refused and "cid decide first" in refused[0]["data"]["why"]


def test_signers_added_after_record_the_approval_and_must_approve_too(store, units):
    iid, people = start(store, units, ["ann"], "any")
    mb = Mailbox(store)
    mb.add_signers(mail(store, people, "ann")["id"], people["ann"], ["cid", "dan"], "after",
                   "over my limit")
    ann = mail(store, people, "ann")
    assert (ann["decision"], ann["comment"], ann["signature_ok"]) == (
        "approved", "over my limit", True)
    assert state(store, iid) == "waiting"  # any: ann's seat is approved once cid, dan are
    assert inbox(store, people, "dan") == []  # in turn: cid, then dan
    decide(store, people, "cid")
    decide(store, people, "dan")
    assert state(store, iid) == "success"


def test_signers_added_with_join_the_round_and_the_quorum_counts_over_the_new_list(
        store, units):
    iid, people = start(store, units, ["ann", "cid"], {"ratio": 0.6})
    mb = Mailbox(store)
    decide(store, people, "cid")
    mb.add_signers(mail(store, people, "ann")["id"], people["ann"], ["dan", "eve"], "with")
    every_mail_signed_over(store, people, ["ann", "cid", "dan", "eve"],
                           ["ann", "cid", "dan", "eve"])
    assert mail(store, people, "cid")["decision"] == "approved"  # still counted
    decide(store, people, "dan")
    assert state(store, iid) == "waiting"  # 2 of 4: 0.5
    decide(store, people, "eve")
    assert state(store, iid) == "success"  # 3 of 4


@pytest.mark.parametrize("names,why", [
    (["nobody"], "no user named nobody"),
    (["zed"], "zed is not an approver"),
    (["bob"], "bob cannot approve their own request"),
    (["cid"], "cid is asked in this approval already"),
    (["ann"], "ann is asked already"),
    (["gone"], "no user named gone"),
])
def test_signers_who_cannot_be_added_are_refused(store, units, names, why):
    iid, people = start(store, units, ["ann", "cid"], "all")
    store.add_user("gone", "pw-gone", ["approver"])
    store.disable_user("gone")
    with pytest.raises(FormError) as caught:
        Mailbox(store).add_signers(mail(store, people, "ann")["id"], people["ann"], names,
                                   "with")
    assert caught.value.errors == {"users": why}
    assert [e for e in store.history(iid) if e["kind"] == "approval_signers_added"] == []


def test_only_the_addressee_adds_signers_and_only_while_it_is_pending(store, units):
    iid, people = start(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    ann = mail(store, people, "ann")
    for other in ("bob", "cid", "root"):
        with pytest.raises(NotFound):
            mb.add_signers(ann["id"], people[other], ["dan"], "with")
    decide(store, people, "ann")
    with pytest.raises(Conflict, match="already approved"):
        mb.add_signers(ann["id"], people["ann"], ["dan"], "with")
    decide(store, people, "cid", "rejected")
    with pytest.raises(Conflict):
        mb.add_signers(ann["id"], people["ann"], ["dan"], "with")


def test_a_tampered_list_is_refused_and_recorded(store, units):
    iid, people = start(store, units, ["ann", "cid"], "all")
    cid = mail(store, people, "cid")
    payload = dict(cid["payload"], approvers=["cid"])
    with store.db.begin() as conn:
        conn.execute(text("UPDATE mailbox SET payload = :p WHERE id = :i"),
                     {"p": json.dumps(payload), "i": cid["id"]})
    with pytest.raises(Tampered):
        Mailbox(store).add_signers(mail(store, people, "ann")["id"], people["ann"], ["dan"],
                                   "with")
    assert inbox(store, people, "dan") == []
    assert any(e["kind"] == "approval_refused" for e in store.history(iid))


# -------------------------------------------------------------- remove signers
def test_the_starter_removes_a_signer_who_has_not_decided(store, units):
    iid, people = start(store, units, ["ann", "cid", "dan"], "all")
    mb = Mailbox(store)
    decide(store, people, "ann")
    decide(store, people, "cid")
    out = mb.remove_signers(mail(store, people, "dan")["id"], people["bob"], ["dan"],
                            "on leave")
    assert out["removed"] == ["dan"]
    assert mail(store, people, "dan")["decision"] == "removed"
    assert mail(store, people, "dan")["signature_ok"]
    assert state(store, iid) == "success"  # everyone left approved
    removed = [e for e in store.history(iid) if e["kind"] == "approval_signers_removed"]
    assert [(e["actor"], e["data"]["users"], e["data"]["comment"]) for e in removed] == [
        ("bob", ["dan"], "on leave")]
    with pytest.raises(Conflict):
        mb.decide(mail(store, people, "dan")["id"], people["dan"], "approved")


def test_removing_the_next_of_a_sequence_asks_the_one_after(store, units):
    iid, people = start(store, units, ["ann", "cid", "dan"], "sequence")
    Mailbox(store).remove_signers(mail(store, people, "ann")["id"], people["root"], ["cid"])
    decide(store, people, "ann")
    assert inbox(store, people, "cid") == []
    decide(store, people, "dan")
    assert state(store, iid) == "success"


def test_who_may_remove_signers_and_what_is_refused(store, units):
    iid, people = start(store, units, ["ann", "cid"], 2)
    mb = Mailbox(store)
    ann = mail(store, people, "ann")
    with pytest.raises(Forbidden):
        mb.remove_signers(ann["id"], people["ann"], ["cid"])
    with pytest.raises(NotFound):
        mb.remove_signers(ann["id"], people["dan"], ["cid"])
    with pytest.raises(FormError, match="more than the 1 approvers"):
        mb.remove_signers(ann["id"], people["bob"], ["cid"])
    with pytest.raises(FormError, match="dan is not asked"):
        mb.remove_signers(ann["id"], people["bob"], ["dan"])
    decide(store, people, "ann")
    with pytest.raises(FormError, match="ann has decided already"):
        mb.remove_signers(ann["id"], people["bob"], ["ann"])
    decide(store, people, "cid")
    with pytest.raises(Conflict):
        mb.remove_signers(ann["id"], people["bob"], ["cid"])


def test_the_feed_carries_the_signers_events(store, units):
    iid, people = start(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    mb.add_signers(mail(store, people, "ann")["id"], people["ann"], ["dan"], "with", "why")
    mb.remove_signers(mail(store, people, "ann")["id"], people["bob"], ["dan"])
    items = settled(lambda: [i for i in store.feed(limit=500)[0]
                             if i["type"].startswith("approval.")], lambda got: len(got) >= 2)
    assert [(i["type"], i["uri"], i["data"]["users"]) for i in items] == [
        ("approval.signers_added", "approve", ["dan"]),
        ("approval.signers_removed", "approve", ["dan"])]


# ------------------------------------------------------------------- the race
def race(store, units, people, where: str) -> tuple[str, dict[str, object]]:
    """ann adds dan (`where`) and approves at once, from two threads."""
    iid = store.start("expense", {}, people["bob"]).id
    units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 120})
    Worker(store).run_once()
    mb = Mailbox(store)
    ann = next(m for m in inbox(store, people, "ann") if m["instance"] == iid)
    outcomes: dict[str, object] = {}
    go = threading.Barrier(2)

    def run(name, call):
        go.wait()
        try:
            outcomes[name] = call()
        except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
            outcomes[name] = exc
    threads = [threading.Thread(target=run, args=("add", lambda: mb.add_signers(
                   ann["id"], people["ann"], ["dan"], where))),
               threading.Thread(target=run, args=("decide", lambda: mb.decide(
                   ann["id"], people["ann"], "approved")))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return iid, outcomes


def check_race(store, iid, outcomes, where):
    """Applied once: the decision first (the add refused) or the add first (the decision
    then taken on the new list, or refused when the add took or deferred it)."""
    mb = Mailbox(store)
    rows = store.attempt_approvals(iid, "approve", store.get(iid).circles["approve"].epoch)
    assert all(mb.check(r) is None for r in rows)
    assert len({json.dumps([r.payload["approvers"], r.payload.get("seats")])
                for r in rows}) == 1  # every mail signed over the same list
    added = "dan" in rows[0].payload["approvers"]
    adds = [e for e in store.history(iid) if e["kind"] == "approval_signers_added"]
    assert len(adds) == (1 if added else 0)
    assert not isinstance(outcomes["add"], Exception) == added
    if not added:  # the decision came first and settled "any"
        assert isinstance(outcomes["add"], Conflict) and isinstance(outcomes["decide"], dict)
        assert state(store, iid) == "success"
    elif where == "with":  # the decision was taken over the new list
        assert isinstance(outcomes["decide"], dict) and state(store, iid) == "success"
    else:  # before: ann waits for dan; after: ann's approval came with the add
        assert isinstance(outcomes["decide"], Conflict) and state(store, iid) == "waiting"
    ann = next(r for r in rows if r.payload["approver"] == "ann")
    assert (ann.decision == "approved") == (not added or where != "before")


@pytest.mark.parametrize("where", ["before", "after", "with"])
def test_an_add_racing_a_decision_is_applied_once(store, units, where):
    people = users(store, *PEOPLE)
    store.put_template(approval_flow(["ann", "cid"], "any"))
    for _ in range(4):
        iid, outcomes = race(store, units, people, where)
        check_race(store, iid, outcomes, where)


# ------------------------------------------ the decision that settles, and its step
def test_the_deciding_approval_settles_once_when_another_process_moved_the_instance(
        db_url, store, units):
    """The step a deciding approval settles goes with it, on this process's copy of the
    instance; another process having moved the instance since (the copy is stale), the
    step is taken on the instance as stored: settled once, named after the decider."""
    iid, people = start(store, units, ["ann", "cid", "dan"], {"ratio": 0.6})
    decide(store, people, "ann")
    other = Store(db_url, secret=SECRET)
    try:
        other.suspend(iid, actor="root")
        other.resume(iid, actor="root")
    finally:
        other.close()
    decide(store, people, "cid")
    assert state(store, iid) == "success" and store.get(iid).status == "completed"
    done = [e["actor"] for e in store.history(iid)
            if e["circle"] == "approve" and e["kind"] == "circle_succeeded"]
    assert done == ["cid"]
    assert [m["decision"] for m in (mail(store, people, n) for n in ("ann", "cid", "dan"))
            ] == ["approved", "approved", None]


def test_approvals_taken_at_once_that_together_settle_the_round_settle_it_once(
        store, units):
    """Two approvers of "all" decide at the same moment (two threads): each decision is
    counted with the other's (the round's mails are held from the decision to its
    commit), so the round is settled, once, by whichever came second."""
    people = users(store, *PEOPLE)
    store.put_template(approval_flow(["ann", "cid"], "all"))
    for _ in range(4):
        iid = store.start("expense", {}, people["bob"]).id
        units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 120})
        Worker(store).run_once()
        outcomes = approved_at_once(store, people, iid, ("ann", "cid"))
        assert len(outcomes) == 2 and all(isinstance(o, dict) for o in outcomes.values()), \
            outcomes
        assert state(store, iid) == "success", iid
        done = [e for e in store.history(iid)
                if e["circle"] == "approve" and e["kind"] == "circle_succeeded"]
        assert len(done) == 1 and done[0]["actor"] in ("ann", "cid")


def approved_at_once(store, people, iid, names) -> dict[str, object]:
    """Each of `names` approves their mail of `iid`, all at the same moment (a thread
    each): what each was answered."""
    mails = {n: next(m for m in inbox(store, people, n) if m["instance"] == iid)["id"]
             for n in names}
    go, outcomes = threading.Barrier(len(names)), {}

    def run(name):
        go.wait()
        try:
            outcomes[name] = Mailbox(store).decide(mails[name], people[name], "approved")
        except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
            outcomes[name] = exc
    threads = [threading.Thread(target=run, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return outcomes
