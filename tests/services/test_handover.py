"""Transfer (转办) and delegate (委派) of approval mail and of tasks (SPEC §15), through the
store (SQLite and PostgreSQL): who decides after a transfer, what the signatures cover,
the delegate's answer that only its owner's decision makes count, refusals (recorded),
and a transfer racing a withdrawal."""

from __future__ import annotations

import json
import threading
import time

import pytest
from sqlalchemy import text

from bpflow import moves
from bpflow.access import Caller
from bpflow.errors import Conflict, Forbidden, NotFound, Tampered
from bpflow.forms import FormError
from bpflow.mailbox import Mailbox
from tests.services.helpers import mail_of, mark, start_approval, users
from tests.store.test_feed import read_all


def pending(store, people, name):
    return [m for m in Mailbox(store).inbox(people[name], kind="approval", status="pending")]


def feed_of(store, prefix: str, wait_for: int) -> list[dict]:
    """The feed's items of types starting with `prefix` (on PostgreSQL the feed holds
    back rows of transactions newer than the oldest running on the server: read on
    until `wait_for` came)."""
    deadline = time.monotonic() + 60
    while True:
        found = [i for i in read_all(store, 100)[0] if i["type"].startswith(prefix)]
        if len(found) >= wait_for or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def kinds(store, iid, prefix="approval_"):
    return [(e["kind"], e["actor"], e["data"]) for e in store.history(iid)
            if e["kind"].startswith(prefix)]


