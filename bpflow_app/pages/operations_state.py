"""State of the operations page (admins, SPEC §18): the tenant's instances filtered and
paged on the server, incidents (failed circles grouped, each opening its instances),
overdue tasks; instances chosen one by one or "all that match" and a bulk operation on
them (`bpflow.operations`), whose progress and per-instance results are followed live
while the page shows it.

When the filter names a template (an incident does), the page draws it as the heat map
of where its flows wait (`bpflow_app.heatview`), and offers to migrate what is chosen to
another of its versions: a dry run first (the bulk migration with "dry_run": nothing
changes, each instance's answer shown as it comes), and the migration once a dry run of
the very same request has finished."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import reflex as rx

from bpflow import operations
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import BpflowError
from bpflow.limits import MAX_STRING
from bpflow.store import Store
from bpflow_app.boxview import iso_text
from bpflow_app.drawing import Drawing
from bpflow_app.heatview import heat_map, template_drawing
from bpflow_app.session import SessionState
from bpflow_app.templatesview import parse_map, proposed

PAGE = 50  # instances a page shows
RESULTS = 200  # per-instance results shown
POLL_S, FOLLOW_S = 0.5, 600.0  # how often, and how long at most, progress is read
STATUSES = ("running", "completed", "failed", "suspended", "terminated")
ACTIONS = ("retry", "abort", "suspend", "resume")  # a migration: `migrate`
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
    if "reason" in f:  # compared whole by the store: as written (an incident's own, which
        # may end in a newline or be longer than a typed filter), at most a string's limit
        f["reason"] = str(form["reason"])[:MAX_STRING]
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
    # the template the filter names, drawn as where its flows wait ("": none named)
    template: str = ""
    template_version: int = 0
    heat: Drawing = Drawing()
    waited: bool = False
    # migrating to another version of it: the request, and the dry run it needs first
    versions: list[str] = []
    mig_from: str = ""
    mig_to: str = ""
    mig_map: str = ""
    dry_run: bool = False  # the operation followed is a migration's dry run
    dry_key: str = ""  # the request that dry run answers

    @rx.var
    def can_migrate(self) -> bool:
        """The migration may run: a dry run of exactly what is asked now has finished."""
        return (self.dry_run and self.finished and self.action == "migrate"
                and self.dry_key == self._mig_key())

    def _mig_key(self) -> str:
        return json.dumps([self.form, self.everything, sorted(self.chosen), self.template,
                           self.mig_from, self.mig_to, self.mig_map.strip()], sort_keys=True)

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
        self._template(store, caller)

    def _template(self, store: Store, caller: Caller) -> None:
        """The filter's template (its version, else the latest) drawn as where its flows
        wait (the figures of that version, or of every version), and its versions offered
        to migrate between."""
        f = self._filter()
        name, version = f.get("template"), f.get("version")
        known = store.template_versions().get(name or "") or []
        if not known:
            self.template, self.template_version, self.versions = "", 0, []
            self.heat, self.waited = Drawing(), False
            return
        drawn = version if version in known else None
        self.template_version, t = store.template(name, drawn)
        figures = operations.durations(store, caller, name, drawn)["circles"]
        self.heat, self.waited = heat_map(template_drawing(t, self.gettext), figures,
                                          self.gettext)
        versions = [str(v) for v in known]
        if name != self.template or versions != self.versions:
            self.template, self.versions = name, versions
            self.mig_from, self.mig_to = proposed(versions)
            if drawn is not None and drawn != known[-1]:
                self.mig_from = str(drawn)

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

    def _run(self, caller: Caller, action: str, params: dict[str, Any] | None = None):
        if not self.everything and not self.chosen:
            return rx.toast.error(self.gettext("Choose instances first, or all that match"))
        try:
            started = operations.start(
                store_for(caller), caller, action,
                self._filter() if self.everything else None,
                None if self.everything else list(self.chosen), params)
        except BpflowError as exc:
            return rx.toast.error(self.explain(exc))
        self.operation, self.action, self.matched = (started["operation"], action,
                                                     started["matched"])
        self.done = self.refused = 0
        self.finished, self.results = False, []
        self.dry_run = bool((params or {}).get("dry_run"))
        if action != "migrate":  # a migration's dry run: the same choice migrated next
            self.chosen = []
        return [OperationsState.follow, rx.toast.info(self.gettext(
            "Started: %(n)s instances", n=started["matched"]))]

    @rx.event
    def set_mig_from(self, value: str):
        self.mig_from = value

    @rx.event
    def set_mig_to(self, value: str):
        self.mig_to = value

    @rx.event
    def set_mig_map(self, value: str):
        self.mig_map = value

    @rx.event
    def migrate(self, dry: bool):
        """Migrate what is chosen (or all that match) of the filter's template from
        `mig_from` to `mig_to` with the map typed: a dry run (`dry`), or the migration
        once a dry run of the same request has finished."""
        return self._guarded(lambda caller: self._migrate(caller, bool(dry)), admin=True)

    def _migrate(self, caller: Caller, dry: bool):
        if not dry and not self.can_migrate:
            return rx.toast.error(self.gettext("Run a dry run of this migration first"))
        if not (self.template and self.mig_from.isdigit() and self.mig_to.isdigit()):
            return rx.toast.error(self.gettext(
                "Choose the version to migrate from and the one to migrate to"))
        try:
            mapping = parse_map(self.mig_map, self.gettext)
        except ValueError as exc:
            return rx.toast.error(str(exc))
        key, before = self._mig_key(), self.operation
        answer = self._run(caller, "migrate", {
            "template": self.template, "from": int(self.mig_from), "to": int(self.mig_to),
            "map": mapping, "dry_run": dry})
        if self.operation != before:  # started (else what was shown stays as it was)
            self.dry_key = key if dry else ""
        return answer

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
