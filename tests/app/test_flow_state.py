"""The flow page's state: who may see an instance, boxes with per-field errors, form
data flowing up to the circle, the reset preview and confirmation, nested flows."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta

import pytest
from sqlalchemy import event

from bpflow.access import Caller
from bpflow.errors import Forbidden
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow_app.pages import flow_state
from bpflow_app.pages.flow_state import FlowState, route_id, work_step
from tests.app.conftest import SECRET
from tests.app.helpers import WAIT_S, follow_while, run
from tests.conftest import run_async

CLAIM = {"amount": "12.5", "reason": "Taxi", "manager": "bob"}


def _open(make_state, web_store, user="alice", template="reimbursement"):
    inst = web_store.start(template, {}, web_store.user(user))
    state = make_state(FlowState, user=user, path=f"/flow/{inst.id}")
    state.load()
    return state, inst


def _submit(state, cid, data):
    box = next(b for b in state.boxes if b.cid == cid)
    return run(state.submit({"__circle": cid, "__bookmark": box.bookmark, **data}))


def test_route_id_reads_the_flow_path():
    assert route_id("/flow/abc123") == "abc123"
    assert route_id("/flow/abc123/") == "abc123"
    assert route_id("/flows") == "" and route_id("/flow/a/b") == ""
    assert route_id("/prefix/flow/abc123") == "abc123"  # behind a frontend_path


def test_owner_sees_drawing_and_the_form_waiting(make_state, web_store):
    state, inst = _open(make_state, web_store)
    assert not state.missing and state.head.status == "running"
    assert [b.cid for b in state.boxes] == ["claim"]
    fields = {f.name: f for f in state.boxes[0].fields}
    assert fields["amount"].html_type == "number" and fields["reason"].type == "text"
    assert fields["manager"].default == "approver"
    states = {n.id: n.state for n in state.nodes}
    assert states["claim"] == "ready" and states["done"] == "waiting"


def test_someone_else_cannot_see_the_flow(make_state, web_store):
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    state = make_state(FlowState, user="carol", path=f"/flow/{inst.id}")
    state.load()
    assert state.missing and state.boxes == []


def test_someone_else_gets_no_history_nor_circles(make_state, web_store):
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    state = make_state(FlowState, user="carol", path=f"/flow/{inst.id}")
    state.load()
    state.set_tab("history")
    state.set_tab("circles")
    assert state.history == [] and state.circle_rows == []


def test_the_approver_may_look_but_not_act(make_state, web_store, work):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    work()  # bob gets the approval mail
    bob = make_state(FlowState, user="bob", path=f"/flow/{inst.id}")
    bob.load()
    assert not bob.missing and not bob.can_act
    [approve] = bob.boxes  # its status, whom it waits for, nothing to do
    assert (approve.kind, approve.waits, approve.withdraw) == ("status", "Waits for bob", False)
    assert {n.id: n.state for n in bob.nodes}["approve"] == "ready"
    bob.select("claim")
    bob.ask_reset("self")
    assert bob.preview == [] and web_store.get(inst.id).circles["claim"].state == "success"


def test_admin_can_see_any_flow(make_state, web_store):
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    state = make_state(FlowState, user="root", path=f"/flow/{inst.id}")
    state.load()
    assert not state.missing


def test_a_bad_form_shows_errors_per_field_and_keeps_the_circle(make_state, web_store):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", {**CLAIM, "amount": "twelve"})
    errors = {f.name: f.error for f in state.boxes[0].fields}
    assert errors["amount"] == "Amount must be a number" and errors["reason"] == ""
    assert web_store.get(inst.id).circles["claim"].state == "waiting"


def test_form_data_flows_up_to_the_circle_and_the_next_one_appears(make_state, web_store,
                                                                   work):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    assert web_store.get(inst.id).circles["claim"].result == {
        "amount": 12.5, "reason": "Taxi", "manager": "bob"}
    work()  # the approval action sends its mail
    state.load()
    approve = next(b for b in state.boxes if b.cid == "approve")
    assert approve.tone == "approval" and approve.approvers == ["bob"]
    assert approve.status_lines == ["Subject: Expense claim of 12.5 by alice"]


def test_a_form_feeds_its_action_which_completes_the_circle(make_state, web_store, work):
    from tests.http_server import LocalServer
    with LocalServer() as server:
        web_store.put_template({"name": "ping", "circles": [
            {"uri": "ask", "box": {
                "form": [{"name": "what", "type": "string", "required": True}],
                "action": {"type": "http", "method": "POST", "url": server.url + "/ok",
                           "json": {"what": "${form.what}"}}}},
            {"uri": "end", "deps": [["ask"]]}]})
        state, inst = _open(make_state, web_store, template="ping")
        assert state.boxes[0].kind == "form"
        _submit(state, "ask", {"what": "hello"})
        assert (state.boxes[0].kind, state.boxes[0].tone) == ("status", "running")  # layer 2
        work()
    state.load()
    run_ = web_store.get(inst.id).circles["ask"]
    assert run_.state == "success" and run_.result["echo"] == {"what": "hello"}
    assert state.head.status == "completed" and state.boxes == []


def test_a_stale_bookmark_is_refused_and_the_page_refreshed(make_state, web_store):
    state, inst = _open(make_state, web_store)
    run(state.submit({"__circle": "claim", "__bookmark": "0.forged", **CLAIM}))
    assert web_store.get(inst.id).circles["claim"].state == "waiting"
    assert [b.cid for b in state.boxes] == ["claim"]


def _technical(make_state, iid, user="root"):
    """The flow page of an admin, in the technical view."""
    state = make_state(FlowState, user=user, path=f"/flow/{iid}")
    state.load()
    state.set_intervention(True)
    return state


def test_reset_shows_a_preview_then_resets_on_confirmation(make_state, web_store):
    alice, inst = _open(make_state, web_store)
    _submit(alice, "claim", CLAIM)
    state = _technical(make_state, inst.id)
    state.select("claim")
    assert state.chosen.resettable and state.chosen.result
    state.ask_reset("self")
    assert state.preview == ["claim", "approve"] and state.preview_open
    assert any(e.kind == "weak" for e in state.edges)  # what a reset may reach
    assert web_store.get(inst.id).circles["claim"].state == "success"  # nothing changed yet
    events = run(state.confirm_reset())
    assert "2 steps from “Fill in the claim” go back to waiting" in str(events[-1])
    assert not state.preview_open
    assert web_store.get(inst.id).circles["claim"].state == "waiting"
    assert [b.cid for b in state.boxes] == ["claim"]


def test_cancelling_a_reset_changes_nothing(make_state, web_store):
    alice, inst = _open(make_state, web_store)
    _submit(alice, "claim", CLAIM)
    state = _technical(make_state, inst.id)
    state.select("claim")
    state.ask_reset("all")
    state.cancel_reset()
    assert state.preview == [] and web_store.get(inst.id).circles["claim"].state == "success"


def test_the_technical_view_is_for_admins_only(make_state, web_store):
    """The claimant sees her steps by their descriptions, no uris, no weak edges, no
    circles' table and no resetting; an admin turns the technical view on."""
    alice, inst = _open(make_state, web_store)
    _submit(alice, "claim", CLAIM)
    alice.set_intervention(True)
    assert not alice.intervention
    assert not [e for e in alice.edges if e.kind == "weak"]
    assert {n.id: n.label for n in alice.nodes}["claim"] == "Fill in the claim"
    assert {n.id: n.aria for n in alice.nodes}["claim"] == "Fill in the claim: done"
    alice.set_tab("circles")
    assert alice.tab == "flow" and alice.circle_rows == []
    alice.select("claim")
    alice.ask_reset("self")
    assert alice.preview == [] and web_store.get(inst.id).circles["claim"].state == "success"

    root = _technical(make_state, inst.id)
    assert root.intervention and [e for e in root.edges if e.kind == "weak"]
    assert {n.id: n.label for n in root.nodes}["claim"] == "claim"  # the uri
    root.set_tab("circles")
    assert [c.id for c in root.circle_rows] == ["claim", "approve", "review", "pay", "done"]
    assert root.circle_rows[0].state == "success" and root.circle_rows[0].result


