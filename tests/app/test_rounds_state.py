"""The approval card's round (SPEC §15) in the pages' states: the shipped purchase request
(manager then director in turn, then a committee vote) as the flow page's box and the
inbox's mail show it, in both languages; add signers from the inbox (with its
confirmation) and remove signers from the flow page; the history's sentences."""

from __future__ import annotations

from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow_app.boxview import Words, box_views
from bpflow_app.flowview import history_rows
from bpflow_app.pages.mail_state import MailState
from bpflow_app.pages.signers_state import SignersState
from tests.app.helpers import run


def _purchase(store, work):
    """alice asks to buy a laptop: bob then root approve in turn, then dee, eve, root
    vote."""
    for name in ("dee", "eve", "fay"):
        store.add_user(name, f"{name}-password", ["approver"])
    inst = store.start("purchase", {}, store.user("alice"))
    Interactions(store).submit(inst.id, "request", store.engine.bookmark(inst, "request"), {
        "item": "Laptop", "amount": 1200, "reason": "The old one broke", "manager": "bob",
        "director": "root", "member_1": "dee", "member_2": "eve", "member_3": "root"},
        "alice")
    work()
    return inst.id


def _box(store, iid, user=None, lang="en"):
    from bpflow.access import Caller
    inst = store.get(iid)
    caller = Caller.of(store.user(user)) if user else None
    boxes = box_views(Interactions(store), inst, store.engine.statuses(inst), caller=caller,
                      words=Words(lang))
    return next(b for b in boxes if b.tone == "approval")


def _decide(store, user, decision="approved", comment=""):
    mail = next(m for m in Mailbox(store).inbox(store.user(user), kind="approval")
                if m["decision"] is None)
    Mailbox(store).decide(mail["id"], store.user(user), decision, comment)


def test_the_card_shows_where_a_sequence_stands(web_store, work):
    iid = _purchase(web_store, work)
    box = _box(web_store, iid, "alice")
    assert box.approvers == ["bob", "root"]
    assert box.quorum == "each in turn, in this order"
    assert box.round_lines == ["Now: bob", "Then: root", "Approvals still needed: 2 of 2"]
    assert box.waits == "Waits for bob"
    assert (box.sign_mail, box.removable) == (0, ["bob", "root"])  # alice started it
    assert _box(web_store, iid, "bob").sign_mail > 0  # bob is asked now
    assert _box(web_store, iid, "root").sign_mail == 0  # root comes later
    _decide(web_store, "bob", comment="fine")
    box = _box(web_store, iid, "alice", "zh-CN")
    assert box.quorum == "依次审批，按此顺序"
    assert box.round_lines[0] == "bob 已同意 — “fine”"
    assert box.round_lines[1:] == ["当前：root", "仍需同意：1 / 2"]


def test_the_card_shows_the_committee_vote(web_store, work):
    iid = _purchase(web_store, work)
    _decide(web_store, "bob")
    _decide(web_store, "root")
    work()  # the committee's mail
    box = _box(web_store, iid, "alice")
    assert box.title == "The committee votes"
    assert box.quorum == "a vote: 60% of 3 must approve"
    _decide(web_store, "dee", "rejected", "too dear")
    box = _box(web_store, iid, "alice")
    assert box.round_lines == ["dee rejected — “too dear”", "Now: eve, root",
                               "Approvals still needed: 2 of 2"]
    _decide(web_store, "eve")
    _decide(web_store, "root")
    assert web_store.get(iid).status == "completed"


def test_add_signers_from_the_inbox_asks_for_a_confirmation(make_state, web_store, work):
    iid = _purchase(web_store, work)
    inbox = make_state(MailState, user="bob", path="/inbox")
    run(inbox.load())
    mail = inbox.mails[0]
    run(inbox.toggle(mail.id))
    opened = inbox.mails[0]
    assert opened.sign and opened.asked == ["bob", "root"]
    assert opened.round_lines == ["Now: bob", "Then: root", "Approvals still needed: 2 of 2"]
    dialog = make_state(SignersState, user="bob", path="/inbox")
    run(dialog.open_add(mail.id, opened.subject, opened.asked))
    assert dialog.mode == "add" and "fay" in dialog.people
    assert not {"bob", "root", "alice", "carol"} & set(dialog.people)  # asked, or no approver
    assert dialog.submit() is None and dialog.error == "Choose at least one person"
    dialog.pick("fay")
    dialog.set_where("before")
    dialog.set_comment("fay knows the supplier")
    assert dialog.submit() is None and dialog.confirming  # a second look first
    assert Mailbox(web_store).inbox(web_store.user("fay"), kind="approval") == []
    events = run(dialog.submit())
    assert dialog.mode == "" and len(events) == 2  # a toast, and the inbox read again
    run(inbox.turn(0))
    assert inbox.mails[0].round_lines[:2] == ["Now: fay", "Then: bob, root"]
    assert not inbox.mails[0].sign  # bob now waits for fay
    assert not inbox.mails[0].open and inbox.mails[0].outcome == "Others decide first: fay"
    rows = history_rows(web_store.history(iid), web_store.get(iid), Words("en"))
    assert any(r.text == "bob asked fay to decide on “Manager, then director approve” before"
               " them — “fay knows the supplier”" for r in rows)
    zh = history_rows(web_store.history(iid), web_store.get(iid), Words("zh-CN"))
    assert any("fay" in r.text and "fay knows the supplier" in r.text and "bob" in r.text
               and "asked" not in r.text for r in zh)


def test_add_signers_refused_says_why(make_state, web_store, work):
    _purchase(web_store, work)
    mail = Mailbox(web_store).inbox(web_store.user("bob"), kind="approval")[0]
    dialog = make_state(SignersState, user="bob", path="/inbox")
    run(dialog.open_add(mail["id"], "x", ["bob", "root"]))
    dialog.pick("alice")  # the starter, offered by a stale page
    dialog.submit()
    run(dialog.submit())
    assert dialog.error == "alice cannot approve their own request" and dialog.mode == "add"


def test_remove_signers_from_the_flow_page(make_state, web_store, work):
    iid = _purchase(web_store, work)
    box = _box(web_store, iid, "root")  # an admin
    dialog = make_state(SignersState, user="root", path=f"/flows/{iid}")
    run(dialog.open_remove(box.round_mail, box.title, box.removable))
    assert dialog.people == ["bob", "root"]
    dialog.pick("bob")
    dialog.set_comment("on leave")
    dialog.submit()
    run(dialog.submit())
    assert dialog.mode == "" and dialog.error == ""
    box = _box(web_store, iid, "alice")
    assert box.approvers == ["root"]
    assert box.round_lines == ["bob was removed — “on leave”", "Now: root",
                               "Approvals still needed: 1 of 1"]
    rows = history_rows(web_store.history(iid), web_store.get(iid), Words("en"))
    assert any(r.text == "root no longer asks bob about “Manager, then director approve” —"
               " “on leave”" for r in rows)
    bob = make_state(SignersState, user="bob", path=f"/flows/{iid}")
    run(bob.open_remove(box.round_mail, box.title, ["root"]))
    bob.pick("root")
    bob.submit()
    run(bob.submit())
    assert "starter or an admin" in bob.error
