"""State of the inbox: the user's approval mail, in-site messages and (admins) guest
messages, a page at a time with unread counts; approve, reject or send back with a
comment. And the Tasks tab (SPEC §10): the ready circles held by the user ("Mine") and
those offered to them or their roles that nobody holds ("My groups"), with claim,
unclaim and delegate (`bpflow.work`, the same steps as the REST API's).

A mail whose signature does not match is shown as such and cannot be decided: the
mailbox refuses it and records the refusal in the flow's history.

The Tasks tab follows the others' work without a reload: while it is shown, a background
event (`follow`) waits for the store's changes to the user's task lists (`bpflow.changes`:
the tasks they hold, those offered to them or their roles, pushed when a step commits in
any process) and then re-reads its two pages, sending the lists only when they changed.
Nothing reads the database on a timer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import reflex as rx

from bpflow import access, work
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import Tampered, Unauthorized
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.store.public import EVERYTHING, task_keys
from bpflow_app import routes
from bpflow_app.boxview import clock_text
from bpflow_app.frame_state import FrameState
from bpflow_app.session import SessionState
from engine.errors import BpflowError

PAGE_SIZE = 25
KINDS = ("approval", "message", "guest")
TASKS = "tasks"  # the Tasks tab (not a kind of mail)
LISTS = ("me", "candidate")  # Mine, My groups (`Store.tasks`' `assigned`)
ALIVE_S = 5.0  # how often a follow checks that the tab is still shown (no query)
FOLLOW_S = 3600.0  # how long a showing of the tab is followed, in case it was just left open
DECIDED = {  # decision -> (what the mail's row says, the colour of its badge)
    "approved": ("approved", "approved"), "rejected": ("rejected", "rejected"),
    "returned": ("sent back", "pending"), "withdrawn": ("withdrawn", "terminated")}


@dataclass
class MailView:
    id: int = 0
    kind: str = ""
    sender: str = ""
    subject: str = ""
    body: str = ""
    created: str = ""
    read: bool = False
    decision: str = ""
    comment: str = ""
    instance: str = ""
    circle: str = ""
    signature_ok: bool = True
    problem: str = ""
    notice: str = ""  # what the page says of a mail that cannot be trusted
    payload: str = ""
    open: bool = False  # an approval still waiting for this user's decision
    label: str = ""  # the decision as its badge says it ("sent back")
    tone: str = ""  # the badge's colour, as a state of `components.ui.COLORS`
    outcome: str = ""  # the decision in a sentence, with its comment


def tamper_notice(problem: str) -> str:
    """What the inbox says of a mail whose signature does not hold: the mailbox's reason
    ("the mail does not match its signature"), said once, and that it cannot be decided."""
    return f"{problem[:1].upper()}{problem[1:]}. It cannot be approved." if problem else ""


def outcome(decision: str, comment: str) -> str:
    """A decided approval in a sentence: who closed it and why."""
    said = f" — {comment}" if comment else ""
    if decision == "withdrawn":
        return "Withdrawn by the requester"
    if decision == "returned":
        return f"Sent back to be amended{said}"
    return f"Decided: {decision}{said}" if decision else ""


def mail_view(m: dict[str, Any], opened: bool = False) -> MailView:
    """A mail for the list; the signed payload only for the opened one (a page of
    payloads would weigh more than the rest of the page)."""
    payload = m.get("payload") if opened else None
    decision, comment = m["decision"] or "", m["comment"] or ""
    label, tone = DECIDED.get(decision, (decision, decision))
    return MailView(
        id=m["id"], kind=m["kind"], sender=m["sender"], subject=m["subject"], body=m["body"],
        created=clock_text(m["created_at"]), read=m["read"], decision=decision,
        comment=comment, instance=m["instance"] or "", circle=m["circle"] or "",
        signature_ok=m["signature_ok"], problem=m["problem"] or "",
        notice=tamper_notice(m["problem"] or ""),
        payload=json.dumps(payload, indent=1, ensure_ascii=False, sort_keys=True)
        if payload else "",
        open=m["kind"] == "approval" and m["decision"] is None and m["signature_ok"],
        label=label, tone=tone, outcome=outcome(decision, comment))


@dataclass
class TaskView:
    key: str = ""  # instance and circle, naming the row
    instance: str = ""
    short: str = ""  # the instance's id as people read it
    href: str = ""  # its flow page
    uri: str = ""
    flow: str = ""  # the template's title
    description: str = ""
    waits: str = ""  # whom it waits for
    ready: str = ""
    due: str = ""  # "" when the task has no due time
    overdue: bool = False


def span(seconds: float) -> str:
    """A length of time as people say it, to the minute ("2 d 3 h", "5 min")."""
    if seconds < 60:
        return "less than a minute"
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 1440)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min"


def due_words(due_at: str | None, now: datetime) -> tuple[str, bool]:
    """(the due time with how far it is, whether it passed)."""
    if not due_at:
        return "", False
    due = datetime.fromisoformat(due_at)
    left = (due - now).total_seconds()
    if left < 0:
        return f"{clock_text(due)} (overdue by {span(-left)})", True
    return f"{clock_text(due)} ({'in ' if left >= 60 else ''}{span(left)})", False


def task_view(store: Store, caller: Caller, row: Any, now: datetime,
              words: dict[tuple[str, int, str], tuple[str, str]] | None = None) -> TaskView:
    """A row of `Store.tasks` for the list (`words`: the circles' titles and descriptions
    looked up so far, kept across the rows of one read)."""
    task = row.task
    words = {} if words is None else words
    key = (row.template, row.version, row.circle)
    if key not in words:
        words[key] = work.circle_words(store, *key)
    title, description = words[key]
    holder = task["assignee"]
    due, overdue = due_words(task.get("due_at"), now)
    return TaskView(
        key=f"{row.instance_id} {row.circle}", instance=row.instance_id,
        short=row.instance_id[:8], href=routes.flow(row.instance_id), uri=row.circle,
        flow=title or row.template, description=description or row.circle,
        waits="you" if holder == caller.username else holder or access.describe(task),
        ready=clock_text(row.ready_at), due=due, overdue=overdue)


class InboxState(SessionState):
    kind: str = "approval"
    mails: list[MailView] = []
    unread: dict[str, int] = {k: 0 for k in KINDS}
    total: int = 0
    page: int = 0
    opened: int = 0
    comment: str = ""
    comment_error: str = ""  # a send back without a comment
    deciding: int = 0
    loading: bool = True
    # The Tasks tab: per list (me, candidate) its page of tasks, their number, the page.
    tasks: dict[str, list[TaskView]] = {k: [] for k in LISTS}
    task_totals: dict[str, int] = {k: 0 for k in LISTS}
    task_pages: dict[str, int] = {k: 0 for k in LISTS}
    task_count: int = 0  # the tab's badge: open tasks held by or offered to the user
    acting: str = ""  # the task (key) whose claim, unclaim or delegation is under way
    # The delegate dialog: the task it hands on, and whom to.
    handing: str = ""
    handing_title: str = ""
    delegates: list[str] = []
    delegate_to: str = ""
    _handing: tuple[str, str] = ("", "")
    _following: bool = False

    @rx.var
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))

    @rx.var
    def task_page_count(self) -> dict[str, int]:
        return {k: max(1, -(-self.task_totals[k] // PAGE_SIZE)) for k in LISTS}

    def _fetch(self, caller: Caller) -> None:
        store = store_for(caller)
        counts = store.mail_counts(caller)
        self.unread = {k: counts[k]["unread"] for k in KINDS}
        if self.kind == TASKS:
            self._fetch_tasks(caller)
            self.loading = False
            return
        self.task_count = store.tasks(caller, "all", None, 1, 0)[1]
        self.total = counts[self.kind]["total"]
        self.page = min(self.page, self.pages - 1)
        rows = Mailbox(store).inbox(caller, kind=self.kind, limit=PAGE_SIZE,
                                    offset=self.page * PAGE_SIZE)
        self.mails = [mail_view(m, m["id"] == self.opened) for m in rows]
        self.loading = False

    def _fetch_tasks(self, caller: Caller) -> None:
        """Both lists' pages as they are now; only what changed is set (and sent)."""
        store = store_for(caller)
        now = store.engine.clock()
        tasks, totals, pages = {}, {}, dict(self.task_pages)
        words: dict[tuple[str, int, str], tuple[str, str]] = {}
        for which in LISTS:
            rows, totals[which] = store.tasks(caller, which, None, PAGE_SIZE,
                                              pages[which] * PAGE_SIZE)
            last = max(0, -(-totals[which] // PAGE_SIZE) - 1)
            if pages[which] > last:  # the page emptied under us: show the last one
                pages[which] = last
                rows, totals[which] = store.tasks(caller, which, None, PAGE_SIZE,
                                                  last * PAGE_SIZE)
            tasks[which] = [task_view(store, caller, r, now, words) for r in rows]
        for name, value in (("tasks", tasks), ("task_totals", totals),
                            ("task_pages", pages),
                            ("task_count", sum(totals.values()))):
            if getattr(self, name) != value:
                setattr(self, name, value)

    @rx.event
    def load(self):
        caller = self._visitor()
        if caller is None:
            return None
        if self.router.url.query_parameters.get("tab") == TASKS:
            self.kind = TASKS
        self._fetch(caller)
        return InboxState.follow if self.kind == TASKS else None

    @rx.event
    def show(self, kind: str):
        if kind in KINDS or kind == TASKS:
            self.kind, self.page, self.opened, self.loading = kind, 0, 0, True
            yield
            yield self._guarded(self._fetch)
            if kind == TASKS:
                yield InboxState.follow

    def _tasks_shown(self) -> bool:
        return self.kind == TASKS and self.router.url.path.rstrip("/").endswith(routes.INBOX)

    @rx.event(background=True)
    async def follow(self):
        """Follow the Tasks tab while it is shown (one follow per browser tab): re-read
        it when a change touches the user's task lists; stop when another tab or page is
        shown (checked every ALIVE_S seconds without a query) or after FOLLOW_S."""
        async with self:
            if self._following:
                return
            self._following = True
            caller = self._visitor()
        loop = asyncio.get_running_loop()
        try:
            if caller is None:
                return
            hub = store_for(caller).changes
            keys = task_keys(caller.tenant, caller.username, caller.roles)
            with hub.subscribe(keys) as changes:
                await hub.heard()
                # first, what may have committed before the subscription
                end, news = loop.time() + FOLLOW_S, [EVERYTHING]
                while loop.time() < end:
                    news = news or await changes.next(ALIVE_S)
                    async with self:
                        if not self._tasks_shown():
                            break
                        if news:
                            caller = self._visitor()
                            if caller is None:
                                break
                            self._fetch_tasks(caller)
                    news = []
        except Unauthorized:
            pass
        finally:
            async with self:
                self._following = False

    @rx.event
    def turn(self, delta: int):
        self.page = min(max(0, self.page + delta), self.pages - 1)
        return self._guarded(self._fetch)

    @rx.event
    def turn_tasks(self, which: str, delta: int):
        if which in LISTS:
            last = self.task_page_count[which] - 1
            self.task_pages = {**self.task_pages,
                               which: min(max(0, self.task_pages[which] + delta), last)}
            return self._guarded(self._fetch_tasks)
        return None

    # ------------------------------------------------------------------- tasks
    @rx.event
    def claim(self, iid: str, uri: str):
        yield from self._work(iid, uri, lambda store, caller: work.claim(
            store, caller, iid, uri), "Claimed: it is yours now")

    @rx.event
    def unclaim(self, iid: str, uri: str):
        yield from self._work(iid, uri, lambda store, caller: work.unclaim(
            store, caller, iid, uri), "Given back to the group")

    @rx.event
    def ask_delegate(self, iid: str, uri: str, title: str):
        """Open the delegate dialog of a task, offering whom it may go to."""
        def offer(caller: Caller):
            store = store_for(caller)
            try:
                work.visible(store, caller, iid)
                task = work.engine_task(store.engine, store.get(iid), uri)
            except BpflowError as exc:
                self._fetch_tasks(caller)
                return rx.toast.warning(str(exc))
            self.delegates = work.delegates(store, caller, task)
            if not self.delegates:
                return rx.toast.info("There is nobody else this task may go to")
            self._handing, self.handing, self.handing_title = (iid, uri), f"{iid} {uri}", title
            self.delegate_to = ""
            return None
        return self._guarded(offer)

    @rx.event
    def set_delegate_to(self, value: str):
        self.delegate_to = value

    @rx.event
    def cancel_delegate(self):
        self.handing, self._handing, self.delegate_to = "", ("", ""), ""

    @rx.event
    def delegate(self):
        iid, uri = self._handing
        to = self.delegate_to
        if not iid:
            return
        if not to:
            yield rx.toast.warning("Choose whom to hand the task to")
            return
        self.handing = ""
        yield from self._work(iid, uri, lambda store, caller: work.delegate(
            store, caller, iid, uri, to), f"Handed to {to}")

    def _work(self, iid: str, uri: str, step: Callable[[Store, Caller], Any], done: str):
        """Run one step on a task (its row busy meanwhile), then show both lists anew."""
        self.acting = f"{iid} {uri}"
        yield
        try:
            yield self._guarded(lambda caller: self._did(caller, step, done))
        finally:
            self.acting = ""

    def _did(self, caller: Caller, step: Callable[[Store, Caller], Any], done: str):
        try:
            step(store_for(caller), caller)
            toast = rx.toast.success(done)
        except BpflowError as exc:
            toast = rx.toast.warning(str(exc))
        self._fetch_tasks(caller)
        return toast

    # -------------------------------------------------------------------- mail
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
            return rx.toast.error(str(exc))

    @rx.event
    def set_comment(self, value: str):
        self.comment = value
        if value.strip():
            self.comment_error = ""

    @rx.event
    def decide(self, mail_id: int, decision: str):
        if decision == "returned" and not self.comment.strip():
            self.comment_error = "Say what to amend: sending back needs a comment"
            yield rx.toast.warning("Write a comment saying what to amend, then send it back")
            return
        self.deciding, self.comment_error = mail_id, ""
        yield
        try:
            yield self._guarded(lambda caller: self._decide(caller, mail_id, decision))
        finally:
            self.deciding = 0

    def _decide(self, caller: Caller, mail_id: int, decision: str):
        try:
            Mailbox(store_for(caller)).decide(mail_id, caller, decision, self.comment.strip())
            toast = rx.toast.success("Sent back to the requester to amend"
                                     if decision == "returned" else
                                     f"{decision.capitalize()}; the flow continues")
            self.comment = ""
        except Tampered as exc:
            toast = rx.toast.error(f"Refused: {exc}")
        except BpflowError as exc:
            toast = rx.toast.warning(str(exc))
        self._fetch(caller)
        return [toast, FrameState.load]