def test_confirmation_accept_and_decline(make_state, web_store):
    body = {"name": "ok", "circles": [{"uri": "sure", "box": {"confirm": "Go ${user.username}?"}},
                                      {"uri": "end", "deps": [["sure"]]}]}
    web_store.put_template(body)
    state, inst = _open(make_state, web_store, template="ok")
    assert state.boxes[0].confirm_text == "Go alice?"
    run(state.decline({"__circle": "sure", "__bookmark": state.boxes[0].bookmark,
                       "reason": "not now"}))
    assert web_store.get(inst.id).circles["sure"].reason == "declined: not now"
    root = _technical(make_state, inst.id)
    root.select("sure")
    root.ask_reset("self")
    run(root.confirm_reset())
    state.load()
    run(state.accept("sure", state.boxes[0].bookmark))
    assert state.head.status == "completed"


def test_nested_flow_opens_and_closes(make_state, web_store, token):
    web_store.put_template({"name": "trip", "kind": "linear", "circles": [
        {"uri": "main", "box": {"action": {"type": "flow", "template": "reimbursement"}}}]})
    outer = web_store.start("trip", {}, web_store.user("alice"))
    state = make_state(FlowState, user="alice", path=f"/flow/{outer.id}")
    state.load()
    assert [f.id for f in state.frames] == ["main"]
    assert [b.cid for b in state.boxes] == ["main.claim"]
    state.toggle("main")
    assert state.frames == [] and "main" in {n.id for n in state.nodes}
    state.toggle("main")
    assert [f.id for f in state.frames] == ["main"]


