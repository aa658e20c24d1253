"""State of the inbox's mail: the user's approval mail, in-site messages and (admins) guest
messages, a page at a time with unread counts; approve, reject or send back with a
comment. It also holds which tab is shown (`kind`: a kind of mail, or the Tasks tab,
whose lists are `TasksState`'s): the one asked for (`/inbox?tab=tasks`), else the one
with work waiting (`inboxview.opening_tab`).

A mail whose signature does not match is shown as such and cannot be decided: the
mailbox refuses it and records the refusal in the flow's history.

The inbox follows new mail without a reload, as the Tasks tab follows tasks: while it is
shown, a background event (`follow`) waits for the store's changes to the user's mail (a
mail sent to them, decided, closed or read, in any process: `bpflow.store.changes`,
`mail_keys`) and to their task lists, then reads the counts again, the page of mail
shown, the header's unread badge (`FrameState.unread`) and the Tasks tab's badge.
Nothing reads the database on a timer.
"""

from __future__ import annotations

import reflex as rx

from bpflow.access import Caller, reads_guest_mail
from bpflow.backend import store_for
from bpflow.errors import Tampered
from bpflow.mailbox import Mailbox
from bpflow.store.public import mail_keys, task_keys
from bpflow_app import following, routes
from bpflow_app.catalogs import N_
from bpflow_app.frame_state import FrameState
from bpflow_app.inboxview import (
    KINDS,
    PAGE_SIZE,
    TASKS,
    MailView,
    mail_view,
    opening_tab,
    with_round,
)
from bpflow_app.pages.tasks_state import TasksState
from bpflow_app.session import SessionState
from engine.errors import BpflowError

HANDED = {  # what a hand-over's toast says
    "transfer": N_("Transferred to %(name)s; they decide now"),
    "delegate": N_("Asked %(name)s to answer; their answer comes back to you")}
DONE = {  # what a decision's toast says
    "approved": N_("Approved; the flow continues"),
    "rejected": N_("Rejected; the flow continues"),
    "returned": N_("Sent back to the requester to amend")}
ALIVE_S = 5.0  # how often a follow checks that the inbox is still shown (no query)
FOLLOW_S = 3600.0  # how long a showing of the inbox is followed


