"""State of the templates page (admins): every template with its versions (locked ones
marked) and whether it is retired, a drawing preview and per-circle statistics of the
chosen version, uploads (a file or pasted JSON) whose analysis errors are listed with their
JSON pointers, retiring or restoring a template after a confirmation, and the instances at
a circle in a state (a per-circle count opens them).

Migrating instances between the chosen template's versions is `MigrationState`'s: every
handler that may change the choice offers it there (`_offered`), in the same event."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import reflex as rx

from bpflow import admin, drafts
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.store import Store
from bpflow_app.drawing import Drawing
from bpflow_app.heatview import heat_map, template_drawing
from bpflow_app.pages.migration_state import MigrationState
from bpflow_app.session import SessionState
from bpflow_app.templatesview import (
    DraftLine,
    ErrorLine,
    InstanceLink,
    StatLine,
    TemplateLine,
    in_every_language,
    link,
    parse_body,
    template_lines,
)
from engine.errors import BpflowError, DefinitionError

MAX_UPLOAD = 1_000_000  # bytes


class TemplatesState(SessionState):
    items: list[TemplateLine] = []
    name: str = ""
    version: int = 0
    # the chosen template's title and description: language -> the text its readers see
    titles: dict[str, str] = {}
    descriptions: dict[str, str] = {}
    preview: Drawing = Drawing()
    waits: Drawing = Drawing()  # the preview as a heat map of where flows wait (SPEC §18)
    waited: bool = False  # the chosen template's flows have waited somewhere
    heat: bool = False  # the heat map shown instead of the preview
    stats: list[StatLine] = []
    statuses: dict[str, int] = {}
    errors: list[ErrorLine] = []
    outcome: str = ""
    busy: bool = False
    loading: bool = True
    asked: str = ""  # the template whose retirement (or restoring) waits for a confirmation
    asked_retire: bool = True  # retire it (else restore it)
    # the instances at one circle in one state (a count of the per-circle table, opened)
    at_circle: str = ""
    at_state: str = ""
    at_items: list[InstanceLink] = []
    at_total: int = 0
    drafts: list[DraftLine] = []  # the designer's drafts (an admin sees the tenant's)
    _versions: list[str] = []  # the chosen template's versions, oldest first

    async def _offered(self, answer: Any) -> Any:
        """A handler's `answer`, once the migration panel knows the template chosen now."""
        migration = await self.get_state(MigrationState)
        migration.offer(self.name, self._versions if self.name else [])
        return answer

    def _as_admin(self, step: Callable[[Store], Any]) -> Any:
        """`step(store)` for a signed-in admin, on the store of their tenant."""
        return self._guarded(lambda caller: step(store_for(caller)), admin=True)

    def _choose(self, store: Store, name: str, version: int | None) -> None:
        number, t = store.template(name, version)
        self.name, self.version = name, number
        self.titles = in_every_language(t.title, name)
        self.descriptions = in_every_language(t.description)
        self.preview = template_drawing(t, self.gettext)
        # where flows wait: every version's figures (as the counts below)
        self.waits, self.waited = heat_map(self.preview, store.durations(name)["circles"],
                                           self.gettext)
        stats = store.stats(name)
        self.stats = [StatLine(c, **counts) for c, counts in sorted(stats["circles"].items())]
        self.statuses = stats["instances"]
        self._versions = [str(v) for v in store.template_versions().get(name, [])]
        if self.at_circle:
            self._at(store)

    def _refresh(self, store: Store) -> None:
        self.items = template_lines(store)
        if self.name and not any(t.name == self.name for t in self.items):
            self.name, self.version = "", 0  # chosen in another session (or tenant)
        if not self.name and self.items:
            self.name = self.items[0].name
        if self.name:
            self._choose(store, self.name, self.version or None)
        self.loading = False

    @rx.event
    def show_heat(self, on: bool):
        self.heat = bool(on)

    @rx.event
    async def load(self):
        if self._visitor() is None:
            return None
        self._guarded(self._drafts, admin=True)
        return await self._offered(self._as_admin(self._refresh))

    def _drafts(self, caller: Caller) -> None:
        self.drafts = [DraftLine(d.id, d.name, d.author,
                                 datetime.fromtimestamp(d.updated, UTC).isoformat())
                       for d in drafts.list_drafts(store_for(caller), caller)]

    @rx.event
    async def choose(self, name: str, version: int):
        def choose(store: Store):
            try:
                self._choose(store, name, version)
            except BpflowError as exc:  # gone meanwhile (or never this tenant's)
                return rx.toast.error(self.explain(exc))
            return None
        return await self._offered(self._as_admin(choose))

    @rx.event
    async def paste(self, form_data: dict[str, Any]):
        self.busy = True
        yield
        try:
            yield await self._offered(self._guarded(
                lambda caller: self._store(caller, str(form_data.get("body") or "")),
                admin=True))
        finally:
            self.busy = False

    @rx.event
    async def upload(self, files: list[rx.UploadFile]):
        if not files:
            return
        self.busy = True
        yield
        try:
            data = await files[0].read()
            if len(data) > MAX_UPLOAD:
                yield rx.toast.error(self.gettext("That file is too large for a template"))
                return
            yield await self._offered(self._guarded(lambda caller: self._store(
                caller, data.decode("utf-8", errors="replace")), admin=True))
        finally:
            self.busy = False

    def _store(self, caller: Caller, text: str):
        store = store_for(caller)
        self.errors, self.outcome = [], ""
        try:
            body = parse_body(text, self.gettext)
            version, created = admin.upload_template(store, caller, body)
        except DefinitionError as exc:
            self.errors = [ErrorLine(e["code"], e["path"] or "/", self.say(e["message"]))
                           for e in exc.errors]
            return rx.toast.error(self.ngettext(
                "The template has %(n)s problem", "The template has %(n)s problems",
                len(self.errors)))
        except BpflowError as exc:
            return rx.toast.error(self.explain(exc))
        name = body["name"]
        self.outcome = (
            self.gettext("Stored %(name)s version %(version)s", name=name, version=version)
            if created else
            self.gettext("Identical to %(name)s version %(version)s; nothing was stored",
                         name=name, version=version))
        self.name, self.version = name, version
        self._refresh(store)
        return rx.toast.success(self.outcome)

    @rx.event
    def ask(self, name: str, retire: bool):
        """Open the confirmation of retiring (or restoring) `name`."""
        self.asked, self.asked_retire = name, retire

    @rx.event
    def cancel(self):
        self.asked = ""

    @rx.event
    async def confirm(self):
        name, retire = self.asked, self.asked_retire
        self.asked = ""
        return await self._offered(self._guarded(
            lambda caller: self._retire(caller, name, retire), admin=True))

    def _retire(self, caller: Caller, name: str, retire: bool):
        store = store_for(caller)
        if retire and name == SIGNIN_TEMPLATE:
            return rx.toast.error(self.gettext(
                "Signing in starts this flow: it cannot be retired"))
        try:
            if retire:
                admin.retire_template(store, caller, name)
            else:
                admin.restore_template(store, caller, name)
        except BpflowError as exc:
            return rx.toast.error(self.explain(exc))
        self._refresh(store)
        return rx.toast.success(
            self.gettext("Retired %(name)s: it can no longer be started", name=name)
            if retire else
            self.gettext("Restored %(name)s: it can be started again", name=name))

    # ------------------------------------------------------- where a circle is
    @rx.event
    def show_at(self, circle: str, state: str):
        """List the instances whose `circle` is in `state` (of every version)."""
        self.at_circle, self.at_state = circle, state
        return self._as_admin(self._at)

    @rx.event
    def close_at(self):
        self.at_circle, self.at_items, self.at_total = "", [], 0

    def _at(self, store: Store) -> None:
        rows, total = store.circle_instances(self.name, self.at_circle, self.at_state,
                                             limit=100)
        self.at_items, self.at_total = [link(r) for r in rows], total
