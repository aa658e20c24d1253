"""The flow page's state: who may see an instance, boxes with per-field errors, form
data flowing up to the circle, the reset preview and confirmation, nested flows."""

from __future__ import annotations

from bpflow_app.pages.flow_state import FlowState, route_id
from tests.app.helpers import run

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
    assert not bob.missing and not bob.can_act and bob.boxes == []
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


def test_reset_shows_a_preview_then_resets_on_confirmation(make_state, web_store):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    state.select("claim")
    assert state.chosen.resettable and state.chosen.result
    state.ask_reset("self")
    assert state.preview == ["claim", "approve"] and state.preview_open
    assert any(e.kind == "weak" for e in state.edges)  # what a reset may reach
    assert web_store.get(inst.id).circles["claim"].state == "success"  # nothing changed yet
    run(state.confirm_reset())
    assert not state.preview_open
    assert web_store.get(inst.id).circles["claim"].state == "waiting"
    assert [b.cid for b in state.boxes] == ["claim"]


def test_cancelling_a_reset_changes_nothing(make_state, web_store):
    state, inst = _open(make_state, web_store)
    _submit(state, "claim", CLAIM)
    state.select("claim")
    state.ask_reset("all")
    state.cancel_reset()
    assert state.preview == [] and web_store.get(inst.id).circles["claim"].state == "success"


def test_intervention_mode_draws_weak_edges(make_state, web_store):
    state, _ = _open(make_state, web_store)
    assert not [e for e in state.edges if e.kind == "weak"]
    state.set_intervention(True)
    assert [e for e in state.edges if e.kind == "weak"]


def test_confirmation_accept_and_decline(make_state, web_store):
    body = {"name": "ok", "circles": [{"uri": "sure", "box": {"confirm": "Go ${user.username}?"}},
                                      {"uri": "end", "deps": [["sure"]]}]}
    web_store.put_template(body)
    state, inst = _open(make_state, web_store, template="ok")
    assert state.boxes[0].confirm_text == "Go alice?"
    run(state.decline({"__circle": "sure", "__bookmark": state.boxes[0].bookmark,
                       "reason": "not now"}))
    assert web_store.get(inst.id).circles["sure"].reason == "declined: not now"
    state.select("sure")
    state.ask_reset("self")
    run(state.confirm_reset())
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
    state, _ = _open(make_state, web_store)
    assert state.circle_rows == []
    state.set_tab("circles")
    assert [c.id for c in state.circle_rows] == ["claim", "approve", "review", "pay", "done"]
    assert state.circle_rows[0].state == "ready"