def test_history_is_loaded_on_its_tab(make_state, web_store):
    state, _ = _open(make_state, web_store)
    assert state.history == []
    state.set_tab("history")
    kinds = [h.kind for h in state.history]
    assert kinds[-1] == "instance started" and "circle ready" in kinds


def test_circles_tab_lists_every_circle_once_opened(make_state, web_store):
    _, inst = _open(make_state, web_store)
    state = _technical(make_state, inst.id)
    assert state.circle_rows == []
    state.set_tab("circles")
    assert [c.id for c in state.circle_rows] == ["claim", "approve", "review", "pay", "done"]
    assert state.circle_rows[0].state == "ready"
    assert state.circle_rows[0].name == "Fill in the claim"


# ------------------------------------------------- people's work (SPEC §9, §10)
def _box(state, cid):
    return next(b for b in state.boxes if b.cid == cid)


def _page(make_state, user, iid):
    state = make_state(FlowState, user=user, path=f"/flow/{iid}")
    state.load()
    return state


def _approved(make_state, web_store, work):
    """Alice's claim, approved by bob: the review waits for someone in finance."""
    for name in ("fred", "gina"):
        web_store.add_user(name, f"{name}-password", ["finance"])
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    work()
    [mail] = Mailbox(web_store).inbox(web_store.user("bob"), "approval")
    Mailbox(web_store).decide(mail["id"], web_store.user("bob"), "approved")
    state.load()
    return state, inst


def test_each_open_circle_says_whom_it_waits_for_and_only_its_people_fill_it_in(
        make_state, web_store, work):
    alice, inst = _approved(make_state, web_store, work)
    review = _box(alice, "review")  # the starter: someone else's task, which she may take back
    assert (review.kind, review.waits, review.bookmark) == (
        "wait", "Waits for someone in finance", "")
    assert review.due and not review.overdue and review.withdraw and not review.claim

    fred = _page(make_state, "fred", inst.id)  # named by the task's role: may follow
    assert not fred.missing and not fred.can_act
    review = _box(fred, "review")
    # a candidate may accept it at once (that claims it) or claim it first
    assert (review.kind, review.claim, review.withdraw) == ("confirm", True, False)
    run(fred.claim("review"))
    review = _box(fred, "review")
    assert (review.kind, review.waits, review.unclaim) == ("confirm", "Held by you", True)
    assert review.bookmark
    assert web_store.get(inst.id).circles["review"].task["assignee"] == "fred"

    gina = _page(make_state, "gina", inst.id)  # the other finance user: fred holds it
    review = _box(gina, "review")
    assert (review.kind, review.waits, review.claim) == ("wait", "Held by fred", False)
    events = run(gina.claim("review"))  # a stale page: refused with a message
    assert "held by fred" in str(events[0])
    bookmark = web_store.engine.bookmark(web_store.get(inst.id), "review")
    run(gina.accept("review", bookmark))  # the bookmark alone does not let her in
    assert web_store.get(inst.id).circles["review"].state == "waiting"
    assert _box(_page(make_state, "alice", inst.id), "review").waits == "Held by fred"

    run(fred.unclaim("review"))
    assert _box(fred, "review").waits == "Waits for someone in finance"
    run(gina.load())
    run(gina.accept("review", _box(gina, "review").bookmark))  # a candidate: claims it
    assert web_store.get(inst.id).circles["review"].state == "success"
    assert web_store.get(inst.id).circles["review"].task["assignee"] == "gina"

    bob = _page(make_state, "bob", inst.id)  # the manager records the payment
    pay = _box(bob, "pay")
    assert (pay.kind, pay.waits, pay.unclaim, pay.claim) == ("form", "Waits for you", False,
                                                              False)
    alice.load()
    assert (_box(alice, "pay").kind, _box(alice, "pay").waits) == ("wait", "Held by bob")
    _submit(bob, "pay", {"reference": "TX-1"})
    alice.load()
    assert alice.head.status == "completed" and alice.boxes == []


