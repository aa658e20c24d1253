"""State of the operations page (admins, SPEC §18): the tenant's instances filtered and
paged on the server, incidents (failed circles grouped, each opening its instances),
overdue tasks; instances chosen one by one or "all that match" and a bulk operation on
them (`bpflow.operations`), whose progress and per-instance results are followed live
while the page shows it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import reflex as rx

from bpflow import operations
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import BpflowError
from bpflow_app.boxview import iso_text
from bpflow_app.session import SessionState

PAGE = 50  # instances a page shows
RESULTS = 200  # per-instance results shown
POLL_S, FOLLOW_S = 0.5, 600.0  # how often, and how long at most, progress is read
STATUSES = ("running", "completed", "failed", "suspended", "terminated")
ACTIONS = ("retry", "abort", "suspend", "resume")  # a migration: the templates page's
TEXT_KEYS = ("template", "starter", "circle", "reason")


@dataclass
class InstanceLine:
    id: str
    template: str
    version: int
    status: str
    starter: str
    created: str  # ISO
    updated: str  # ISO


@dataclass
class IncidentLine:
    template: str
    circle: str
    reason: str
    count: int


@dataclass
class OverdueLine:
    instance: str
    template: str
    circle: str
    due: str  # ISO
    assignee: str


@dataclass
class ResultLine:
    instance: str
    state: str  # pending, done, refused
    reason: str


def _day(text: Any) -> datetime | None:
    """A date field's value (YYYY-MM-DD) as the start of that UTC day; None if empty or
    not a date."""
    try:
        return datetime.strptime(str(text or "").strip(), "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None


def filter_of(form: dict[str, Any]) -> dict[str, Any]:
    """The filter a form's fields say (empty and malformed ones left out)."""
    f: dict[str, Any] = {k: str(form[k]).strip()[:400] for k in TEXT_KEYS
                         if str(form.get(k) or "").strip()}
    if form.get("status") in STATUSES:
        f["status"] = form["status"]
    for key in ("version", "waiting_hours"):
        try:
            value = float(form.get(key) or "")
        except ValueError:
            continue
        if 0 <= value <= 1_000_000:
            f[key] = int(value) if key == "version" else value
    for key in ("started_after", "started_before", "updated_after", "updated_before"):
        if (day := _day(form.get(key))) is not None:
            f[key] = day
    return f


class OperationsState(SessionState):
    form: dict[str, str] = {}  # the filter's fields as typed (kept across pages)
    rows: list[InstanceLine] = []
    total: int = 0
    offset: int = 0
    incidents: list[IncidentLine] = []
    overdue: list[OverdueLine] = []
    overdue_total: int = 0
    chosen: list[str] = []  # instances picked one by one
    everything: bool = False  # "all that match" instead
    operation: str = ""  # the operation followed
    action: str = ""
    matched: int = 0
    done: int = 0
    refused: int = 0
    finished: bool = False
    results: list[ResultLine] = []

    def _filter(self) -> dict[str, Any]:
        return filter_of(self.form)

    def _fetch(self, caller: Caller) -> None:
        store = store_for(caller)
        rows, self.total = operations.instances(store, caller, self._filter(), PAGE,
                                                self.offset)
        self.rows = [InstanceLine(r["id"], r["template"], r["version"], r["status"],
                                  str((r["user"] or {}).get("username") or ""),
                                  iso_text(r["created_at"]), iso_text(r["updated_at"]))
                     for r in rows]
        self.incidents = [IncidentLine(g["template"], g["circle"], g["reason"] or "",
                                       g["count"]) for g in operations.incidents(
            store, caller, shown=0)]
        overdue, self.overdue_total = operations.overdue(store, caller, 20)
        self.overdue = [OverdueLine(o["instance"], o["template"], o["circle"],
                                    iso_text(o["due_at"]), o["assignee"] or "")
                        for o in overdue]

    @rx.event
    def load(self):
        if self._visitor() is None:
            return None
        return self._guarded(self._fetch, admin=True)

    @rx.event
    def search(self, form_data: dict[str, Any]):
        """The filter form sent: its first page, nothing chosen."""
        self.form = {k: str(v) for k, v in form_data.items() if v not in (None, "")}
        self.offset, self.chosen, self.everything = 0, [], False
        return self._guarded(self._fetch, admin=True)

    @rx.event
    def open_incident(self, template: str, circle: str, reason: str):
        """An incident's instances: the list filtered by its template, circle and reason."""
        self.form = {"template": template, "circle": circle, "reason": reason}
        self.offset, self.chosen, self.everything = 0, [], False
        return self._guarded(self._fetch, admin=True)

    @rx.event
    def page(self, step: int):
        self.offset = max(0, min(self.offset + step * PAGE, max(0, self.total - 1)))
        return self._guarded(self._fetch, admin=True)

    @rx.event
    def choose(self, iid: str, on: bool):
        self.chosen = [i for i in self.chosen if i != iid] + ([iid] if on else [])

    @rx.event
    def choose_everything(self, on: bool):
        self.everything = on

    @rx.event
    def run(self, action: str):
        if action not in ACTIONS:
            return None
        return self._guarded(lambda caller: self._run(caller, action), admin=True)

    def _run(self, caller: Caller, action: str):
        if not self.everything and not self.chosen:
            return rx.toast.error(self.gettext("Choose instances first, or all that match"))
        try:
            started = operations.start(
                store_for(caller), caller, action,
                self._filter() if self.everything else None,
                None if self.everything else list(self.chosen))
        except BpflowError as exc:
            return rx.toast.error(self.explain(exc))
        self.operation, self.action, self.matched = (started["operation"], action,
                                                     started["matched"])
        self.done = self.refused = 0
        self.finished, self.results, self.chosen = False, [], []
        return [OperationsState.follow, rx.toast.info(self.gettext(
            "Started: %(n)s instances", n=started["matched"]))]

    def _progress(self, caller: Caller) -> None:
        seen = operations.progress(store_for(caller), caller, self.operation, limit=RESULTS)
        self.done, self.refused, self.finished = seen["done"], seen["refused"], seen["finished"]
        self.results = [ResultLine(i["instance"], i["state"], i["reason"] or "")
                        for i in seen["items"]]

    @rx.event(background=True)
    async def follow(self):
        """Read the operation's progress every POLL_S seconds until it is finished, the
        page follows another one, or FOLLOW_S seconds have passed; then the lists again."""
        async with self:
            op = self.operation
        loop = asyncio.get_running_loop()
        until = loop.time() + FOLLOW_S
        while loop.time() < until:
            async with self:
                if self.operation != op:
                    return
                self._guarded(self._progress, admin=True)
                if self.finished:
                    self._guarded(self._fetch, admin=True)
                    return
            await asyncio.sleep(POLL_S)
