"""The inbox's state: approvals with their signed payload, approve with a comment, send
back (a comment needed), withdrawn requests no longer offered, a tampered mail flagged and
refused, unread counts, guest messages for admins only; the Tasks tab's lists, claim,
unclaim and delegate, overdue tasks marked; the tab the inbox opens on; its words in the
reader's language."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import update

from bpflow import moves
from bpflow.access import Caller
from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.store.tables import mail_t
from bpflow_app.boxview import Words, box_views
from bpflow_app.inboxview import outcome, tamper_notice
from bpflow_app.pages import tasks_state
from bpflow_app.pages.mail_state import MailState
from bpflow_app.pages.tasks_state import TasksState
from tests.app.conftest import SECRET
from tests.app.helpers import follow_while, run


@pytest.fixture
def claim(web_store, work):
    """Alice's claim waiting for bob's approval."""
    inst = web_store.start("reimbursement", {}, web_store.user("alice"))
    Interactions(web_store).submit(inst.id, "claim", web_store.engine.bookmark(inst, "claim"),
                            {"amount": 30, "reason": "Hotel", "manager": "bob"}, "alice")
    work()
    return inst.id


def test_approval_shows_its_signed_payload_and_counts_unread(make_state, claim):
    inbox = make_state(MailState, user="bob")
    run(inbox.load())
    assert inbox.unread["approval"] == 1 and inbox.total == 1
    mail = inbox.mails[0]
    assert mail.open and mail.signature_ok and mail.payload == ""  # shown once opened
    inbox.toggle(mail.id)
    assert inbox.opened == mail.id and inbox.unread["approval"] == 0
    assert '"approver": "bob"' in inbox.mails[0].payload


def test_approving_with_a_comment_moves_the_flow_on(make_state, web_store, claim):
    inbox = make_state(MailState, user="bob")
    run(inbox.load())
    inbox.set_comment("ok by me")
    events = run(inbox.decide(inbox.mails[0].id, "approved"))
    assert TasksState.count in events  # the Tasks tab's badge anew
    mail = inbox.mails[0]
    assert mail.decision == "approved" and mail.comment == "ok by me" and not mail.open
    inst = web_store.get(claim)
    assert inst.circles["approve"].state == "success"
    assert inst.circles["approve"].result["decisions"][0]["comment"] == "ok by me"


def test_a_tampered_mail_is_flagged_and_cannot_be_approved(make_state, web_store, claim):
    with web_store.db.begin() as conn:
        conn.execute(update(mail_t).where(mail_t.c.instance_id == claim)
                     .values(subject="Expense claim of 3000 by alice"))
    inbox = make_state(MailState, user="bob")
    run(inbox.load())
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
    inbox = make_state(MailState, user="bob")
    run(inbox.load())
    notice = inbox.mails[0].notice
    assert notice == "The mail does not match its signature. It cannot be approved."
    assert notice.lower().count("signature") == 1


def test_someone_else_cannot_decide(make_state, web_store, claim):
    mail_id = Mailbox(web_store).inbox(web_store.user("bob"))[0]["id"]
    inbox = make_state(MailState, user="carol")
    run(inbox.decide(mail_id, "approved"))
    assert web_store.get(claim).circles["approve"].state == "waiting"


def test_guest_messages_reach_admins_only(make_state, web_store):
    Mailbox(web_store).guest_message("Eve", "Hi <b>", "<script>x</script>", "1.1.1.1")
    admin = make_state(MailState, user="root")
    run(admin.show("guest"))
    assert [m.body for m in admin.mails] == ["<script>x</script>"]
    assert admin.unread["guest"] == 1
    user = make_state(MailState, user="alice")
    run(user.show("guest"))
    assert user.mails == []


def test_pages_of_twenty_five_newest_first(make_state, web_store):
    mailbox = Mailbox(web_store)
    for i in range(60):
        mailbox.guest_message("Eve", f"Note {i}", "x", f"client-{i}")
    admin = make_state(MailState, user="root")
    run(admin.show("guest"))
    assert len(admin.mails) == 25 and admin.pages == 3 and admin.mails[0].subject == "Note 59"
    admin.turn(5)
    assert admin.page == 2 and len(admin.mails) == 10 and admin.mails[-1].subject == "Note 0"


# ------------------------------------------------------------- sending back, withdrawn
def test_sending_back_needs_a_comment_and_resets_the_claim(make_state, web_store, claim):
    inbox = make_state(MailState, user="bob")
    run(inbox.load())
    mail_id = inbox.mails[0].id
    run(inbox.decide(mail_id, "returned"))
    assert "needs a comment" in inbox.comment_error
    assert inbox.mails[0].open and web_store.get(claim).circles["approve"].state == "waiting"
    inbox.set_comment("Add the hotel's receipt number")
    assert inbox.comment_error == ""
    run(inbox.decide(mail_id, "returned"))
    mail = inbox.mails[0]
    assert (mail.decision, mail.label, mail.open) == ("returned", "sent back", False)
    assert mail.outcome == "Sent back to be amended — Add the hotel's receipt number"
    inst = web_store.get(claim)
    assert inst.circles["claim"].state == "waiting"  # alice amends it
    assert [e for e in web_store.history(claim) if e["kind"] == "circle_returned"]


def test_a_withdrawn_request_is_no_longer_offered(make_state, web_store, claim):
    moves.withdraw(web_store, Caller.of(web_store.user("alice")), claim, "approve")
    inbox = make_state(MailState, user="bob")
    run(inbox.load())
    mail = inbox.mails[0]
    assert (mail.decision, mail.label, mail.open) == ("withdrawn", "withdrawn", False)
    assert mail.outcome == "Withdrawn by the requester"
    assert web_store.mail_counts(Caller.of(web_store.user("bob")))["approval"]["pending"] == 0
    run(inbox.decide(mail.id, "approved"))
    assert inbox.mails[0].decision == "withdrawn"


# ------------------------------------------------- transfer and delegate an approval
def test_transfer_from_the_mail_card_the_new_approver_decides(make_state, web_store, claim):
    bob = make_state(MailState, user="bob")
    run(bob.load())
    mail = bob.mails[0]
    bob.ask_hand(mail.id, "transfer")
    assert bob.hand_mail == mail.id and bob.people == ["root"]  # approvers; not alice
    run(bob.hand())  # nobody chosen: nothing happens
    assert web_store.mail(mail.id).decision is None
    bob.set_hand_to("root")
    bob.set_hand_comment("root signs travel")
    events = run(bob.hand())
    assert "Transferred to root" in str(events) and bob.hand_mail == 0
    mine = bob.mails[0]
    assert mine.decision == "transferred" and not mine.open
    assert mine.outcome == "Transferred to someone else — root signs travel"
    root = make_state(MailState, user="root")
    run(root.load())
    theirs = root.mails[0]
    assert theirs.open and theirs.handed == \
        "bob transferred this approval to you — “root signs travel”"
    events = run(bob.decide(mail.id, "approved"))  # the old mail: refused, recorded
    assert "transferred" in str(events)
    run(root.decide(theirs.id, "approved"))
    assert web_store.get(claim).circles["approve"].state == "success"


def test_the_flow_pages_approval_box_offers_its_approver_transfer_and_delegate(
        make_state, web_store, claim):
    """The approval box carries the viewer's own pending mail (what its Transfer… and
    Delegate… open, the inbox's dialog); nobody else's, and none once handed on."""
    def box(name):
        inst = web_store.get(claim)
        return next(b for b in box_views(Interactions(web_store), inst,
                                         web_store.engine.statuses(inst),
                                         caller=Caller.of(web_store.user(name)),
                                         words=Words("en")) if b.cid == "approve")
    mail = Mailbox(web_store).inbox(web_store.user("bob"), kind="approval")[0]["id"]
    assert box("bob").mail == mail
    assert box("alice").mail == 0 and box("root").mail == 0
    bob = make_state(MailState, user="bob")
    bob.ask_hand(box("bob").mail, "transfer")
    bob.set_hand_to("root")
    run(bob.hand())
    assert box("bob").mail == 0 and box("root").mail not in (0, mail)
    assert "root" in box("alice").waits  # the page names who is asked now


def test_delegate_from_the_mail_card_the_owner_confirms(make_state, web_store, claim):
    bob = make_state(MailState, user="bob")
    run(bob.load())
    mail = bob.mails[0]
    bob.ask_hand(mail.id, "delegate")
    assert "carol" in bob.people and "bob" not in bob.people
    bob.set_hand_to("carol")
    run(bob.hand())
    assert bob.mails[0].open and bob.mails[0].handed == \
        "You asked carol to answer; waiting for their answer"
    carol = make_state(MailState, user="carol")
    run(carol.load())
    answer = carol.mails[0]
    assert answer.delegated and answer.open and "bob asked you to answer" in answer.handed
    carol.set_comment("receipts fine")
    run(carol.decide(answer.id, "approved"))
    assert web_store.get(claim).circles["approve"].state == "waiting"
    run(bob.load())
    mine = bob.mails[0]
    assert mine.answer == "approved"
    assert mine.handed == "carol answered: approved — “receipts fine”"
    run(bob.decide(mine.id, mine.answer))  # the card's Confirm
    assert web_store.get(claim).circles["approve"].state == "success"
    confirmed = [e for e in web_store.history(claim) if e["kind"] == "approval_confirmed"]
    assert confirmed[0]["data"]["confirmed"] is True


# ------------------------------------------------------------------------ tasks
@pytest.fixture
def review(web_store, claim, work):
    """The claim approved: finance's review waits for fred or gina."""
    for name in ("fred", "gina"):
        web_store.add_user(name, f"{name}-password", ["user", "finance"])
    mail_id = Mailbox(web_store).inbox(web_store.user("bob"))[0]["id"]
    Mailbox(web_store).decide(mail_id, web_store.user("bob"), "approved")
    work()
    assert web_store.get(claim).circles["review"].task["roles"] == ["finance"]
    return claim