def test_people_not_asked_do_not_see_the_flow(make_state, web_store, work):
    _, inst = _approved(make_state, web_store, work)
    assert _page(make_state, "carol", inst.id).missing


def test_an_overdue_task_is_marked(make_state, web_store, work, monkeypatch):
    _, inst = _approved(make_state, web_store, work)
    later = web_store.engine.clock() + timedelta(days=3)
    monkeypatch.setattr(web_store.engine, "clock", lambda: later)
    review = _box(_page(make_state, "fred", inst.id), "review")
    assert review.overdue and review.due


def test_the_starter_withdraws_a_pending_approval_after_a_confirmation(make_state, web_store,
                                                                       work):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    work()
    state.load()
    approve = _box(state, "approve")
    assert approve.withdraw and approve.waits == "Waits for bob"
    state.ask_control("withdraw", "approve")
    assert state.ask_open and state.ask_circle == "approve"
    assert web_store.get(inst.id).circles["approve"].pending  # nothing yet
    events = run(state.confirm_control({"reason": "wrong amount"}))
    assert "Took back “The manager approves”" in str(events[-1]) and not state.ask_open
    assert web_store.get(inst.id).circles["claim"].state == "waiting"
    assert [b.cid for b in state.boxes] == ["claim"]
    [mail] = Mailbox(web_store).inbox(web_store.user("bob"), "approval")
    assert mail["decision"] == "withdrawn"  # no longer pending for bob
    assert web_store.mail_counts(Caller.of(web_store.user("bob")))["approval"]["pending"] == 0


def test_withdrawing_what_is_no_longer_pending_says_why(make_state, web_store, work):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    state.ask_control("withdraw", "claim")
    events = run(state.confirm_control({}))
    assert "not a pending approval or task" in str(events[-1])
    assert not state.ask_open and web_store.get(inst.id).status == "running"


def test_abort_asks_for_a_reason_then_ends_the_flow(make_state, web_store):
    state, inst = _open(make_state, web_store)
    state.ask_control("abort")
    assert run(state.confirm_control({"reason": "  "})) == []
    assert state.ask_error == "Say why the flow is aborted" and state.ask_open
    assert web_store.get(inst.id).status == "running"
    events = run(state.confirm_control({"reason": "Bought by mistake"}))
    assert "Flow aborted" in str(events[-1])
    assert (state.head.status, state.head.reason) == ("terminated", "Bought by mistake")
    assert state.boxes == [] and not state.ask_open


def test_suspend_and_resume_after_a_confirmation(make_state, web_store):
    state, inst = _open(make_state, web_store)
    state.ask_control("suspend")
    state.cancel_control()
    assert web_store.get(inst.id).status == "running"
    state.ask_control("suspend")
    run(state.confirm_control({}))
    assert state.head.status == "suspended" and state.boxes == []
    state.ask_control("resume")
    run(state.confirm_control({}))
    assert state.head.status == "running" and [b.cid for b in state.boxes] == ["claim"]


