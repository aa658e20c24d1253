"""State of the inbox's Tasks tab (SPEC §10): the ready circles held by the user ("Mine")
and those offered to them or their roles that nobody holds ("My groups"), with claim,
unclaim, transfer and delegate (`bpflow.moves`, the same steps as the REST API's; SPEC
§15: a transfer hands the task on, a delegate answers it for its holder), and the tab's
badge (how many tasks wait for the user) whichever tab is shown.

The tab follows the others' work without a reload: while it is shown, a background event
(`follow`) waits for the store's changes to the user's task lists (`bpflow.store.changes`: the
tasks they hold, those offered to them or their roles, pushed when a step commits in any
process) and then re-reads its two pages, sending the lists only when they changed.
Nothing reads the database on a timer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reflex as rx

from bpflow import moves
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.store import Store
from bpflow.store.public import task_keys
from bpflow_app import following, routes
from bpflow_app.catalogs import N_
from bpflow_app.flowsview import summary
from bpflow_app.inboxview import KINDS, PAGE_SIZE, TASKS, TaskView, task_view
from bpflow_app.session import SessionState
from engine.errors import BpflowError

LISTS = ("me", "candidate")  # Mine, My groups (`Store.tasks`' `assigned`)
# how a task is handed on: (whom it may go to, the move, what the toast says)
HANDOVERS: dict[str, tuple[Callable[..., list[str]], Callable[..., Any], str]] = {
    "transfer": (moves.transferees, moves.transfer, N_("Handed to %(name)s")),
    "delegate": (moves.delegates, moves.delegate,
                 N_("Asked %(name)s to answer; it comes back to you to confirm"))}
ALIVE_S = 5.0  # how often a follow checks that the tab is still shown (no query)
FOLLOW_S = 3600.0  # how long a showing of the tab is followed, in case it was just left open


class TasksState(SessionState):
    shown: bool = False  # the Tasks tab is the inbox's tab shown (`MailState.kind`)
    loading: bool = True
    # Per list (me, candidate) its page of tasks, their number, the page.
    tasks: dict[str, list[TaskView]] = {k: [] for k in LISTS}
    task_totals: dict[str, int] = {k: 0 for k in LISTS}
    task_pages: dict[str, int] = {k: 0 for k in LISTS}
    task_count: int = 0  # the tab's badge: open tasks held by or offered to the user
    acting: str = ""  # the task (key) whose claim, unclaim or hand-over is under way
    # The hand-over dialog: transfer or delegate (`hand_how`), the task, whom to, why.
    handing: str = ""
    handing_title: str = ""
    hand_how: str = "transfer"
    people: list[str] = []
    hand_to: str = ""
    hand_comment: str = ""
    _handing: tuple[str, str] = ("", "")
    _following: bool = False

    @rx.var
    def task_page_count(self) -> dict[str, int]:
        return {k: max(1, -(-self.task_totals[k] // PAGE_SIZE)) for k in LISTS}

    def _fetch(self, caller: Caller) -> None:
        """The lists when the tab is shown, else only the badge's count."""
        if self.shown:
            self._fetch_tasks(caller)
        else:
            self._count(caller)
        if self.loading:
            self.loading = False

    def _count(self, caller: Caller) -> None:
        count = store_for(caller).tasks(caller, "all", None, 1, 0)[1]
        if count != self.task_count:  # (a var set is sent, even when unchanged)
            self.task_count = count

    def _fetch_tasks(self, caller: Caller) -> None:
        """Both lists' pages as they are now; only what changed is set (and sent)."""
        store = store_for(caller)
        now = store.engine.clock()
        tasks, totals, pages = {}, {}, dict(self.task_pages)
        words: dict[tuple[str, int, str], tuple[Any, Any]] = {}
        found = {}
        for which in LISTS:
            rows, totals[which] = store.tasks(caller, which, None, PAGE_SIZE,
                                              pages[which] * PAGE_SIZE)
            last = max(0, -(-totals[which] // PAGE_SIZE) - 1)
            if pages[which] > last:  # the page emptied under us: show the last one
                pages[which] = last
                rows, totals[which] = store.tasks(caller, which, None, PAGE_SIZE,
                                                  last * PAGE_SIZE)
            found[which] = rows
        ids = list(dict.fromkeys(r.instance_id for rows in found.values() for r in rows))
        about = {iid: summary(inst) for iid, inst in
                 (store.get_many(ids) if ids else {}).items()}
        for which, rows in found.items():
            tasks[which] = [task_view(store, caller, r, now, words, self._language(),
                                      about.get(r.instance_id, ""), self.gettext)
                            for r in rows]
        for name, value in (("tasks", tasks), ("task_totals", totals),
                            ("task_pages", pages),
                            ("task_count", sum(totals.values()))):
            if getattr(self, name) != value:
                setattr(self, name, value)

    @rx.event
    def load(self):
        """After `MailState.load`, which says whether the Tasks tab opens (`shown`)."""
        caller = self._visitor()
        if caller is None:
            return None
        if self.router.url.query_parameters.get("tab") == TASKS:
            self.shown = True
        self._fetch(caller)
        return TasksState.follow if self.shown else None

    @rx.event
    def show(self, kind: str):
        """The inbox shows another tab (`MailState.show` hears the same change)."""
        if kind not in KINDS and kind != TASKS:
            return
        self.shown = kind == TASKS
        if self.shown:
            self.loading = True
            yield
        caller = self._visitor()  # quietly: `MailState.show` says when a session ended
        if caller is not None:
            self._fetch(caller)
            if self.shown:
                yield TasksState.follow

    @rx.event
    def count(self):
        """The badge anew (a decision in the mail tabs may have moved a flow on)."""
        caller = self._visitor()
        if caller is not None:
            self._count(caller)

    def _tasks_shown(self) -> bool:
        return self.shown and self.router.url.path.rstrip("/").endswith(routes.INBOX)

    @rx.event(background=True)
    async def follow(self):
        """Follow the Tasks tab while it is shown (one follow per browser tab): re-read
        it when a change touches the user's task lists; stop when another tab or page is
        shown (checked every ALIVE_S seconds without a query) or after FOLLOW_S."""
        await following.follow(
            self, lambda caller: task_keys(caller.tenant, caller.username, caller.roles),
            self._tasks_shown, self._fetch_tasks, ALIVE_S, FOLLOW_S)

    @rx.event
    def turn_tasks(self, which: str, delta: int):
        if which in LISTS:
            last = self.task_page_count[which] - 1
            self.task_pages = {**self.task_pages,
                               which: min(max(0, self.task_pages[which] + delta), last)}
            return self._guarded(self._fetch_tasks)
        return None

    @rx.event
    def claim(self, iid: str, uri: str):
        yield from self._work(iid, uri, lambda store, caller: moves.claim(
            store, caller, iid, uri), self.gettext("Claimed: it is yours now"))

    @rx.event
    def unclaim(self, iid: str, uri: str):
        yield from self._work(iid, uri, lambda store, caller: moves.unclaim(
            store, caller, iid, uri), self.gettext("Given back to the group"))

    @rx.event
    def ask_hand(self, iid: str, uri: str, title: str, how: str):
        """Open the hand-over dialog of a task (`how`: "transfer" or "delegate"),
        offering whom it may go to."""
        if how not in HANDOVERS:
            return None

        def offer(caller: Caller):
            store = store_for(caller)
            try:
                moves.visible(store, caller, iid)
                task = moves.engine_task(store.engine, store.get(iid), uri)
            except BpflowError as exc:
                self._fetch_tasks(caller)
                return rx.toast.warning(self.explain(exc))
            self.people = HANDOVERS[how][0](store, caller, task)
            if not self.people:
                return rx.toast.info(self.gettext("There is nobody else this task may go to"))
            self._handing, self.handing, self.handing_title = (iid, uri), f"{iid} {uri}", title
            self.hand_how, self.hand_to, self.hand_comment = how, "", ""
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
        self.handing, self._handing, self.hand_to, self.hand_comment = "", ("", ""), "", ""

    @rx.event
    def hand(self):
        """Transfer or delegate the task of the dialog to the person chosen."""
        iid, uri = self._handing
        to, how, comment = self.hand_to, self.hand_how, self.hand_comment.strip()
        if not iid or how not in HANDOVERS:
            return
        if not to:
            yield rx.toast.warning(self.gettext("Choose whom to hand the task to"))
            return
        self.handing = ""
        move, done = HANDOVERS[how][1], HANDOVERS[how][2]
        yield from self._work(iid, uri, lambda store, caller: move(
            store, caller, iid, uri, to, comment), self.gettext(done, name=to))

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
            toast = rx.toast.warning(self.explain(exc))
        self._fetch_tasks(caller)
        return toast