def tasks_of(make_state, user):
    state = make_state(TasksState, user=user)
    run(state.show("tasks"))
    return state


def test_my_groups_lists_the_review_and_a_claim_moves_it_to_mine(make_state, review):
    fred, gina = tasks_of(make_state, "fred"), tasks_of(make_state, "gina")
    assert fred.shown and fred.task_count == 1 and fred.tasks["me"] == []
    task = fred.tasks["candidate"][0]
    assert (task.instance, task.uri, task.short, task.href) == (
        review, "review", review[:8], f"/flow/{review}")
    assert (task.flow, task.description, task.waits, task.waits_you) == (
        "Expense claim", "Finance checks the claim", "finance", False)
    assert task.summary == "30 · Hotel · bob"  # what the claim is about
    ready, due = (datetime.fromisoformat(t) for t in (task.ready, task.due))  # ISO
    assert due - ready == timedelta(days=2) and not task.overdue
    run(fred.claim(review, "review"))
    assert fred.tasks["candidate"] == []
    assert (fred.tasks["me"][0].waits, fred.tasks["me"][0].waits_you) == ("fred", True)
    assert fred.task_totals == {"me": 1, "candidate": 0} and fred.acting == ""
    gina._fetch_tasks(gina._caller())  # what her poll does
    assert gina.tasks["candidate"] == [] and gina.task_count == 0
    events = run(gina.claim(review, "review"))  # from a list she had not refreshed
    assert "held by fred" in str(events)
    assert tasks_of(make_state, "alice").task_count == 0  # not hers to do