def test_only_the_starter_or_an_admin_controls_the_flow(make_state, web_store, work):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    work()
    bob = _page(make_state, "bob", inst.id)
    bob.ask_control("abort")
    assert not bob.ask_open
    with pytest.raises(Forbidden):
        work_step(Caller.of(web_store.user("bob")), inst.id, "abort", reason="mine now")
    with pytest.raises(Forbidden):
        work_step(Caller.of(web_store.user("bob")), inst.id, "withdraw", "approve")
    root = _page(make_state, "root", inst.id)
    assert root.can_act and _box(root, "approve").withdraw
    root.ask_control("suspend")
    run(root.confirm_control({}))
    assert web_store.get(inst.id).status == "suspended"


def test_a_step_made_elsewhere_is_pushed_to_the_open_page(make_state, web_store,
                                                           monkeypatch):
    """No poll: the page's follow wakes on the store's change and re-reads the flow."""
    monkeypatch.setattr(flow_state, "ALIVE_S", 0.1)
    state, inst = _open(make_state, web_store)
    assert state.load() == FlowState.follow and state.head.status == "running"
    other = Store(str(web_store.db.url), secret=SECRET.encode())  # another process's view
    try:
        follow_while(state, lambda: other.suspend(inst.id, "alice"),
                     lambda: state.head.status == "suspended",
                     lambda: setattr(state, "iid", ""))  # the page shows another flow
    finally:
        other.close()
    assert state._seq == web_store.get(inst.id).seq and state._following == ""


@pytest.mark.parametrize("web_store", ["postgres"], indirect=True)
def test_a_step_of_another_process_is_pushed_to_the_open_page(make_state, web_store,
                                                               monkeypatch):
    """On PostgreSQL: the other process's NOTIFY reaches this one's LISTEN, which wakes
    the page's follow."""
    monkeypatch.setattr(flow_state, "ALIVE_S", 0.1)
    state, inst = _open(make_state, web_store)
    url = web_store.db.url.render_as_string(hide_password=False)
    script = ("import sys; from bpflow.store import Store; "
              "s = Store(sys.argv[1], secret=sys.argv[2].encode()); "
              "s.suspend(sys.argv[3], 'alice'); s.close()")

    def elsewhere():
        assert web_store.changes.listening.wait(WAIT_S)
        subprocess.run([sys.executable, "-c", script, url, SECRET, inst.id], check=True,
                       timeout=120)
    follow_while(state, elsewhere, lambda: state.head.status == "suspended",
                 lambda: setattr(state, "iid", ""))
    assert state._seq == web_store.get(inst.id).seq


def test_an_open_page_does_not_query_the_database_while_nothing_changes(
        make_state, web_store, monkeypatch):
    monkeypatch.setattr(flow_state, "ALIVE_S", 0.05)  # checks its route 20 times a second
    state, _ = _open(make_state, web_store)
    queries: list[str] = []
    event.listen(web_store.db, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: queries.append(statement))

    async def main() -> tuple[int, int]:
        task = asyncio.create_task(FlowState.follow.fn(state))
        await asyncio.sleep(0.3)  # subscribed, caught up
        settled = len(queries)
        await asyncio.sleep(1.0)
        idle = len(queries) - settled
        state.iid = ""  # the page left
        await asyncio.wait_for(task, WAIT_S)
        return settled, idle
    settled, idle = run_async(main())
    assert settled >= 1 and idle == 0


# ------------------------------------------- the reader's words (SPEC §17)
def test_steps_are_named_by_their_descriptions(make_state, web_store):
    state, _ = _open(make_state, web_store)
    [claim] = state.boxes
    assert (claim.cid, claim.title) == ("claim", "Fill in the claim")
    assert claim.submit_label == "Submit" and claim.waits == "Waits for you"
    state.select("claim")
    assert state.chosen.name == "Fill in the claim"
    assert "UTC" not in state.head.created and state.head.created.startswith("20")


def test_the_history_is_told_in_sentences_in_the_readers_language(make_state, web_store,
                                                                  work):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    work()
    [mail] = Mailbox(web_store).inbox(web_store.user("bob"), "approval")
    Mailbox(web_store).decide(mail["id"], web_store.user("bob"), "approved", "looks fine")
    state.load()
    state.set_tab("history")
    said = [h.text for h in state.history if h.plain]
    assert said[-1] == "alice started the flow"
    assert "alice sent “Fill in the claim”" in said
    assert "Approval of “The manager approves” asked of bob" in said
    assert "bob approved “The manager approves” — “looks fine”" in said
    assert said[0] == "“Finance checks the claim” waits for someone in finance"
    assert not any("attempt" in s or "circle" in s for s in said)
    assert all(h.at.startswith("20") and "UTC" not in h.at for h in state.history)
    technical = [h for h in state.history if not h.plain]  # engine bookkeeping
    assert {h.kind for h in technical} == {"circle ready"}

    state.choice = "zh-CN"  # the language menu
    state.relabel()
    said = [h.text for h in state.history if h.plain]
    assert said[-1] == "alice 发起了流程"
    assert "bob 同意了“经理审批”——“looks fine”" in said
    assert state.words_of == "zh-CN"