# ------------------------------------------------------------------ transfer
def test_a_transferred_approval_is_decided_by_the_new_addressee(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    old = mail_of(store, people, "ann")
    new = mb.transfer(old["id"], people["ann"], "dan", "dan knows the budget")
    assert new["payload"]["approver"] == "dan" and new["signature_ok"]
    assert new["payload"]["approvers"] == ["dan", "cid"]
    assert new["payload"]["transferred_from"] == "ann"
    assert new["payload"]["note"] == "dan knows the budget"
    closed = mail_of(store, people, "ann")
    assert (closed["decision"], closed["comment"]) == ("transferred", "dan knows the budget")
    assert closed["signature_ok"] and mail_of(store, people, "cid")["signature_ok"]
    assert mail_of(store, people, "cid")["payload"]["approvers"] == ["dan", "cid"]
    assert store.get(iid).circles["approve"].pending["approval"]["approvers"] == ["dan", "cid"]
    # a decision on the transferred mail is refused and recorded
    with pytest.raises(Conflict, match="transferred"):
        mb.decide(old["id"], people["ann"], "approved")
    refused = [d for k, _, d in kinds(store, iid) if k == "approval_refused"]
    assert refused and refused[-1]["by"] == "ann"
    mb.decide(mail_of(store, people, "cid")["id"], people["cid"], "approved")
    assert store.get(iid).circles["approve"].state == "waiting"  # dan's decision counts
    mb.decide(new["id"], people["dan"], "approved", "fine")
    run = store.get(iid).circles["approve"]
    assert run.state == "success"
    assert {d["approver"] for d in run.result["decisions"]} == {"dan", "cid"}
    moved = [(a, d) for k, a, d in kinds(store, iid) if k == "approval_transferred"]
    assert moved == [("ann", {"mail": old["id"], "new_mail": new["id"], "from": "ann",
                              "to": "dan", "comment": "dan knows the budget"})]
    feed = feed_of(store, "approval.", 1)
    assert [(i["type"], i["uri"], i["instance"]) for i in feed] == [
        ("approval.transferred", "approve", iid)]


def test_a_transfer_is_refused_for_bad_targets_others_and_closed_mail(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "any")
    people |= users(store, "eve", "old:approver")
    store.disable_user("old")
    mb = Mailbox(store)
    mail = mail_of(store, people, "ann")
    for to, why in (("nobody", "no user"), ("old", "no user"), ("ann", "other than"),
                    ("eve", "not an approver"), ("cid", "asked in this approval"),
                    ("", "no user")):
        with pytest.raises(FormError) as exc:
            mb.transfer(mail["id"], people["ann"], to)
        assert why in str(exc.value.errors["to"]), to
    with pytest.raises(FormError, match="their own request"):  # four eyes
        mb.delegate(mail["id"], people["ann"], "bob")
    assert "bob" not in mb.hand_over_choices(mail["id"], people["ann"], "delegate")
    with pytest.raises(NotFound):  # only the addressee; the others do not learn it exists
        mb.transfer(mail["id"], people["cid"], "dan")
    with pytest.raises(NotFound):
        mb.delegate(mail["id"], people["bob"], "dan")
    mb.decide(mail["id"], people["ann"], "approved")
    with pytest.raises(Conflict):  # no longer pending
        mb.transfer(mail["id"], people["ann"], "dan")
    with pytest.raises(Conflict):  # the request is settled: cid's mail is no longer open
        mb.delegate(mail_of(store, people, "cid")["id"], people["cid"], "dan")
    assert not [k for k, _, _ in kinds(store, iid) if k in ("approval_transferred",
                                                            "approval_delegated")]


def test_the_signature_covers_who_handed_it_on(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    mb = Mailbox(store)
    new = mb.transfer(mail_of(store, people, "ann")["id"], people["ann"], "dan")
    payload = dict(new["payload"], transferred_from="cid")
    with store.db.begin() as conn:
        conn.execute(text("UPDATE mailbox SET payload = :p WHERE id = :i"),
                     {"p": json.dumps(payload), "i": new["id"]})
    with pytest.raises(Tampered):
        mb.decide(new["id"], people["dan"], "approved")
    assert store.get(iid).circles["approve"].state == "waiting"


# ------------------------------------------------------------------ delegate
def test_a_delegate_answers_and_only_the_owners_confirmation_counts(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    people |= users(store, "eve")
    mb = Mailbox(store)
    mine = mail_of(store, people, "ann")
    theirs = mb.delegate(mine["id"], people["ann"], "eve", "please check the receipts")
    assert theirs["payload"]["delegated_by"] == "ann" and theirs["signature_ok"]
    assert theirs["payload"]["note"] == "please check the receipts"
    mine = mail_of(store, people, "ann")
    assert mine["payload"]["delegated_to"] == "eve" and mine["signature_ok"]
    assert mine["answer"]["by"] == "eve" and mine["answer"]["decision"] is None
    with pytest.raises(Conflict, match="not answered"):  # one delegate at a time
        mb.delegate(mine["id"], people["ann"], "dan")
    with pytest.raises(Forbidden):  # a delegate answers; they do not hand it on
        mb.transfer(theirs["id"], people["eve"], "dan")
    with pytest.raises(Conflict, match="delegate answers"):
        mb.decide(theirs["id"], people["eve"], "returned")
    mb.decide(theirs["id"], people["eve"], "approved", "receipts match")
    assert store.get(iid).circles["approve"].state == "waiting"  # an answer, not a decision
    mine = mail_of(store, people, "ann")
    assert mine["answer"]["decision"] == "approved"
    assert mine["answer"]["comment"] == "receipts match"
    mb.decide(mine["id"], people["ann"], "approved", "as eve says")
    run = store.get(iid).circles["approve"]
    assert run.state == "success"
    assert [d["approver"] for d in run.result["decisions"]] == ["ann"]
    events = [(k, a) for k, a, _ in kinds(store, iid)]
    assert events == [("approval_delegated", "ann"), ("approval_refused", None),
                      ("approval_answered", "eve"), ("approval_confirmed", "ann")]
    confirmed = kinds(store, iid)[-1][2]
    assert confirmed["confirmed"] is True and confirmed["delegate"] == "eve"
    assert [i["type"] for i in feed_of(store, "approval.", 1)] == ["approval.delegated"]


def test_the_owner_may_answer_differently_and_a_late_answer_is_refused(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    people |= users(store, "eve", "fay")
    mb = Mailbox(store)
    theirs = mb.delegate(mail_of(store, people, "ann")["id"], people["ann"], "eve")
    mb.decide(theirs["id"], people["eve"], "approved")
    mb.decide(mail_of(store, people, "ann")["id"], people["ann"], "rejected", "no budget")
    assert store.get(iid).circles["approve"].state == "failure"
    assert kinds(store, iid)[-1][2]["confirmed"] is False
    # cid delegates but decides before fay answers: fay's mail closes, her answer is refused
    iid, _ = iid, None
    iid2 = store.start("expense", {}, people["bob"]).id
    units.submit(iid2, "claim", mark(store, iid2, "claim"), {"amount": 5})
    from bpflow.worker import Worker
    Worker(store).run_once()
    cid_mail = next(m for m in pending(store, people, "cid") if m["instance"] == iid2)
    fay = mb.delegate(cid_mail["id"], people["cid"], "fay")
    mb.decide(cid_mail["id"], people["cid"], "approved")
    assert Mailbox(store).inbox(people["fay"])[0]["decision"] == "withdrawn"
    with pytest.raises(Conflict):
        mb.decide(fay["id"], people["fay"], "approved")


def test_a_transfer_racing_a_withdrawal_is_applied_once(store, units):
    """Threads: the starter withdraws while the addressee transfers; whichever comes
    first, no mail of the old attempt stays open and the transfer is in the history at
    most once, before the withdrawal."""
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    mail = mail_of(store, people, "ann")
    barrier = threading.Barrier(2)
    out: dict[str, object] = {}

    def transfer():
        barrier.wait()
        try:
            out["transfer"] = mb.transfer(mail["id"], people["ann"], "dan")
        except Conflict as exc:
            out["transfer"] = exc

    def withdraw():
        barrier.wait()
        out["withdraw"] = moves.withdraw(store, Caller.of(people["bob"]), iid, "approve")

    threads = [threading.Thread(target=transfer), threading.Thread(target=withdraw)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not isinstance(out["withdraw"], Exception)
    assert store.open_approvals(iid) == []
    history = [e["kind"] for e in store.history(iid)]
    assert history.count("circle_withdrawn") == 1
    assert history.count("approval_transferred") <= 1
    if isinstance(out["transfer"], Conflict):
        assert "approval_transferred" not in history
    else:
        assert history.index("approval_transferred") < history.index("circle_withdrawn")


# --------------------------------------------------------------------- tasks
REVIEW = {"name": "review", "circles": [
    {"uri": "claim", "box": {"form": [{"name": "amount", "type": "number"}]}},
    {"uri": "check", "deps": [["claim"]], "assign": {"users": ["fred", "gina"]},
     "box": {"form": [{"name": "ok", "type": "boolean"}]}},
    {"uri": "end", "deps": [["check"]]}]}


def start_review(store, units):
    people = users(store, "bob", "fred", "gina", "hal")
    store.put_template(REVIEW)
    iid = store.start("review", {}, people["bob"]).id
    units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 3})
    return iid, {k: Caller.of(v) for k, v in people.items()}


def test_a_task_delegate_answers_and_its_assignee_confirms(store, units):
    iid, who = start_review(store, units)
    moves.claim(store, who["fred"], iid, "check")
    with pytest.raises(Forbidden):
        moves.delegate(store, who["gina"], iid, "check", "hal")
    with pytest.raises(FormError):
        moves.delegate(store, who["fred"], iid, "check", "nobody")
    with pytest.raises(FormError):
        moves.delegate(store, who["fred"], iid, "check", "fred")
    inst = moves.delegate(store, who["fred"], iid, "check", "hal", "have a look")
    assert inst.circles["check"].task["delegate"]["to"] == "hal"
    rows, _ = store.tasks(who["hal"], "me", None, 50, 0)
    assert [r.circle for r in rows] == ["check"]  # offered to the delegate
    with pytest.raises(Conflict):
        moves.delegate(store, who["fred"], iid, "check", "gina")
    hal_sees = moves.visible(store, who["hal"], iid)
    assert hal_sees.id == iid
    with pytest.raises(Forbidden):  # a delegate answers; they do not fail the circle
        moves.fail(store, who["hal"], iid, "check", mark(store, iid, "check"), "no")
    inst = moves.complete(store, who["hal"], iid, "check", mark(store, iid, "check"),
                          {"ok": True})
    assert inst.circles["check"].state == "waiting"
    assert inst.circles["check"].task["delegate"]["answer"] == {"ok": True}
    assert store.tasks(who["hal"], "me", None, 50, 0)[0] == []
    with pytest.raises(Forbidden):  # answered: no second answer
        moves.complete(store, who["hal"], iid, "check", mark(store, iid, "check"),
                       {"ok": False})
    inst = moves.complete(store, who["fred"], iid, "check", mark(store, iid, "check"),
                          {"ok": True})
    assert inst.circles["check"].state == "success"
    events = [(e["kind"], e["actor"]) for e in store.history(iid)
              if e["kind"].startswith("task_")]
    assert events == [("task_claimed", "fred"), ("task_delegated", "fred"),
                      ("task_answered", "hal"), ("task_confirmed", "fred")]
    assert [e for e in store.history(iid) if e["kind"] == "task_confirmed"][0]["data"] == \
        {"delegate": "hal", "confirmed": True}
    assert [i["type"] for i in feed_of(store, "task.", 1)] == ["task.delegated"]


def test_a_task_transfer_is_the_assign_move(store, units):
    iid, who = start_review(store, units)
    moves.claim(store, who["fred"], iid, "check")
    with pytest.raises(NotFound):
        moves.transfer(store, who["fred"], iid, "check", "nobody")
    inst = moves.transfer(store, who["fred"], iid, "check", "gina", "on holiday")
    assert inst.circles["check"].task["assignee"] == "gina"
    event = [e for e in store.history(iid) if e["kind"] == "task_transferred"][0]
    assert event["actor"] == "fred" and event["data"] == {
        "from": "fred", "to": "gina", "comment": "on holiday"}
    assert [i["type"] for i in feed_of(store, "task.", 1)] == ["task.transferred"]


def hand_or_withdraw(url: str, what: str, pairs: list[tuple[str, int]], go, out) -> None:
    """One process of the race: transfer ann's mail of each instance to dan, or withdraw
    each instance's approval as bob; reports what each attempt did."""
    from bpflow.store import Store
    from tests.conftest import SECRET
    store = Store(url, secret=SECRET)
    done = []
    try:
        go.wait(60)
        for iid, mail in pairs:
            try:
                if what == "transfer":
                    Mailbox(store).transfer(mail, store.user("ann"), "dan")
                else:
                    moves.withdraw(store, Caller.of(store.user("bob")), iid, "approve")
                done.append((iid, "done"))
            except Conflict:
                done.append((iid, "refused"))
            except Exception as exc:  # the 409 of the engine's moves, anything else
                done.append((iid, f"{type(exc).__name__}: {exc}"))
    finally:
        store.close()
        out.put((what, done))


def test_two_processes_race_a_transfer_and_a_withdrawal(db_url, store, units):
    """Two processes (on PostgreSQL: two servers' worth of connections): one transfers,
    the other withdraws, instance by instance. Each withdrawal lands; each transfer lands
    before it or is refused; no mail of a withdrawn attempt stays open."""
    from tests.conftest import processes
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    iids = [iid]
    for _ in range(5):
        more = store.start("expense", {}, people["bob"]).id
        units.submit(more, "claim", mark(store, more, "claim"), {"amount": 7})
        iids.append(more)
    from bpflow.worker import Worker
    Worker(store).run_once()
    pairs = [(i, next(m["id"] for m in pending(store, people, "ann") if m["instance"] == i))
             for i in iids]
    ctx = processes()
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=hand_or_withdraw, args=(db_url, what, pairs, go, out))
             for what in ("transfer", "withdraw")]
    for p in procs:
        p.start()
    go.set()
    results = dict(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(30)
    assert all(r == "done" for _, r in results["withdraw"]), results
    assert all(r in ("done", "refused") for _, r in results["transfer"]), results
    for i in iids:
        assert store.open_approvals(i) == [], i
        history = [e["kind"] for e in store.history(i)]
        assert history.count("circle_withdrawn") == 1
        assert history.count("approval_transferred") <= 1
        if "approval_transferred" in history:
            assert history.index("approval_transferred") < history.index("circle_withdrawn")
        outcome = dict(results["transfer"])[i]
        assert ("approval_transferred" in history) == (outcome == "done"), (i, outcome)