def test_unclaim_and_transfer_to_another_candidate(make_state, web_store, review):
    fred = tasks_of(make_state, "fred")
    run(fred.claim(review, "review"))
    fred.ask_hand(review, "review", "Finance checks the claim", "transfer")
    assert fred.handing == f"{review} review" and fred.people == ["gina"]
    assert fred.hand_how == "transfer"
    run(fred.hand())  # nobody chosen yet
    assert web_store.get(review).circles["review"].task["assignee"] == "fred"
    fred.set_hand_to("gina")
    fred.set_hand_comment("back on Monday")
    run(fred.hand())
    assert fred.handing == "" and fred.tasks["me"] == []
    gina = tasks_of(make_state, "gina")
    assert gina.tasks["me"][0].uri == "review"
    run(gina.unclaim(review, "review"))
    assert gina.tasks["me"] == [] and len(gina.tasks["candidate"]) == 1
    assert web_store.get(review).circles["review"].task["assignee"] is None
    kinds = [e["kind"] for e in web_store.history(review)]
    assert {"task_claimed", "task_transferred", "task_unclaimed"} <= set(kinds)
    moved = [e for e in web_store.history(review) if e["kind"] == "task_transferred"]
    assert moved[0]["data"]["comment"] == "back on Monday"


def test_delegate_a_task_the_delegate_sees_it_and_its_holder_reads_the_answer(
        make_state, web_store, review):
    fred = tasks_of(make_state, "fred")
    run(fred.claim(review, "review"))
    fred.ask_hand(review, "review", "Finance checks the claim", "delegate")
    assert fred.hand_how == "delegate" and "fred" not in fred.people
    assert "carol" in fred.people  # anyone of the tenant, not only candidates
    fred.set_hand_to("carol")
    run(fred.hand())
    assert "Waiting for carol" in fred.tasks["me"][0].handover
    carol = tasks_of(make_state, "carol")
    row = carol.tasks["me"][0]
    assert row.answering and "fred asked you to answer" in row.handover
    fred.ask_hand(review, "review", "again", "delegate")  # one delegate at a time
    assert fred.people == [] and fred.handing == ""
    kinds = [e["kind"] for e in web_store.history(review)]
    assert "task_delegated" in kinds


