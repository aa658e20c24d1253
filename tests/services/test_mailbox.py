"""The mailbox through the store (SQLite and PostgreSQL): approval requests decided by
their addressees against a quorum, signatures that expose tampering, who may read which
mail, and guest messages."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, text, update

from bpflow.errors import NotFound, RateLimited, Tampered
from bpflow.forms import FormError
from bpflow.mailbox import Mailbox, exact, quorum_verdict
from bpflow.store import Conflict, Store
from bpflow.worker import Worker
from tests.services.helpers import mail_of, mark, start_approval, users


# ------------------------------------------------------------ approvals
@pytest.mark.parametrize("quorum,decisions,outcome", [
    ("all", {"ann": "approved", "cid": "approved", "dan": "approved"}, "success"),
    ("all", {"ann": "approved", "cid": "rejected"}, "failure"),
    ("any", {"cid": "approved"}, "success"),
    ("any", {"ann": "rejected"}, "failure"),  # 或签: the first decision settles, a "no" too
    (2, {"ann": "approved", "dan": "approved"}, "success"),
    (2, {"ann": "rejected", "cid": "approved", "dan": "rejected"}, "failure"),
])
def test_approval_quorum(store, units, quorum, decisions, outcome):
    iid, people = start_approval(store, units, ["ann", "cid", "dan"], quorum)
    pending = store.get(iid).circles["approve"]
    assert pending.state == "waiting"
    assert pending.pending["approval"]["approvers"] == ["ann", "cid", "dan"]
    mb = Mailbox(store)
    mail = mail_of(store, people, "ann")
    assert mail["signature_ok"] and mail["payload"]["data"] == {"claim": {"amount": 120}}
    assert mail["subject"] == "Claim of 120" and mail["payload"]["requester"] == "bob"
    for name, decision in decisions.items():
        assert store.get(iid).circles["approve"].state == "waiting"
        mb.decide(mail_of(store, people, name)["id"], people[name], decision, f"by {name}")
    run = store.get(iid).circles["approve"]
    assert run.state == outcome
    settled = [e["actor"] for e in store.history(iid) if e["circle"] == "approve"
               and e["kind"] in ("circle_succeeded", "circle_failed")]
    assert settled == [list(decisions)[-1]]  # who decided, not "approval"
    if outcome == "success":
        assert run.result["approved"] is True and store.get(iid).status == "completed"
    else:
        assert "rejected" in run.reason


def test_an_approval_settled_on_reentry_names_the_last_approver(store, units):
    """Decisions counted later (the flow re-entered) name the approver whose decision was
    the last, not "approval"."""
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    for name in ("ann", "cid"):
        store.record_decision(mail_of(store, people, name)["id"], "approved", "",
                              mb._decision_signature)
    assert units.reenter(iid).circles["approve"].state == "success"
    done = [e for e in store.history(iid) if e["kind"] == "circle_succeeded"
            and e["circle"] == "approve"]
    assert [e["actor"] for e in done] == ["cid"]


def test_only_the_addressee_decides_and_others_are_told_it_does_not_exist(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    mail = mail_of(store, people, "ann")
    with pytest.raises(NotFound, match=f"no approval mail {mail['id']}"):  # SPEC §13: 404
        Mailbox(store).decide(mail["id"], people["cid"], "approved")
    assert mail_of(store, people, "ann")["decision"] is None


def test_tampered_payload_is_refused_and_recorded(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    mail = mail_of(store, people, "ann")
    payload = dict(mail["payload"], data={"claim": {"amount": 1}})
    with store.db.begin() as conn:  # someone edits the mail in the database
        conn.execute(text("UPDATE mailbox SET payload = :p WHERE id = :i"),
                     {"p": json.dumps(payload), "i": mail["id"]})
    assert mail_of(store, people, "ann")["signature_ok"] is False
    with pytest.raises(Tampered):
        Mailbox(store).decide(mail["id"], people["ann"], "approved")
    assert store.get(iid).circles["approve"].state == "waiting"
    refused = [e for e in store.history(iid) if e["kind"] == "approval_refused"]
    assert refused and refused[0]["data"]["why"] == "the mail does not match its signature"


def test_tampered_subject_column_is_refused(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    mail = mail_of(store, people, "ann")
    with store.db.begin() as conn:
        conn.execute(text("UPDATE mailbox SET subject = 'Claim of 1' WHERE id = :i"),
                     {"i": mail["id"]})
    with pytest.raises(Tampered, match="altered"):
        Mailbox(store).decide(mail["id"], people["ann"], "approved")


def test_tampered_decision_row_is_ignored_on_reentry(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    mb.decide(mail_of(store, people, "ann")["id"], people["ann"], "approved")
    forged = mail_of(store, people, "cid")["id"]
    with store.db.begin() as conn:  # an approval written straight into the table
        conn.execute(text("UPDATE mailbox SET decision = 'approved' WHERE id = :i"),
                     {"i": forged})
    inst = units.reenter(iid)
    assert inst.circles["approve"].state == "waiting"  # the forged decision counts for nothing
    whys = [e["data"]["why"] for e in store.history(iid) if e["kind"] == "approval_refused"]
    assert "the decision does not match its signature" in whys


def test_what_a_mailbox_verified_once_is_checked_again_once_edited(store, units):
    """A mailbox remembers the signatures it verified, for the very same values only: an
    edit after the first check is caught, one Python calls equal too (0 for false), and
    an edited decision."""
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    mail_id = mail_of(store, people, "ann")["id"]
    assert mb.check(store.mail(mail_id)) is None and mb.check(store.mail(mail_id)) is None
    payload = store.mail(mail_id).payload
    assert payload["epoch"] == 0
    for epoch in (False, 0.0):  # == 0 in Python, not the value that was signed
        with store.db.begin() as conn:
            conn.execute(text("UPDATE mailbox SET payload = :p WHERE id = :i"),
                         {"p": json.dumps({**payload, "epoch": epoch}), "i": mail_id})
        assert mb.check(store.mail(mail_id)) == "the mail does not match its signature"
    with store.db.begin() as conn:
        conn.execute(text("UPDATE mailbox SET payload = :p WHERE id = :i"),
                     {"p": json.dumps(payload), "i": mail_id})
    mb.decide(mail_id, people["ann"], "approved", "fine")
    assert mb.check(store.mail(mail_id)) is None
    with store.db.begin() as conn:
        conn.execute(text("UPDATE mailbox SET comment = 'fine!' WHERE id = :i"), {"i": mail_id})
    assert mb.check(store.mail(mail_id)) == "the decision does not match its signature"


def test_exact_texts_tell_apart_what_python_calls_equal():
    assert len({exact(v) for v in (1, 1.0, True, "1", [1])}) == 5
    assert exact({"b": 1, "a": [None]}) == exact({"a": [None], "b": 1})
    for lossy in (float("nan"), float("inf"), [2 ** 70], {1: "a"}):
        assert exact(lossy) is None  # checked whole, never remembered


def test_a_decision_sees_a_suspension_made_by_another_process(db_url, store, units):
    """The instance a decision finds open is this process's copy only while the stored
    row is still the one it copied."""
    iid, people = start_approval(store, units, ["ann", "cid"], "any")
    mb = Mailbox(store)
    mail = mail_of(store, people, "ann")
    assert store.current(iid).status == "running"
    other = Store(db_url, secret=store.secret)
    try:
        other.suspend(iid)
    finally:
        other.close()
    assert store.current(iid).status == "suspended"
    with pytest.raises(Conflict, match="the instance is suspended"):
        mb.decide(mail["id"], people["ann"], "approved")


def test_replayed_decision_is_refused(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    mail = mail_of(store, people, "ann")
    mb.decide(mail["id"], people["ann"], "approved")
    with pytest.raises(Conflict, match="already approved"):
        mb.decide(mail["id"], people["ann"], "approved")
    with pytest.raises(Conflict):
        mb.decide(mail["id"], people["ann"], "rejected")
    # after a reset, a decision on the old request cannot count for the new attempt
    mb.decide(mail_of(store, people, "cid")["id"], people["cid"], "rejected")
    store.reset(iid, "approve", "self")
    Worker(store).run_once()
    old = [m for m in mb.inbox(people["ann"], kind="approval") if m["decision"]][0]
    with pytest.raises(Conflict):
        mb.decide(old["id"], people["ann"], "approved")
    fresh = [m for m in mb.inbox(people["ann"], kind="approval") if not m["decision"]]
    assert len(fresh) == 1 and store.get(iid).circles["approve"].state == "waiting"



def test_moving_an_approval_to_another_recipient_is_detected(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    mail = mail_of(store, people, "ann")
    with store.db.begin() as conn:
        conn.execute(text("UPDATE mailbox SET recipient_id = :r WHERE id = :i"),
                     {"r": people["cid"]["id"], "i": mail["id"]})
    moved = Mailbox(store).inbox(people["cid"], kind="approval")[0]
    assert moved["signature_ok"] is False
    with pytest.raises(Tampered):
        Mailbox(store).decide(mail["id"], people["cid"], "approved")



# --------------------------------------------------------- guest mail
def test_guest_messages_reach_admins_with_limits_and_a_rate_limit(store):
    people = users(store, "root:admin", "bob")
    mb = Mailbox(store)
    with pytest.raises(FormError) as exc:
        mb.guest_message("", "s" * 201, "hi", "1.2.3.4")
    assert set(exc.value.errors) == {"name", "subject"}
    for i in range(5):
        mb.guest_message("Eve", f"hello {i}", "<script>alert(1)</script>", "1.2.3.4")
    with pytest.raises(RateLimited) as limited:
        mb.guest_message("Eve", "again", "x", "1.2.3.4")
    assert limited.value.retry_after > 0
    mb.guest_message("Other", "hi", "x", "5.6.7.8")  # another client is not limited
    admin_box = mb.inbox(people["root"], kind="guest")
    assert len(admin_box) == 6 and admin_box[-1]["body"] == "<script>alert(1)</script>"
    assert mb.inbox(people["bob"], kind="guest") == []
    with store.db.connect() as conn:
        clients = [r[0] for r in conn.execute(text("SELECT client FROM mailbox"))]
    assert "1.2.3.4" not in clients  # the address is kept only as a keyed hash




# ------------------------------------------------------------- the quorum
@pytest.mark.parametrize("quorum,approvers,decisions,verdict", [
    ("all", 3, [], None),
    ("all", 3, ["approved", "approved"], None),
    ("all", 3, ["approved", "approved", "approved"], "approved"),
    ("all", 3, ["approved", "rejected"], "rejected"),
    ("any", 3, ["approved"], "approved"),
    ("any", 3, [], None),
    ("any", 3, ["rejected"], "rejected"),
    ("any", 3, ["rejected", "approved"], "rejected"),  # the first decision settles
    ("sequence", 3, ["approved", "approved"], None),
    ("sequence", 3, ["approved", "approved", "approved"], "approved"),
    ("sequence", 3, ["approved", "rejected"], "rejected"),
    ({"ratio": 0.6}, 5, ["approved", "approved"], None),
    ({"ratio": 0.6}, 5, ["approved", "approved", "approved"], "approved"),  # 3/5 = 0.6
    ({"ratio": 0.6}, 5, ["rejected", "rejected"], None),  # 3 of 5 may still approve
    ({"ratio": 0.6}, 5, ["rejected", "approved", "rejected", "rejected"], "rejected"),
    ({"ratio": 1}, 2, ["approved", "rejected"], "rejected"),
    (2, 3, ["approved"], None),
    (2, 3, ["approved", "rejected"], None),
    (2, 3, ["approved", "approved"], "approved"),
    (2, 3, ["rejected", "rejected"], "rejected"),
    ("2", 3, ["approved", "approved"], "approved"),
    (1, 1, ["rejected"], "rejected"),
])
def test_quorum_verdict_is_given_once_the_outcome_is_certain(quorum, approvers, decisions,
                                                             verdict):
    assert quorum_verdict(quorum, approvers, decisions) == verdict


# --------------------------------------------------------- deciding once
def test_a_decided_approval_cannot_be_decided_again(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    mail = mail_of(store, people, "ann")
    mb.decide(mail["id"], people["ann"], "approved", "fine")
    with pytest.raises(Conflict, match="already approved"):
        mb.decide(mail["id"], people["ann"], "rejected", "changed my mind")
    again = mail_of(store, people, "ann")
    assert (again["decision"], again["comment"], again["signature_ok"]) == \
        ("approved", "fine", True)
    assert store.get(iid).circles["approve"].state == "waiting"  # cid has not decided


def test_a_decision_on_a_request_whose_circle_failed_is_refused(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    mb.decide(mail_of(store, people, "cid")["id"], people["cid"], "rejected")
    assert store.get(iid).circles["approve"].state == "failure"
    late = mail_of(store, people, "ann")
    with pytest.raises(Conflict, match="no longer open"):
        mb.decide(late["id"], people["ann"], "approved")
    assert mail_of(store, people, "ann")["decision"] is None
    assert store.get(iid).circles["approve"].state == "failure"


def test_a_decision_on_the_request_of_an_earlier_attempt_is_refused(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    old = mail_of(store, people, "ann")
    mb.decide(mail_of(store, people, "cid")["id"], people["cid"], "rejected")
    store.reset(iid, "approve", "self")  # a new epoch: the worker asks again
    Worker(store).run_once()
    fresh = [m for m in mb.inbox(people["ann"], kind="approval") if m["id"] != old["id"]]
    assert len(fresh) == 1 and store.get(iid).circles["approve"].state == "waiting"
    with pytest.raises(Conflict, match="no longer open"):
        mb.decide(old["id"], people["ann"], "approved")
    box = {m["id"]: m["decision"] for m in mb.inbox(people["ann"], kind="approval")}
    assert box == {old["id"]: None, fresh[0]["id"]: None}
    assert store.get(iid).circles["approve"].state == "waiting"


def test_only_approval_mail_can_be_decided(store):
    people = users(store, "bob", "ann:approver")
    [mail_id] = Mailbox(store).send("message", people["bob"], ["ann"], "hi", "there")
    with pytest.raises(NotFound):
        Mailbox(store).decide(mail_id, people["ann"], "approved")
    with pytest.raises(ValueError):
        Mailbox(store).decide(mail_id, people["ann"], "maybe")


# ------------------------------------------------------ who reads what
def unread(store, user, kind) -> dict[int, bool]:
    return {m["id"]: m["read"] for m in Mailbox(store).inbox(user, kind=kind)}


def test_the_addressee_marks_their_mail_read(store):
    people = users(store, "bob", "ann")
    mb = Mailbox(store)
    [mail_id] = mb.send("message", people["bob"], ["ann"], "hi", "there")
    assert unread(store, people["ann"], "message") == {mail_id: False}
    mb.mark_read(mail_id, people["ann"])
    assert unread(store, people["ann"], "message") == {mail_id: True}


@pytest.mark.parametrize("reader", ["bob", "root"])
def test_mail_of_someone_else_is_not_found_even_for_an_admin(store, reader):
    people = users(store, "bob", "ann", "root:admin")
    mb = Mailbox(store)
    [mail_id] = mb.send("message", people["bob"], ["ann"], "hi", "there")
    with pytest.raises(NotFound):
        mb.mark_read(mail_id, people[reader])
    assert unread(store, people["ann"], "message") == {mail_id: False}


def test_an_admin_marks_a_guest_message_read(store):
    people = users(store, "root:admin")
    mb = Mailbox(store)
    mail_id = mb.guest_message("Eve", "hello", "a note", "1.2.3.4")
    mb.mark_read(mail_id, people["root"])
    assert unread(store, people["root"], "guest") == {mail_id: True}


def test_a_guest_message_is_not_found_for_a_non_admin(store):
    people = users(store, "root:admin", "bob", "ann:approver")
    mb = Mailbox(store)
    mail_id = mb.guest_message("Eve", "hello", "a note", "1.2.3.4")
    for name in ("bob", "ann"):
        with pytest.raises(NotFound):
            mb.mark_read(mail_id, people[name])
    assert unread(store, people["root"], "guest") == {mail_id: False}


def test_marking_unknown_mail_read_is_not_found(store):
    people = users(store, "root:admin")
    with pytest.raises(NotFound):
        Mailbox(store).mark_read(987654, people["root"])


# ------------------------------------- refused decisions store nothing (SPEC §13)
def refusals(store, iid):
    return [e["data"] for e in store.history(iid) if e["kind"] == "approval_refused"]


def test_a_decision_while_the_instance_is_suspended_is_refused_and_recorded(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "any")
    mb = Mailbox(store)
    mail = mail_of(store, people, "ann")
    store.suspend(iid)
    with pytest.raises(Conflict, match="the instance is suspended"):
        mb.decide(mail["id"], people["ann"], "approved", "fine")
    assert mail_of(store, people, "ann")["decision"] is None  # nothing stored
    assert refusals(store, iid) == [{"mail": mail["id"], "why": "the instance is suspended",
                                     "by": "ann", "decision": "approved"}]
    store.resume(iid)
    mb.decide(mail["id"], people["ann"], "approved", "fine")  # decided once it can move
    assert store.get(iid).circles["approve"].state == "success"


def test_a_decision_on_an_aborted_instance_is_refused_and_recorded(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    mail = mail_of(store, people, "ann")
    store.abort(iid, "stop")
    with pytest.raises(Conflict, match="the instance is terminated"):
        Mailbox(store).decide(mail["id"], people["ann"], "rejected")
    assert mail_of(store, people, "ann")["decision"] is None
    assert [r["why"] for r in refusals(store, iid)] == ["the instance is terminated"]
    assert store.get(iid).status == "terminated"


def test_a_decision_on_a_closed_request_is_recorded(store, units):
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    mb = Mailbox(store)
    mb.decide(mail_of(store, people, "cid")["id"], people["cid"], "rejected")
    with pytest.raises(Conflict, match="no longer open"):
        mb.decide(mail_of(store, people, "ann")["id"], people["ann"], "approved")
    assert [r["why"] for r in refusals(store, iid)] == ["this approval request is no longer open"]


def test_an_edited_sender_name_breaks_the_signature(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    mail = mail_of(store, people, "ann")
    assert mail["sender"] == "bob" and mail["signature_ok"]
    with store.db.begin() as conn:
        conn.execute(text("UPDATE mailbox SET sender_name = 'ceo' WHERE id = :i"),
                     {"i": mail["id"]})
    shown = mail_of(store, people, "ann")
    assert shown["sender"] == "ceo" and shown["signature_ok"] is False
    with pytest.raises(Tampered, match="altered"):
        Mailbox(store).decide(mail["id"], people["ann"], "approved")


@pytest.mark.parametrize("edit", [{"quorum": "any"}, {"approvers": ["ann"]}, {"quorum": 1}])
def test_the_quorum_counted_is_the_signed_one_not_the_circle_state(db_url, store, units,
                                                                   edit):
    from bpflow.store import Store
    from bpflow.store.tables import circles_t
    from tests.conftest import SECRET
    iid, people = start_approval(store, units, ["ann", "cid"], "all")
    where = (circles_t.c.instance_id == iid, circles_t.c.circle == "approve")
    with store.db.begin() as conn:  # someone loosens the unsigned circle state
        pending = conn.execute(select(circles_t.c.pending).where(*where)).scalar()
        pending["approval"].update(edit)
        conn.execute(update(circles_t).where(*where).values(pending=pending))
    fresh = Store(db_url, secret=SECRET)  # reads the edited state, no cached copy
    try:
        assert fresh.get(iid).circles["approve"].pending["approval"]["quorum"] == \
            edit.get("quorum", "all")
        mb = Mailbox(fresh)
        mb.decide(mail_of(fresh, people, "ann")["id"], people["ann"], "approved")
        assert fresh.get(iid).circles["approve"].state == "waiting"  # cid must approve too
        mb.decide(mail_of(fresh, people, "cid")["id"], people["cid"], "approved")
        assert fresh.get(iid).circles["approve"].state == "success"
    finally:
        fresh.close()


# ------------------------------------------------------------ languages (SPEC §17)
def _translated(kind: str, to: list[str], subject: dict, body: dict) -> dict:
    return {"name": f"t-{kind}", "circles": [
        {"uri": "claim", "box": {"form": [{"name": "amount", "type": "number"}]}},
        {"uri": "send", "deps": [["claim"]],
         "box": {"action": {"type": kind, "to": to, "subject": subject, "body": body}}},
        {"uri": "end", "deps": [["send"]]}]}


@pytest.mark.parametrize("kind", ["approval", "mail"])
def test_mail_is_written_in_each_addressees_language(store, units, kind):
    """Each addressee reads the subject and body in their language (`users.language`),
    else English, placeholders substituted; the approval signed is the one they read."""
    people = users(store, "bob", "ann:approver", "cid:approver", "dan:approver")
    store.set_language(people["ann"]["id"], "zh-CN")
    store.set_language(people["dan"]["id"], "en")
    store.put_template(_translated(kind, ["ann", "cid", "dan"],
                                   {"en": "Claim of ${claim.amount}",
                                    "zh-CN": "报销申请：${claim.amount}"},
                                   {"zh-CN": "请审批 ${user.username} 的报销"}))
    iid = store.start(f"t-{kind}", {}, people["bob"]).id
    units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 120})
    Worker(store).run_once()
    wanted = "approval" if kind == "approval" else "message"
    got = {name: Mailbox(store).inbox(people[name], kind=wanted)[0]
           for name in ("ann", "cid", "dan")}
    assert got["ann"]["subject"] == "报销申请：120"
    assert got["cid"]["subject"] == got["dan"]["subject"] == "Claim of 120"
    # a body in Chinese only: everyone reads the one given
    assert {m["body"] for m in got.values()} == {"请审批 bob 的报销"}
    if kind == "approval":
        assert all(m["signature_ok"] and m["payload"]["subject"] == m["subject"]
                   for m in got.values())
        for name in ("ann", "cid", "dan"):
            Mailbox(store).decide(got[name]["id"], people[name], "approved")
        assert store.get(iid).circles["send"].state == "success"
    else:
        assert store.get(iid).circles["send"].state == "success"