class MailState(SessionState):
    kind: str = "approval"  # the tab shown: a kind of mail, or TASKS
    mails: list[MailView] = []
    unread: dict[str, int] = {k: 0 for k in KINDS}
    total: int = 0
    page: int = 0
    opened: int = 0
    comment: str = ""
    comment_error: str = ""  # a send back without a comment
    deciding: int = 0
    loading: bool = True
    # The hand-over dialog (SPEC §15): the mail, transfer or delegate, whom to, why.
    hand_mail: int = 0
    hand_how: str = "transfer"
    people: list[str] = []
    hand_to: str = ""
    hand_comment: str = ""
    _following: bool = False

    @rx.var
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))

    def _fetch(self, caller: Caller, counts: dict[str, dict[str, int]] | None = None) -> None:
        """The unread counts of the tabs (`counts` when just read) and, on a mail tab, its
        page of mail."""
        self._read(caller, counts)

    def _read(self, caller: Caller, counts: dict[str, dict[str, int]] | None = None
              ) -> dict[str, dict[str, int]]:
        """`_fetch`, setting only what changed (only that is sent); the counts."""
        store = store_for(caller)
        counts = counts or store.mail_counts(caller)
        unread = {k: counts[k]["unread"] for k in KINDS}
        if unread != self.unread:
            self.unread = unread
        if self.kind in KINDS:
            if self.total != counts[self.kind]["total"]:
                self.total = counts[self.kind]["total"]
            if self.page > self.pages - 1:
                self.page = self.pages - 1
            rows = Mailbox(store).inbox(caller, kind=self.kind, limit=PAGE_SIZE,
                                        offset=self.page * PAGE_SIZE)
            mails = [with_round(mail_view(m, True, self.gettext), store, caller,
                                self.gettext) if m["id"] == self.opened else
                     mail_view(m, False, self.gettext) for m in rows]
            if mails != self.mails:
                self.mails = mails
        if self.loading:  # (a var set is sent, and redraws the list, even when unchanged)
            self.loading = False
        return counts

    @rx.event
    async def load(self):
        """The tab asked for (`?tab=`), else the one with work waiting; the Tasks tab's
        lists are read by `TasksState.load`, which runs next."""
        caller = self._visitor()
        if caller is None:
            return
        asked = self.router.url.query_parameters.get("tab")
        store = store_for(caller)
        counts = store.mail_counts(caller)  # read once: for the tab and for its badges
        self.kind = asked if asked in KINDS or asked == TASKS else opening_tab(
            store, caller, counts)
        self.page, self.opened = 0, 0
        if self.kind == TASKS:
            tasks = await self.get_state(TasksState)
            tasks.shown = True
        self._fetch(caller, counts)
        return MailState.follow

    def _inbox_shown(self) -> bool:
        return self.router.url.path.rstrip("/").endswith(routes.INBOX)

    async def _news(self, caller: Caller) -> None:
        """What a change to the user's mail or tasks may have moved: the tabs' counts and
        the page of mail shown, the header's unread badge, the Tasks tab's badge."""
        counts = self._read(caller)
        frame = await self.get_state(FrameState)
        unread = sum(c["unread"] for c in counts.values())
        if frame.unread != unread:
            frame.unread = unread
        tasks = await self.get_state(TasksState)
        if not tasks.shown:  # (shown, it follows its lists itself)
            tasks._count(caller)

    @rx.event(background=True)
    async def follow(self):
        """Follow the inbox while it is shown (one follow per browser tab): read it again
        when a change touches the user's mail or task lists; stop when another page is
        shown (checked every ALIVE_S seconds without a query) or after FOLLOW_S."""
        await following.follow(
            self, lambda caller: [
                *mail_keys(caller.tenant, caller.id, reads_guest_mail(caller)),
                *task_keys(caller.tenant, caller.username, caller.roles)],
            self._inbox_shown, self._news, ALIVE_S, FOLLOW_S)

    @rx.event
    def show(self, kind: str):
        """Show another tab (`TasksState.show` hears the same change)."""
        if kind in KINDS or kind == TASKS:
            self.kind, self.page, self.opened, self.loading = kind, 0, 0, True
            yield
            yield self._guarded(self._fetch)

    @rx.event
    def turn(self, delta: int):
        self.page = min(max(0, self.page + delta), self.pages - 1)
        return self._guarded(self._fetch)

    @rx.event
    def toggle(self, mail_id: int):
        """Open a mail (marking it read) or close it."""
        if self.opened == mail_id:
            self.opened = 0
            return None
        self.opened, self.comment, self.comment_error = mail_id, "", ""

        def read(caller: Caller):
            Mailbox(store_for(caller)).mark_read(mail_id, caller)
            self._fetch(caller)
            return FrameState.load
        try:
            return self._guarded(read)
        except BpflowError as exc:
            return rx.toast.error(self.gettext("Could not open it: %(reason)s",
                                               reason=self.explain(exc)))

    @rx.event
    def set_comment(self, value: str):
        self.comment = value
        if value.strip():
            self.comment_error = ""

    @rx.event
    def decide(self, mail_id: int, decision: str):
        if decision == "returned" and not self.comment.strip():
            self.comment_error = self.gettext(
                "Say what to amend: sending back needs a comment")
            yield rx.toast.warning(self.gettext(
                "Write a comment saying what to amend, then send it back"))
            return
        self.deciding, self.comment_error = mail_id, ""
        yield
        try:
            yield self._guarded(lambda caller: self._decide(caller, mail_id, decision))
        finally:
            self.deciding = 0

    def _decide(self, caller: Caller, mail_id: int, decision: str):
        """Decide; then the mail, the frame's unread count and the Tasks tab's count (the
        flow moved on, perhaps to a task of the user's) anew."""
        try:
            Mailbox(store_for(caller)).decide(mail_id, caller, decision, self.comment.strip())
            toast = rx.toast.success(self.gettext(DONE.get(decision, DONE["approved"])))
            self.comment = ""
        except Tampered as exc:
            toast = rx.toast.error(self.gettext("Refused: %(reason)s", reason=self.explain(exc)))
        except BpflowError as exc:
            toast = rx.toast.warning(self.explain(exc))
        self._fetch(caller)
        return [toast, FrameState.load, TasksState.count]

    # ------------------------------------------------ transfer and delegate (SPEC §15)
    @rx.event
    def ask_hand(self, mail_id: int, how: str):
        """Open the hand-over dialog of an approval (`how`: transfer or delegate),
        offering whom it may go to."""
        if how not in HANDED:
            return None

        def offer(caller: Caller):
            try:
                self.people = Mailbox(store_for(caller)).hand_over_choices(mail_id, caller,
                                                                            how)
            except BpflowError as exc:
                self._fetch(caller)
                return rx.toast.warning(self.explain(exc))
            if not self.people:
                return rx.toast.info(self.gettext("There is nobody else it may go to"))
            self.hand_mail, self.hand_how, self.hand_to, self.hand_comment = \
                mail_id, how, "", ""
            return None
        return self._guarded(offer)

    @rx.event
    def set_hand_to(self, value: str):
        self.hand_to = value

    @rx.event
    def set_hand_comment(self, value: str):
        self.hand_comment = value[:2000]

    @rx.event
    def cancel_hand(self):
        self.hand_mail, self.hand_to, self.hand_comment = 0, "", ""

    @rx.event
    def hand(self):
        """Transfer or delegate the dialog's mail to the person chosen."""
        mail_id, how, to = self.hand_mail, self.hand_how, self.hand_to
        if not mail_id or how not in HANDED:
            return
        if not to:
            yield rx.toast.warning(self.gettext("Choose a person"))
            return
        comment = self.hand_comment.strip()
        self.hand_mail, self.deciding = 0, mail_id
        yield
        try:
            yield self._guarded(lambda caller: self._hand(caller, mail_id, how, to, comment))
        finally:
            self.deciding = 0

    def _hand(self, caller: Caller, mail_id: int, how: str, to: str, comment: str):
        mailbox = Mailbox(store_for(caller))
        move = mailbox.transfer if how == "transfer" else mailbox.delegate
        try:
            move(mail_id, caller, to, comment)
            toast = rx.toast.success(self.gettext(HANDED[how], name=to))
        except BpflowError as exc:
            toast = rx.toast.warning(self.explain(exc))
        self._fetch(caller)
        return [toast, FrameState.load]