def test_the_flow_page_box_lets_the_delegate_answer_and_its_holder_confirm(
        make_state, web_store, review):
    """The delegate gets the box (with its bookmark) and answers; the answer waits for
    the holder, whose box says so; the holder's own sending completes the step."""
    fred, carol = (Caller.of(web_store.user(n)) for n in ("fred", "carol"))
    moves.claim(web_store, fred, review, "review")
    moves.delegate(web_store, fred, review, "review", "carol", "check the hotel bill")

    def box(caller):
        inst = web_store.get(review)
        return next(b for b in box_views(Interactions(web_store), inst,
                                         web_store.engine.statuses(inst), caller=caller,
                                         words=Words("en")) if b.cid == "review")
    hers = box(carol)
    assert hers.kind == "confirm" and hers.bookmark
    assert "fred asked you to answer it for them" in hers.waits
    assert "Waiting for carol's answer" in box(fred).waits
    moves.complete(web_store, carol, review, "review", hers.bookmark, True)
    assert web_store.get(review).circles["review"].state == "waiting"
    his = box(fred)
    assert "carol answered; open it to confirm or answer differently" in his.waits
    assert box(carol).kind == "wait" and not box(carol).bookmark  # answered: no second
    moves.complete(web_store, fred, review, "review", his.bookmark, True)
    assert web_store.get(review).circles["review"].state == "success"


def test_an_admin_may_hand_a_task_to_anyone(make_state, web_store, review):
    fred = tasks_of(make_state, "fred")
    run(fred.claim(review, "review"))
    root = make_state(TasksState, user="root")
    root.ask_hand(review, "review", "review", "transfer")
    assert root.people == ["alice", "bob", "carol", "gina", "root"]  # not fred: he has it
    root.set_hand_to("carol")
    run(root.hand())
    assert web_store.get(review).circles["review"].task["assignee"] == "carol"
    carol = tasks_of(make_state, "carol")
    assert carol.tasks["me"][0].waits_you


def test_an_overdue_task_is_marked(make_state, web_store, review, monkeypatch):
    later = web_store.engine.clock() + timedelta(days=3)
    monkeypatch.setattr(web_store.engine, "clock", lambda: later)
    task = tasks_of(make_state, "fred").tasks["candidate"][0]
    assert task.overdue and datetime.fromisoformat(task.due) < later


def test_times_go_to_the_page_as_iso(make_state, claim):
    """The page shows them in the reader's zone and language (`components/when.py`)."""
    inbox = make_state(MailState, user="bob")
    run(inbox.load())
    created = datetime.fromisoformat(inbox.mails[0].created)
    assert created.tzinfo is not None and "UTC" not in inbox.mails[0].created


def test_the_tasks_tab_opens_from_its_address_and_follows(make_state, review):
    fred = make_state(TasksState, user="fred", path="/inbox?tab=tasks")
    assert fred.load() == TasksState.follow
    assert fred.shown and len(fred.tasks["candidate"]) == 1
    tab = make_state(MailState, user="fred", path="/inbox?tab=tasks")
    run(tab.load())
    assert tab.kind == "tasks" and tab.mails == []
    mail = make_state(MailState, user="fred", path="/inbox?tab=approval")
    run(mail.load())
    assert mail.kind == "approval"
    badge = make_state(TasksState, user="fred", path="/inbox")
    assert badge.load() is None and not badge.shown and badge.task_count == 1


def _opened(make_state, user: str) -> tuple[MailState, TasksState]:
    """The inbox as `/inbox` opens for `user`: its loads in their order, on one state."""
    inbox = make_state(MailState, user=user, path="/inbox")
    run(inbox.load())
    root = inbox
    while root.parent_state is not None:
        root = root.parent_state
    tasks = root.get_substate(TasksState.get_full_name().split(".")[1:])
    tasks.token = inbox.token
    tasks.load()
    return inbox, tasks


def test_the_inbox_opens_on_the_tab_with_work(make_state, web_store, review, work):
    """Finance's work is a task: its inbox opens on Tasks, the lists read; an approver
    with a decision waiting gets Approvals; someone with nothing waiting, Approvals."""
    inbox, tasks = _opened(make_state, "fred")
    assert inbox.kind == "tasks" and tasks.shown and len(tasks.tasks["candidate"]) == 1
    second = web_store.start("reimbursement", {}, web_store.user("alice"))
    Interactions(web_store).submit(second.id, "claim",
                                   web_store.engine.bookmark(second, "claim"),
                                   {"amount": 5, "reason": "Tea", "manager": "bob"}, "alice")
    work()
    inbox, tasks = _opened(make_state, "bob")
    assert inbox.kind == "approval" and not tasks.shown and len(inbox.mails) == 2
    inbox, tasks = _opened(make_state, "carol")
    assert inbox.kind == "approval" and not tasks.shown and inbox.mails == []


