"""Every box end to end through the engine, the SQL store and the worker (SQLite and
PostgreSQL), with a real local HTTP server for HTTP actions."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from bpflow.errors import Forbidden, RateLimited, Tampered
from bpflow.forms import FormError
from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.store import Conflict
from bpflow.worker import Worker
from engine.errors import BookmarkError, TransitionError
from tests.http_server import LocalServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def units(store):
    return Interactions(store)


@pytest.fixture
def server():
    with LocalServer() as s:
        yield s


def users(store, *specs):
    out = {}
    for spec in specs:
        name, *roles = spec.split(":")
        store.add_user(name, f"pw-{name}", roles or ["user"])
        out[name] = store.user(name)
    return out


def mark(store, iid, cid):
    return store.engine.bookmark(store.get(iid), cid)


def drain(worker: Worker, until, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worker.run_once()
        if until():
            return
        time.sleep(0.05)
    raise AssertionError("the worker did not get there in time")


# ---------------------------------------------------------------- forms
FORM_FLOW = {"name": "claimform", "circles": [
    {"uri": "claim", "box": {"form": [
        {"name": "amount", "type": "number", "label": "Amount", "required": True},
        {"name": "who", "type": "string", "default": "${user.username}"}]}},
    {"uri": "end", "deps": [["claim"]]}]}


def test_form_values_become_the_typed_result(store, units):
    u = users(store, "bob")["bob"]
    store.put_template(FORM_FLOW)
    inst = store.start("claimform", {}, u)
    with pytest.raises(FormError) as exc:
        units.submit(inst.id, "claim", mark(store, inst.id, "claim"), {"amount": "lots"})
    assert exc.value.errors == {"amount": "Amount must be a number"}
    assert store.get(inst.id).circles["claim"].state == "waiting"  # still ready for a retry
    done = units.submit(inst.id, "claim", mark(store, inst.id, "claim"), {"amount": "42"})
    assert done.circles["claim"].result == {"amount": 42, "who": "bob"}
    assert done.status == "completed"


def test_confirm_accept_and_decline(store, units):
    store.put_template({"name": "terms", "circles": [
        {"uri": "agree", "box": {"confirm": "Accept the terms, ${user.username}?"}}]})
    a, b = store.start("terms", {}, {"username": "x"}), store.start("terms")
    assert units.submit(a.id, "agree", mark(store, a.id, "agree"), {"accept": True}).status \
        == "completed"
    declined = units.confirm(b.id, "agree", mark(store, b.id, "agree"), False, "too long")
    assert declined.circles["agree"].state == "failure"
    assert declined.circles["agree"].reason == "declined: too long"
    c = store.start("terms")
    accepted = units.confirm(c.id, "agree", mark(store, c.id, "agree"), True)
    assert accepted.status == "completed"
    assert accepted.circles["agree"].result == {"accepted": True}


def test_confirming_a_circle_that_asks_for_no_confirmation_is_refused(store, units):
    store.put_template({"name": "note", "circles": [
        {"uri": "write", "box": {"form": [{"name": "text", "type": "string"}]}}]})
    inst = store.start("note")
    with pytest.raises(TransitionError, match="asks for no confirmation"):
        units.confirm(inst.id, "write", mark(store, inst.id, "write"), True)
    assert store.get(inst.id).circles["write"].state == "waiting"


# ----------------------------------------------------------------- HTTP
def http_flow(url, name="call", retry=None, circle_timeout=None, **action):
    circle = {"uri": "call", "box": {"action": {"type": "http", "method": "POST", "url": url,
                                                "json": {"n": "${workflow.input.n}"},
                                                **action}}}
    if retry is not None:
        circle["retry"] = retry
    if circle_timeout is not None:
        circle["timeout"] = circle_timeout
    return {"name": name, "circles": [circle, {"uri": "end", "deps": [["call"]]}]}


def test_http_success_failure_timeout_refused(store, server):
    store.put_template(http_flow(f"{server.url}/ok", "good"))
    store.put_template(http_flow(f"{server.url}/status/500", "bad"))
    store.put_template(http_flow(f"{server.url}/slow/3", "slow", timeout=0.3))
    store.put_template(http_flow("http://127.0.0.1:9/", "refused"))
    ids = {name: store.start(name, {"n": 7}).id for name in ("good", "bad", "slow", "refused")}
    Worker(store).run_once()
    got = {name: store.get(iid).circles["call"] for name, iid in ids.items()}
    assert got["good"].result == {"ok": True, "echo": {"n": 7}}
    assert "answered HTTP 500" in got["bad"].reason and "server says no" in got["bad"].reason
    assert "timed out after 0.3 s" in got["slow"].reason
    assert "failed" in got["refused"].reason and "Connect" in got["refused"].reason


def test_http_retries_follow_the_list_with_a_key_per_attempt(store, server):
    store.put_template(http_flow(f"{server.url}/status/503", retry=[0.2, 0.3]))
    iid = store.start("call", {"n": 1}).id
    worker = Worker(store)
    drain(worker, lambda: store.get(iid).circles["call"].state == "failure")
    run = store.get(iid).circles["call"]
    assert run.attempts == 3 and "HTTP 503" in run.reason
    keys = server.recorder.keys()
    assert keys == {f"{iid}:call:0": 1, f"{iid}:call:1": 1, f"{iid}:call:2": 1}
    starts = [r for r in server.recorder.requests]
    assert len(starts) == 3
    kinds = [e["kind"] for e in store.history(iid)]
    assert kinds.count("circle_retry_scheduled") == 2 and kinds.count("circle_failed") == 1


def test_timeout_policy_terminate_ends_the_instance(store):
    store.put_template({"name": "wait", "circles": [
        {"uri": "w", "box": {"form": [{"name": "x"}]},
         "timeout": {"seconds": 0.2, "policy": "TIME_OUT_WF"}}]})
    iid = store.start("wait").id
    time.sleep(0.25)
    Worker(store).run_once()
    final = store.get(iid)
    assert final.status == "terminated" and "timed out" in final.reason


def test_form_feeds_the_http_action_through_form_variables(store, units, server):
    store.put_template({"name": "lookup", "circles": [
        {"uri": "ask", "box": {"form": [{"name": "q", "type": "integer", "required": True}],
                               "action": {"type": "http", "method": "POST",
                                          "url": f"{server.url}/ok",
                                          "json": {"q": "${form.q}"}}}}]})
    iid = store.start("lookup").id
    assert Worker(store).run_once() == 0  # nothing to run before the form is sent
    units.submit(iid, "ask", mark(store, iid, "ask"), {"q": "5"})
    Worker(store).run_once()
    assert store.get(iid).circles["ask"].result == {"ok": True, "echo": {"q": 5}}


# ------------------------------------------------------------ approvals
def approval_flow(to, quorum):
    return {"name": "expense", "circles": [
        {"uri": "claim", "box": {"form": [{"name": "amount", "type": "number"}]}},
        {"uri": "approve", "deps": [["claim"]],
         "box": {"action": {"type": "approval", "to": to, "quorum": quorum,
                            "subject": "Claim of ${claim.amount}"}}},
        {"uri": "end", "deps": [["approve"]]}]}


def start_approval(store, units, to, quorum):
    people = users(store, "bob", "ann:approver", "cid:approver", "dan:approver")
    store.put_template(approval_flow(to, quorum))
    iid = store.start("expense", {}, people["bob"]).id
    units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 120})
    Worker(store).run_once()
    return iid, people


def mail_of(store, people, name):
    box = Mailbox(store).inbox(people[name], kind="approval")
    assert len(box) == 1, box
    return box[0]


@pytest.mark.parametrize("quorum,decisions,outcome", [
    ("all", {"ann": "approved", "cid": "approved", "dan": "approved"}, "success"),
    ("all", {"ann": "approved", "cid": "rejected"}, "failure"),
    ("any", {"cid": "approved"}, "success"),
    ("any", {"ann": "rejected", "cid": "rejected", "dan": "rejected"}, "failure"),
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
    if outcome == "success":
        assert run.result["approved"] is True and store.get(iid).status == "completed"
    else:
        assert "rejected" in run.reason


def test_only_the_addressee_decides(store, units):
    iid, people = start_approval(store, units, ["ann"], "all")
    mail = mail_of(store, people, "ann")
    with pytest.raises(Forbidden):
        Mailbox(store).decide(mail["id"], people["cid"], "approved")


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


# ----------------------------------------------------- mail, guest, timer
def test_mail_unit_sends_an_in_site_message(store):
    people = users(store, "bob", "ann")
    store.put_template({"name": "note", "circles": [
        {"uri": "tell", "box": {"action": {"type": "mail", "to": ["ann"],
                                           "subject": "Hi from ${user.username}",
                                           "body": "see you"}}}]})
    iid = store.start("note", {}, people["bob"]).id
    Worker(store).run_once()
    assert store.get(iid).status == "completed"
    inbox = Mailbox(store).inbox(people["ann"], kind="message")
    assert [(m["subject"], m["sender"]) for m in inbox] == [("Hi from bob", "bob")]


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


def test_timer_fires_through_the_worker(store):
    store.put_template({"name": "nap", "circles": [
        {"uri": "t", "box": {"action": {"type": "timer", "delay": 0.3}}}]})
    iid = store.start("nap").id
    worker = Worker(store)
    worker.run_once()
    assert store.get(iid).status == "running"
    drain(worker, lambda: store.get(iid).status == "completed")
    result = store.get(iid).circles["t"].result
    assert result["fired_at"] >= result["due_at"]


def test_compute_and_three_level_nesting_through_the_store(store):
    inner = [{"uri": "leaf", "box": {"form": [{"name": "v", "type": "integer"}]}}]
    for depth in (3, 2, 1):
        inner = [{"uri": f"n{depth}", "box": {"action": {"type": "flow", "circles": inner}}}]
    inner.append({"uri": "double", "deps": [["n1"]], "box": {"action": {
        "type": "compute", "outputs": {"v": "${n1.n2.n3.leaf.v} * 2"}}}})
    store.put_template({"name": "deep", "circles": inner})
    iid = store.start("deep").id
    store.complete(iid, "n1.n2.n3.leaf", mark(store, iid, "n1.n2.n3.leaf"), {"v": 21})
    final = store.get(iid)
    assert final.status == "completed" and final.circles["double"].result == {"v": 42}


# --------------------------------------------------- auth and the outer flow
def test_outer_flow_survives_signing_in_again_and_keeps_passwords_out(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    users(store, "bob", "ann:approver")
    assert units.sign_in("bob", "wrong") is None
    inst = units.sign_in("bob", "pw-bob")
    assert inst.circles["auth"].result == {"username": "bob", "roles": ["user"]}
    assert store.engine.ready(inst) == ["main.claim"]
    units.submit(inst.id, "main.claim", mark(store, inst.id, "main.claim"),
                 {"amount": 30, "reason": "taxi", "manager": "ann"})
    again = units.sign_in("bob", "pw-bob")
    assert again.id == inst.id  # the same business flow, where it was
    assert again.circles["main.claim"].result["amount"] == 30
    assert again.circles["main.approve"].state == "waiting"
    assert "signed_in_again" in [e["kind"] for e in store.history(inst.id)]
    dump = json.dumps(store.history(inst.id)) + json.dumps(again.to_dict())
    assert "pw-bob" not in dump


def test_auth_form_with_bad_credentials_keeps_the_circle_ready(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    bob = users(store, "bob")["bob"]
    inst = store.start("signin", {}, bob)
    with pytest.raises(FormError) as exc:
        units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                     {"username": "bob", "password": "nope"})
    assert exc.value.errors == {"password": "wrong username or password"}
    assert store.engine.ready(store.get(inst.id)) == ["auth"]
    with pytest.raises(BookmarkError):
        units.submit(inst.id, "auth", "0.forged", {"username": "bob", "password": "pw-bob"})


# ------------------------------------------------------ review follow-ups
def test_auth_circle_accepts_only_the_owner_and_limits_guessing(store, units):
    from bpflow.auth import SIGN_IN_FAILURES as AUTH_FAILURES
    AUTH_FAILURES.failures.clear()
    store.import_dir(ROOT / "upload" / "workflow")
    people = users(store, "alice", "root:admin")
    inst = store.start("signin", {}, people["alice"])
    with pytest.raises(FormError):  # right password, but not the owner of this flow
        units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                     {"username": "root", "password": "pw-root"})
    assert "auth_failed" in [e["kind"] for e in store.history(inst.id)]
    for _ in range(10):
        with pytest.raises(FormError):
            units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                         {"username": "alice", "password": "guess"})
    with pytest.raises(FormError, match="too many failed attempts"):
        units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                     {"username": "alice", "password": "pw-alice"})
    AUTH_FAILURES.failures.clear()
    done = units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                        {"username": "alice", "password": "pw-alice"})
    assert done.circles["auth"].result["username"] == "alice"


@pytest.mark.parametrize("to,why", [("bob", "cannot approve their own request"),
                                    ("eve", "eve is not an approver"),
                                    ("nobody", "no user named nobody")])
def test_approvals_need_an_approver_other_than_the_requester(store, units, to, why):
    people = users(store, "bob", "eve")
    store.put_template(approval_flow(to, "all"))
    iid = store.start("expense", {}, people["bob"]).id
    units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 1})
    Worker(store).run_once()
    run = store.get(iid).circles["approve"]
    assert run.state == "failure" and why in run.reason


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


def test_retries_of_a_form_fed_action_run_on_their_own(store, units, server):
    store.put_template({"name": "lookup", "circles": [
        {"uri": "ask", "retry": [0.1, 0.1],
         "box": {"form": [{"name": "q", "type": "integer"}],
                 "action": {"type": "http", "url": f"{server.url}/status/502",
                            "json": {"q": "${form.q}"}}}}]})
    iid = store.start("lookup").id
    units.submit(iid, "ask", mark(store, iid, "ask"), {"q": 1})
    drain(Worker(store), lambda: store.get(iid).circles["ask"].state == "failure")
    assert store.get(iid).circles["ask"].attempts == 3
    assert len(server.recorder.requests) == 3


def test_import_checks_every_file_before_storing_any(store, tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"name": "aaa", "circles": [{"uri": "x"}]}))
    (tmp_path / "b.json").write_text(json.dumps({"name": "bbb", "circles": [
        {"uri": "x", "deps": [["nope"]]}]}))
    with pytest.raises(Exception, match="b.json"):
        store.import_dir(tmp_path)
    assert store.template_versions() == {}
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="b.json: not a template"):
        store.import_dir(tmp_path)