def test_a_withdrawal_is_told_as_sent_back(make_state, web_store, work):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    work()
    state.load()
    state.ask_control("withdraw", "approve")
    assert state.ask_step == "The manager approves"
    run(state.confirm_control({"reason": "wrong amount"}))
    state.set_tab("history")
    said = [h.text for h in state.history if h.plain]
    assert "alice took back “The manager approves” — “wrong amount”" in said
    assert "The step “The manager approves” was sent back" in said


def test_the_boxes_and_toasts_speak_chinese(make_state, web_store):
    state, inst = _open(make_state, web_store)
    state.choice = "zh-CN"
    state.relabel()
    [claim] = state.boxes
    assert (claim.waits, claim.submit_label) == ("等待你处理", "提交")
    events = _submit(state, "claim", {**CLAIM, "amount": "twelve"})
    assert "请修改标出的字段" in str(events[-1])
    errors = {f.name: f.error for f in state.boxes[0].fields}
    assert errors["amount"] == "Amount必须是数字"
    events = _submit(state, "claim", CLAIM)
    assert "已提交：填写报销单" in str(events[-1])


def test_a_field_error_goes_as_soon_as_the_field_is_fixed(make_state, web_store):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", {**CLAIM, "amount": "twelve", "reason": ""})
    errors = {f.name: f.error for f in state.boxes[0].fields}
    assert errors["amount"] == "Amount must be a number"
    assert errors["reason"] == "What was it for? is required"
    state.check_field("claim", "amount", "still not")  # still wrong: still said
    assert {f.name: f.error for f in state.boxes[0].fields}["amount"] == \
        "Amount must be a number"
    state.check_field("claim", "amount", "12.5")  # fixed: gone before the next submit
    errors = {f.name: f.error for f in state.boxes[0].fields}
    assert errors["amount"] == "" and errors["reason"] == "What was it for? is required"
    # its line stays, empty, until the next sending: nothing below it moves as it goes
    assert {f.name: f.fixed for f in state.boxes[0].fields} == {
        "amount": True, "reason": False, "manager": False}
    state.check_field("claim", "reason", "Taxi")
    assert all(f.error == "" for f in state.boxes[0].fields)
    state.check_field("claim", "amount", "twelve")  # broken again: said again
    assert {f.name: f.error for f in state.boxes[0].fields}["amount"] == \
        "Amount must be a number"
    _submit(state, "claim", {**CLAIM, "amount": "twelve"})  # sent anew: the errors it has
    assert [(f.name, f.fixed) for f in state.boxes[0].fields if f.fixed] == []
    assert web_store.get(inst.id).circles["claim"].state == "waiting"  # nothing sent


def test_controls_show_for_whom_they_make_sense(make_state, web_store, work):
    """The starter controls her flow (bpflow.access: ACT) and may take back the step
    waiting for others; an approver only follows it; the technical view is an admin's."""
    alice, inst = _open(make_state, web_store)
    assert alice.can_act and set(alice.head.controls) >= {"suspend", "abort"}
    [claim] = alice.boxes
    assert not (claim.claim or claim.unclaim or claim.withdraw)  # her own form: fill it in
    _submit(alice, "claim", CLAIM)
    work()
    alice.load()
    assert _box(alice, "approve").withdraw
    alice.set_intervention(True)
    assert not alice.intervention  # not an admin
    bob = _page(make_state, "bob", inst.id)
    assert not bob.can_act and not _box(bob, "approve").withdraw
    bob.ask_control("suspend")
    assert not bob.ask_open
    root = _page(make_state, "root", inst.id)
    assert root.can_act
    root.set_intervention(True)
    assert root.intervention