def test_the_inbox_speaks_the_readers_language(make_state, review):
    """Its sentences in Chinese for a reader who chose it; English by default."""
    bob = make_state(MailState, user="bob")
    bob.choice = "zh-CN"
    run(bob.load())
    mail = bob.mails[0]
    assert (mail.label, mail.outcome) == ("已同意", "审批结果：已同意")
    assert outcome("returned", "补上发票") == "Sent back to be amended — 补上发票"
    assert outcome("returned", "补上发票", bob.gettext) == "已退回修改：补上发票"
    assert tamper_notice("the mail was altered after it was signed", bob.gettext) == \
        "这封邮件在签名后被改动过，无法审批。"
    run(bob.decide(mail.id, "returned"))  # no comment
    assert bob.comment_error == "请说明要修改什么：退回需要填写审批意见"


def test_a_claim_made_elsewhere_is_pushed_to_the_tasks_tab(make_state, web_store, review,
                                                           monkeypatch):
    """No poll: gina's Tasks tab wakes when fred claims the review in another process's
    view of the database, and re-reads her lists."""
    monkeypatch.setattr(tasks_state, "ALIVE_S", 0.1)
    gina = make_state(TasksState, user="gina", path="/inbox?tab=tasks")
    assert gina.load() == TasksState.follow and len(gina.tasks["candidate"]) == 1
    other = Store(str(web_store.db.url), secret=SECRET.encode())
    fred = Caller.of(web_store.user("fred"))
    try:
        follow_while(gina, lambda: moves.claim(other, fred, review, "review"),
                     lambda: gina.task_count == 0,
                     lambda: setattr(gina, "shown", False))  # another tab shown
    finally:
        other.close()
    assert gina.tasks["candidate"] == [] and not gina._following


def test_a_new_approval_is_pushed_to_the_open_inbox(make_state, web_store, monkeypatch):
    """No poll: bob's inbox (Approvals) wakes when an approval is sent to him by another
    process's view of the database, and reads its page, its counts and the header's
    unread badge again; it stops following once another page is shown."""
    from reflex.istate.data import RouterData

    from bpflow_app.frame_state import FrameState
    from bpflow_app.pages import mail_state
    monkeypatch.setattr(mail_state, "ALIVE_S", 0.1)
    bob = make_state(MailState, user="bob", path="/inbox")
    assert MailState.follow in run(bob.load())
    assert bob.mails == [] and bob.unread["approval"] == 0
    other = Store(str(web_store.db.url), secret=SECRET.encode())

    def elsewhere():
        inst = other.start("reimbursement", {}, other.user("alice"))
        Interactions(other).submit(inst.id, "claim", other.engine.bookmark(inst, "claim"),
                                   {"amount": 8, "reason": "Lunch", "manager": "bob"},
                                   "alice")
        from bpflow.worker import Worker
        Worker(other).run_once()
    away = RouterData.from_router_data({"pathname": "/flows", "asPath": "/flows",
                                        "headers": {"origin": "http://test"},
                                        "ip": "10.0.0.1", "token": "client-1"})
    try:
        follow_while(bob, elsewhere, lambda: len(bob.mails) == 1,
                     lambda: setattr(bob, "router", away))
    finally:
        other.close()
    assert bob.mails[0].open and bob.unread["approval"] == 1 and not bob._following
    root = bob
    while root.parent_state is not None:
        root = root.parent_state
    frame = root.get_substate(FrameState.get_full_name().split(".")[1:])
    assert frame.unread == 1


def test_reading_the_inbox_again_unchanged_sets_nothing(make_state, claim):
    """What the inbox reads again while it follows changes sets only what changed: a var
    set is sent to the browser, which draws the whole list again, even when its value
    is the one it had (the page's first load sent the list twice)."""
    inbox = make_state(MailState, user="bob")
    run(inbox.load())
    tasks = make_state(TasksState, user="bob")
    tasks._fetch(tasks._visitor())  # the Tasks tab's badge, read first
    tasks.dirty_vars.clear()
    inbox.dirty_vars.clear()
    inbox._read(inbox._visitor())
    tasks._fetch(tasks._visitor())
    assert inbox.dirty_vars == set() and tasks.dirty_vars == set()
