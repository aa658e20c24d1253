"""Returning to a chosen step from the pages (SPEC §15): "Return to…" offered on the
approval card to its pending approver only, the steps listed by their descriptions (in
the reader's language), a comment needed, the return made; then the requester's flow
page shows the form filled in with her answers, why it came back, and the history says
so in a sentence."""

from __future__ import annotations

from bpflow_app.pages.flow_state import FlowState
from bpflow_app.pages.return_state import ReturnState
from tests.app.helpers import run

CLAIM = {"amount": "12.5", "reason": "Taxi", "manager": "bob"}


def _waiting_for_bob(make_state, web_store, work) -> str:
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    alice = make_state(FlowState, user="alice", path=f"/flow/{inst.id}")
    alice.load()
    box = alice.boxes[0]
    run(alice.submit({"__circle": "claim", "__bookmark": box.bookmark, **CLAIM}))
    work()
    return inst.id


def test_the_approver_returns_to_the_start_and_the_requester_finds_it_filled_in(
        make_state, web_store, work):
    iid = _waiting_for_bob(make_state, web_store, work)
    bob = make_state(FlowState, user="bob", path=f"/flow/{iid}")
    bob.load()
    [approve] = bob.boxes
    assert approve.return_mail > 0  # his open mail: "Return to…" is offered
    alice = make_state(FlowState, user="alice", path=f"/flow/{iid}")
    alice.load()
    assert alice.boxes[0].return_mail == 0  # the starter takes it back instead

    dialog = make_state(ReturnState, user="bob", path=f"/flow/{iid}")
    run(dialog.ask_return(iid, "approve", approve.return_mail, approve.title))
    assert [(t.step, t.label) for t in dialog.targets] == [
        ("claim", "Fill in the claim"), ("@start", "The beginning (Fill in the claim)")]
    assert dialog.target == "claim" and dialog.returning == f"{iid} approve"
    dialog.set_target("@start")
    run(dialog.confirm_return({"comment": "  "}))
    assert "needs a comment" in dialog.return_error and dialog.returning
    assert web_store.get(iid).circles["approve"].state == "waiting"
    run(dialog.confirm_return({"comment": "please attach the receipt"}))
    assert dialog.returning == "" and dialog.return_error == ""

    alice.load()
    [claim] = alice.boxes
    assert claim.cid == "claim" and claim.kind == "form"
    assert claim.returned_note == \
        "bob sent this back from “The manager approves”: “please attach the receipt”"
    values = {f.name: f.default for f in claim.fields}
    assert values["amount"] == "12.5" and values["reason"] == "Taxi"
    assert values["manager"] == "bob"
    alice.set_tab("history")
    assert "bob returned “The manager approves” to the beginning — “please attach the" \
        " receipt”" in [h.text for h in alice.history]


def test_the_dialog_speaks_chinese_and_refuses_someone_else(make_state, web_store, work):
    iid = _waiting_for_bob(make_state, web_store, work)
    bob = make_state(ReturnState, user="bob", path=f"/flow/{iid}")
    bob.choice = "zh-CN"
    mail = next(b for b in _boxes(make_state, "bob", iid)).return_mail
    run(bob.ask_return(iid, "approve", mail, "经理审批"))
    assert [t.label for t in bob.targets] == ["填写报销单", "开始（填写报销单）"]
    carol = make_state(ReturnState, user="carol", path=f"/flow/{iid}")
    run(carol.ask_return(iid, "approve", 0, "x"))
    assert carol.returning == "" and carol.targets == []


def _boxes(make_state, user, iid):
    state = make_state(FlowState, user=user, path=f"/flow/{iid}")
    state.load()
    return state.boxes
