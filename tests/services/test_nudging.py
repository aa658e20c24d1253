"""Copies, urges and reminders (SPEC §15) through the store (SQLite and PostgreSQL): a
circle's `cc` sent by the worker once per person, ad hoc copies, who may read what they
were copied on, urges at most once an hour per circle, and `remind` run by the worker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bpflow import moves
from bpflow.access import Caller
from bpflow.errors import Forbidden, NotFound, RateLimited
from bpflow.forms import FormError
from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.moves import nudging
from bpflow.store import Conflict, Store
from bpflow.worker import Worker
from tests.conftest import SECRET
from tests.services.helpers import mark, start_approval, users


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def flow(**review):
    return {"name": "leave", "title": {"en": "Leave", "zh-CN": "请假"}, "circles": [
        {"uri": "ask", "box": {"form": [{"name": "days", "type": "integer"}]},
         "cc": {"users": ["carol"], "roles": ["hr"], "on": "ready"}},
        {"uri": "review", "deps": [["ask"]], "box": {"confirm": "OK?"},
         "assign": {"users": ["dave"]}, **review},
        {"uri": "end", "deps": [["review"]]}]}


def inbox(store, person, kind):
    return Mailbox(store).inbox(person, kind=kind)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def timed(db_url, clock):
    s = Store(db_url, secret=SECRET, clock=clock)
    yield s
    s.close()


def test_a_circles_cc_goes_once_to_each_person_and_lets_them_read(store, units):
    people = users(store, "bob", "carol", "dave", "hana:hr", "ivan")
    store.put_template(flow(cc={"users": ["carol", "dave"]}))
    iid = store.start("leave", {}, people["bob"]).id
    worker = Worker(store, name="w")
    worker.run_once()
    assert [m["kind"] for m in inbox(store, people["carol"], "cc")] == ["cc"]
    hana = inbox(store, people["hana"], "cc")
    assert len(hana) == 1 and hana[0]["instance"] == iid and hana[0]["circle"] == "ask"
    assert hana[0]["subject"] == "Copy: Leave"
    assert worker.run_once() == 0  # sent and recorded: nothing more is owed
    units.submit(iid, "ask", mark(store, iid, "ask"), {"days": 2})
    units.submit(iid, "review", mark(store, iid, "review"), {"accept": True})
    assert store.get(iid).status == "completed"
    worker.run_once()  # the review's copy, on done, of a completed flow
    assert len(inbox(store, people["carol"], "cc")) == 2  # one per circle
    assert len(inbox(store, people["dave"], "cc")) == 1
    sent = [e for e in store.history(iid) if e["kind"] == "cc_sent"]
    assert [(e["circle"], e["data"]["users"]) for e in sent] == [
        ("ask", ["carol", "hana"]), ("review", ["carol", "dave"])]
    # copied people follow the flow read-only; others do not see it
    carol = Caller.of(people["carol"])
    assert moves.visible(store, carol, iid).id == iid
    with pytest.raises(NotFound):
        moves.visible(store, Caller.of(people["ivan"]), iid)
    # opening the flow marks the copies read, and the flow shows it
    assert nudging.read_copies(store, carol, iid)
    assert not nudging.read_copies(store, carol, iid)  # nothing left unread: no write
    shown = {(c["user"], c["circle"]): c["read_at"] for c in nudging.copies(store, iid)}
    assert shown[("carol", "ask")] is not None and shown[("dave", "review")] is None


def test_ad_hoc_copies_are_idempotent_and_checked(store):
    people = users(store, "bob", "carol", "dave", "eve", "root:admin")
    store.put_template(flow())
    iid = store.start("leave", {}, people["bob"]).id
    bob = Caller.of(people["bob"])
    assert nudging.copy(store, bob, iid, ["carol", "dave"], "FYI") == ["carol", "dave"]
    assert nudging.copy(store, bob, iid, ["carol", "eve"]) == ["eve"]
    mail = inbox(store, people["carol"], "cc")
    assert len(mail) == 1 and mail[0]["body"].endswith("FYI") and mail[0]["circle"] is None
    with pytest.raises(FormError, match="no user named nobody"):
        nudging.copy(store, bob, iid, ["carol", "nobody"])
    with pytest.raises(FormError):
        nudging.copy(store, bob, iid, [])
    with pytest.raises(FormError):
        nudging.copy(store, bob, iid, ["x"] * 51)
    # a copied person may see the flow but not copy others; a stranger does not see it
    with pytest.raises(Forbidden):
        nudging.copy(store, Caller.of(people["carol"]), iid, ["dave"])
    with pytest.raises(NotFound):
        nudging.copy(store, Caller.of(people["dave"] | {"id": -5}), iid, ["eve"])
    assert nudging.copy(store, Caller.of(people["root"]), iid, ["root"]) == ["root"]
    sent = [e["data"] for e in store.history(iid) if e["kind"] == "cc_sent"]
    assert sent == [{"users": ["carol", "dave"], "comment": "FYI"}, {"users": ["eve"]},
                    {"users": ["root"]}]


def test_an_assignee_may_copy_people(store, units):
    people = users(store, "bob", "carol", "dave", "eve")
    store.put_template(flow())
    iid = store.start("leave", {}, people["bob"]).id
    units.submit(iid, "ask", mark(store, iid, "ask"), {"days": 1})
    assert nudging.copy(store, Caller.of(people["dave"]), iid, ["eve"]) == ["eve"]


def test_urge_mails_whoever_waits_and_holds_for_an_hour(timed, clock):
    store = timed
    people = users(store, "bob", "carol", "dave", "hana:hr", "root:admin")
    store.put_template(flow(assign={"users": ["dave"], "roles": ["hr"]}))
    iid = store.start("leave", {}, people["bob"]).id
    bob = Caller.of(people["bob"])
    with pytest.raises(Conflict):  # bob's own form waits for bob: nobody else to urge
        nudging.urge(store, bob, iid, "hurry")
    Interactions(store).submit(iid, "ask", mark(store, iid, "ask"), {"days": 1})
    with pytest.raises(Forbidden):
        nudging.urge(store, Caller.of(people["dave"]), iid)
    assert nudging.urge(store, bob, iid, "hurry") == {"circles": {"review": ["dave", "hana"]}}
    urge = inbox(store, people["hana"], "urge")
    assert len(urge) == 1 and urge[0]["circle"] == "review" and "hurry" in urge[0]["body"]
    assert urge[0]["sender"] == "bob"
    clock.advance(1800)
    with pytest.raises(RateLimited) as refused:
        nudging.urge(store, bob, iid)
    assert refused.value.retry_after == 1800
    assert nudging.urge_wait(store.engine, store.get(iid)) == 1800
    with pytest.raises(RateLimited):  # an admin too: the hour is the circle's
        nudging.urge(store, Caller.of(people["root"]), iid)
    clock.advance(1800)
    assert nudging.urge(store, bob, iid)["circles"] == {"review": ["dave", "hana"]}
    assert len(inbox(store, people["dave"], "urge")) == 2
    events = [e for e in store.history(iid) if e["kind"] == "urge_sent"]
    assert [(e["actor"], e["data"].get("comment")) for e in events] == [("bob", "hurry"),
                                                                        ("bob", None)]


def test_urge_reaches_undecided_approvers_only(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    ann = mb.inbox(people["ann"], kind="approval")[0]
    mb.decide(ann["id"], people["ann"], "approved")
    sent = nudging.urge(store, Caller.of(people["bob"]), iid)
    assert sent == {"circles": {"approve": ["cid"]}}
    assert inbox(store, people["ann"], "urge") == []


def test_a_flood_of_urges_sends_one(store, units):
    from concurrent.futures import ThreadPoolExecutor
    people = users(store, "bob", "carol", "dave")
    store.put_template(flow())
    iid = store.start("leave", {}, people["bob"]).id
    units.submit(iid, "ask", mark(store, iid, "ask"), {"days": 1})
    bob = Caller.of(people["bob"])

    def one(_):
        try:
            nudging.urge(store, bob, iid)
            return "sent"
        except RateLimited:
            return "limited"
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(20)))
    assert answers.count("sent") == 1 and answers.count("limited") == 19
    assert len(inbox(store, people["dave"], "urge")) == 1


def test_remind_sends_the_urge_mail_from_the_worker(timed, clock):
    store = timed
    people = users(store, "bob", "carol", "dave")
    store.put_template(flow(due=7200, remind={"every": 3000, "before_due": 600}))
    iid = store.start("leave", {}, people["bob"]).id
    Interactions(store).submit(iid, "ask", mark(store, iid, "ask"), {"days": 1})
    worker = Worker(store, name="w")
    worker.run_once()  # the copy of "ask"
    assert inbox(store, people["dave"], "urge") == []
    clock.advance(2999)
    worker.run_once()
    assert inbox(store, people["dave"], "urge") == []
    clock.advance(1)
    assert worker.run_once() == 1
    mail = inbox(store, people["dave"], "urge")
    assert len(mail) == 1 and mail[0]["sender"] == "bpflow"
    assert "still waits for you" in mail[0]["body"]
    assert worker.run_once() == 0
    clock.advance(3600)  # past 6000 s: one reminder for the missed every, not two
    worker.run_once()
    assert len(inbox(store, people["dave"], "urge")) == 2
    events = [e for e in store.history(iid) if e["kind"] == "urge_sent"]
    assert [(e["actor"], e["data"]) for e in events] == [
        ("worker", {"users": ["dave"], "remind": True})] * 2

