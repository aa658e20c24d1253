"""The inbox's state: approvals with their signed payload, approve with a comment, a
tampered mail flagged and refused, unread counts, guest messages for admins only."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.store.tables import mail_t
from bpflow_app.pages.inbox_state import InboxState
from tests.app.helpers import run


@pytest.fixture
def claim(web_store, work):
    """Alice's claim waiting for bob's approval."""
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    Interactions(web_store).submit(inst.id, "claim", web_store.engine.bookmark(inst, "claim"),
                            {"amount": 30, "reason": "Hotel", "manager": "bob"}, "alice")
    work()
    return inst.id


def test_approval_shows_its_signed_payload_and_counts_unread(make_state, claim):
    inbox = make_state(InboxState, user="bob")
    inbox.load()
    assert inbox.unread["approval"] == 1 and inbox.total == 1
    mail = inbox.mails[0]
    assert mail.open and mail.signature_ok and mail.payload == ""  # shown once opened
    inbox.toggle(mail.id)
    assert inbox.opened == mail.id and inbox.unread["approval"] == 0
    assert '"approver": "bob"' in inbox.mails[0].payload


def test_approving_with_a_comment_moves_the_flow_on(make_state, web_store, claim):
    inbox = make_state(InboxState, user="bob")
    inbox.load()
    inbox.set_comment("ok by me")
    run(inbox.decide(inbox.mails[0].id, "approved"))
    mail = inbox.mails[0]
    assert mail.decision == "approved" and mail.comment == "ok by me" and not mail.open
    inst = web_store.get(claim)
    assert inst.circles["approve"].state == "success"
    assert inst.circles["approve"].result["decisions"][0]["comment"] == "ok by me"


def test_a_tampered_mail_is_flagged_and_cannot_be_approved(make_state, web_store, claim):
    with web_store.db.begin() as conn:
        conn.execute(update(mail_t).where(mail_t.c.instance_id == claim)
                     .values(subject="Expense claim of 3000 by alice"))
    inbox = make_state(InboxState, user="bob")
    inbox.load()
    mail = inbox.mails[0]
    assert not mail.signature_ok and not mail.open
    assert mail.problem == "the mail was altered after it was signed"
    assert mail.notice == "The mail was altered after it was signed. It cannot be approved."
    run(inbox.decide(mail.id, "approved"))
    assert inbox.mails[0].decision == ""
    assert web_store.get(claim).circles["approve"].state == "waiting"


def test_a_forged_signature_is_said_once(make_state, web_store, claim):
    """The page used to prefix the mailbox's reason with its own words for it: "does not
    match its signature: the mail does not match its signature"."""
    with web_store.db.begin() as conn:
        conn.execute(update(mail_t).where(mail_t.c.instance_id == claim)
                     .values(signature="0" * 64))
    inbox = make_state(InboxState, user="bob")
    inbox.load()
    notice = inbox.mails[0].notice
    assert notice == "The mail does not match its signature. It cannot be approved."
    assert notice.lower().count("signature") == 1


def test_someone_else_cannot_decide(make_state, web_store, claim):
    mail_id = Mailbox(web_store).inbox(web_store.user("bob"))[0]["id"]
    inbox = make_state(InboxState, user="carol")
    run(inbox.decide(mail_id, "approved"))
    assert web_store.get(claim).circles["approve"].state == "waiting"


def test_guest_messages_reach_admins_only(make_state, web_store):
    Mailbox(web_store).guest_message("Eve", "Hi <b>", "<script>x</script>", "1.1.1.1")
    admin = make_state(InboxState, user="root")
    run(admin.show("guest"))
    assert [m.body for m in admin.mails] == ["<script>x</script>"]
    assert admin.unread["guest"] == 1
    user = make_state(InboxState, user="alice")
    run(user.show("guest"))
    assert user.mails == []


def test_pages_of_twenty_five_newest_first(make_state, web_store):
    mailbox = Mailbox(web_store)
    for i in range(60):
        mailbox.guest_message("Eve", f"Note {i}", "x", f"client-{i}")
    admin = make_state(InboxState, user="root")
    run(admin.show("guest"))
    assert len(admin.mails) == 25 and admin.pages == 3 and admin.mails[0].subject == "Note 59"
    admin.turn(5)
    assert admin.page == 2 and len(admin.mails) == 10 and admin.mails[-1].subject == "Note 0"
