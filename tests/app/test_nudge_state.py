"""The flow page's copies and urges (SPEC §15): the Urge button for the starter, disabled
with the time left once used; the CC dialog with its errors; who was copied and who has
read it (opening the flow reads one's copies); the history's sentences in both languages;
the inbox's "Copied to me" and "Reminders" tabs with their unread counts."""

from __future__ import annotations

from bpflow.access import Caller
from bpflow.moves import nudging
from bpflow_app.boxview import Words
from bpflow_app.flowview import nudge_sentence
from bpflow_app.pages.flow_state import FlowState
from bpflow_app.pages.mail_state import MailState
from tests.app.helpers import run

CLAIM = {"amount": "12.5", "reason": "Taxi", "manager": "bob"}


def _open(make_state, web_store, user, iid):
    state = make_state(FlowState, user=user, path=f"/flow/{iid}")
    state.load()
    return state


def _waiting_for_bob(make_state, web_store, work):
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    alice = _open(make_state, web_store, "alice", inst.id)
    box = next(b for b in alice.boxes if b.cid == "claim")
    run(alice.submit({"__circle": "claim", "__bookmark": box.bookmark, **CLAIM}))
    work()  # bob's approval mail
    alice.load()
    return alice, inst


def test_the_starter_urges_then_the_button_waits_an_hour(make_state, web_store, work):
    alice, inst = _waiting_for_bob(make_state, web_store, work)
    assert alice.can_urge and alice.urge_at == "" and alice.can_copy
    events = run(alice.urge())
    assert any("Urged bob" in str(e) for e in events)
    assert alice.can_urge and alice.urge_at != ""  # disabled, with the time left
    events = run(alice.urge())  # a second click (a stale page): the limit's message
    assert any("less than an hour" in str(e) for e in events)
    bob = make_state(MailState, user="bob", path="/inbox")
    run(bob.load())
    assert bob.unread["urge"] == 1
    run(bob.show("urge"))
    assert [m.kind for m in bob.mails] == ["urge"] and bob.mails[0].instance == inst.id
    bob_flow = _open(make_state, web_store, "bob", inst.id)
    assert not bob_flow.can_urge and not bob_flow.can_copy  # an approver only follows


def test_a_copy_is_read_when_its_reader_opens_the_flow(make_state, web_store, work):
    alice, inst = _waiting_for_bob(make_state, web_store, work)
    alice.ask_copy()
    assert alice.copy_open
    alice.send_copy({"users": "carol, nobody", "comment": ""})
    assert "no user named nobody" in alice.copy_error and alice.copy_open
    alice.send_copy({"users": "carol", "comment": "FYI"})
    assert not alice.copy_open
    assert [(c.user, c.read) for c in alice.copies] == [("carol", "")]
    carol_mail = make_state(MailState, user="carol", path="/inbox")
    run(carol_mail.load())
    assert carol_mail.unread["cc"] == 1
    carol = _open(make_state, web_store, "carol", inst.id)
    assert not carol.missing and not carol.can_act and not carol.can_copy
    alice.load()
    assert alice.copies[0].read != ""  # alice sees that carol has read it
    run(carol_mail.load())
    assert carol_mail.unread["cc"] == 0
    alice.set_tab("history")
    texts = [h.text for h in alice.history]
    assert "alice copied carol — “FYI”" in texts


def test_nothing_to_urge_no_button(make_state, web_store):
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    alice = _open(make_state, web_store, "alice", inst.id)
    assert not alice.can_urge  # her own form waits for her
    carol = _open(make_state, web_store, "carol", inst.id)
    assert carol.missing


def test_history_sentences_in_both_languages(web_store):
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    en, zh = Words("en"), Words("zh-CN")
    data = {"users": ["bob", "carol"], "comment": "soon"}
    assert nudge_sentence("urge_sent", data, "alice", "Approve", en) == \
        "alice urged bob and carol to act on “Approve” — “soon”"
    assert nudge_sentence("urge_sent", {"users": ["bob"]}, "", "Approve", en) == \
        "bob got a reminder of “Approve”"
    assert nudge_sentence("cc_sent", {"users": ["bob"]}, "", "Approve", en) == \
        "“Approve” was copied to bob"
    said = nudge_sentence("urge_sent", data, "alice", "审批", zh)
    assert "催办" in said and "bob" in said
    assert nudging.copies(web_store, inst.id) == []
    assert Caller  # the reader's rules are access's (tests/services/test_nudging.py)
