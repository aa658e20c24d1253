"""State of the templates page (admins): every template with its versions (locked ones
marked) and whether it is retired, a drawing preview and per-circle statistics of the
chosen version, uploads (a file or pasted JSON) whose analysis errors are listed with their
JSON pointers, and retiring or restoring a template after a confirmation; the instances
at a circle in a state (a per-circle count opens them), and migrating running instances
from one version to another: a dry run first, whose answer is shown before the migration
may be run (SPEC §11)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import reflex as rx

from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import Unauthorized
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.store import Store
from bpflow_app import routes
from bpflow_app.drawing import Drawing, draw
from bpflow_app.session import SessionState, expired
from engine.errors import BpflowError, DefinitionError

MAX_UPLOAD = 1_000_000  # bytes


@dataclass
class VersionLine:
    version: int
    locked: bool


@dataclass
class TemplateLine:
    name: str
    title: str
    latest: int
    versions: list[VersionLine] = field(default_factory=list)
    retired: bool = False
    retirable: bool = True  # not the outer flow signing in starts


@dataclass
class ErrorLine:
    code: str
    path: str
    message: str


@dataclass
class StatLine:
    circle: str
    waiting: int = 0
    success: int = 0
    failure: int = 0
    skipped: int = 0


@dataclass
class InstanceLink:
    """An instance in a list, with the path of its flow page."""

    id: str
    href: str
    version: int = 0
    status: str = ""
    user: str = ""
    reasons: str = ""  # why a migration refuses it


def link(row: dict[str, Any]) -> InstanceLink:
    return InstanceLink(row["id"], routes.flow(row["id"]), row["version"], row["status"],
                        (row.get("user") or {}).get("username") or "")


def parse_map(text: str) -> dict[str, str]:
    """A migration's map as typed: a JSON object, or one `old -> new` per line (`old = new`
    too); ValueError saying what is wrong."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            found = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the map is not JSON: {exc.msg} at line {exc.lineno}") from None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
            raise ValueError("the map must name circle uris: {\"old\": \"new\"}")
        return found
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        sep = "->" if "->" in line else "="
        old, _, new = line.partition(sep)
        if not _ or not old.strip() or not new.strip():
            raise ValueError(f"line {number} of the map is not 'old -> new': {line.strip()!r}")
        out[old.strip()] = new.strip()
    return out


def template_lines(store: Store) -> list[TemplateLine]:
    """The templates of `store`'s tenant (an admin's own: `store_for(caller)`)."""
    retired = store.retired_templates()
    out = []
    for name, versions in sorted(store.template_versions().items()):
        locked = store.locked_versions(name)
        _, t = store.template(name)
        out.append(TemplateLine(name, t.title or name, versions[-1],
                                [VersionLine(v, v in locked) for v in reversed(versions)],
                                name in retired, name != SIGNIN_TEMPLATE))
    return out


def parse_body(text: str) -> Any:
    """The uploaded JSON, or DefinitionError with one `json` error saying where it broke."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DefinitionError([{"code": "json", "path": "",
                                "message": f"not JSON: {exc.msg} at line {exc.lineno} "
                                           f"column {exc.colno}"}]) from None


class TemplatesState(SessionState):
    items: list[TemplateLine] = []
    name: str = ""
    version: int = 0
    preview: Drawing = Drawing()
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
    # migrating instances of the chosen template from one version to another
    versions: list[str] = []
    mig_from: str = ""
    mig_to: str = ""
    mig_map: str = ""
    mig_checked: str = ""  # the request the dry run shown answered ("": none shown)
    mig_dry: bool = True  # what is shown is a dry run's answer (else a migration's)
    mig_shown: bool = False
    mig_migrated: list[InstanceLink] = []
    mig_refused: list[InstanceLink] = []
    mig_error: str = ""

    @rx.var
    def can_migrate(self) -> bool:
        """The migration may run: the dry run shown answered exactly what is asked now."""
        return self.mig_shown and self.mig_dry and self.mig_checked == self._mig_key()

    def _mig_key(self) -> str:
        return json.dumps([self.name, self.mig_from, self.mig_to, self.mig_map.strip()])

    def _as_admin(self, step: Callable[[Store], Any]) -> Any:
        """`step(store)` for a signed-in admin, on the store of their tenant."""
        return self._guarded(lambda caller: step(store_for(caller)), admin=True)

    def _choose(self, store: Store, name: str, version: int | None) -> None:
        number, t = store.template(name, version)
        self.name, self.version = name, number
        nested = {cid: node.weak for cid, node in t.plan.nodes.items() if node.weak}
        self.preview = draw(t.analysis, {}, expanded=set(t.analysis.get("nested", {})),
                            weak=nested or None)
        stats = store.stats(name)
        self.stats = [StatLine(c, **counts) for c, counts in sorted(stats["circles"].items())]
        self.statuses = stats["instances"]
        versions = [str(v) for v in store.template_versions().get(name, [])]
        if versions != self.versions or not self.mig_to:
            self.versions = versions
            self.mig_to = versions[-1] if versions else ""
            self.mig_from = versions[-2] if len(versions) > 1 else self.mig_to
            self._forget_migration()
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
    def load(self):
        if self._visitor() is None:
            return None
        return self._as_admin(self._refresh)

    @rx.event
    def choose(self, name: str, version: int):
        def choose(store: Store):
            try:
                self._choose(store, name, version)
            except BpflowError as exc:  # gone meanwhile (or never this tenant's)
                return rx.toast.error(str(exc))
            return None
        return self._as_admin(choose)

    @rx.event
    def paste(self, form_data: dict[str, Any]):
        self.busy = True
        yield
        try:
            yield self._as_admin(lambda store: self._store(store,
                                                           str(form_data.get("body") or "")))
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
                yield rx.toast.error("That file is too large for a template")
                return
            yield self._as_admin(lambda store: self._store(
                store, data.decode("utf-8", errors="replace")))
        finally:
            self.busy = False

    def _store(self, store: Store, text: str):
        self.errors, self.outcome = [], ""
        try:
            body = parse_body(text)
            version, created = store.put_template(body)
        except DefinitionError as exc:
            self.errors = [ErrorLine(e["code"], e["path"] or "/", e["message"])
                           for e in exc.errors]
            return rx.toast.error(f"The template has {len(self.errors)} problem(s)")
        except BpflowError as exc:
            return rx.toast.error(str(exc))
        name = body["name"]
        self.outcome = (f"Stored {name} version {version}" if created else
                        f"Identical to {name} version {version}; nothing was stored")
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
    def confirm(self):
        name, retire = self.asked, self.asked_retire
        self.asked = ""
        return self._guarded(lambda caller: self._retire(caller, name, retire), admin=True)

    def _retire(self, caller: Caller, name: str, retire: bool):
        store = store_for(caller)
        if retire and name == SIGNIN_TEMPLATE:
            return rx.toast.error("Signing in starts this flow: it cannot be retired")
        try:
            if retire:
                store.retire_template(name, caller.username)
            else:
                store.restore_template(name)
        except BpflowError as exc:
            return rx.toast.error(str(exc))
        self._refresh(store)
        return rx.toast.success(f"Retired {name}: it can no longer be started" if retire
                                else f"Restored {name}: it can be started again")

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

    # ------------------------------------------------------------- migration
    def _forget_migration(self) -> None:
        self.mig_checked, self.mig_shown, self.mig_error = "", False, ""
        self.mig_migrated, self.mig_refused = [], []

    @rx.event
    def set_mig_from(self, value: str):
        self.mig_from = value
        self._forget_migration()

    @rx.event
    def set_mig_to(self, value: str):
        self.mig_to = value
        self._forget_migration()

    @rx.event
    def set_mig_map(self, value: str):
        if value.strip() != self.mig_map.strip():
            self._forget_migration()
        self.mig_map = value

    @rx.event
    async def dry_run(self):
        """What migrating would do: shown, nothing changed; it enables `migrate`."""
        return await self._migrate(dry=True)

    @rx.event
    async def migrate(self):
        """Migrate, once a dry run of the same request was shown."""
        if not self.can_migrate:
            return rx.toast.error("Run a dry run of this migration first")
        return await self._migrate(dry=False)

    async def _migrate(self, dry: bool):
        """A migration (or its dry run) of what the form asks; the store's work runs on a
        thread (thousands of instances take seconds: the server goes on meanwhile)."""
        try:
            caller = self._admin()
        except Unauthorized as exc:
            return expired(self, exc)
        store = store_for(caller)
        key = self._mig_key()
        self._forget_migration()
        if not (self.mig_from.isdigit() and self.mig_to.isdigit()):
            self.mig_error = "Choose the version to migrate from and the one to migrate to"
            return None
        source, target = int(self.mig_from), int(self.mig_to)
        try:
            mapping = parse_map(self.mig_map)
        except ValueError as exc:
            self.mig_error = str(exc)
            return None
        try:
            outcome, rows = await asyncio.to_thread(
                self._migrated, store, source, target, mapping, dry, caller.username)
        except BpflowError as exc:  # an unknown version, a map naming unknown circles
            self.mig_error = str(exc)
            return None
        self.mig_migrated = [link(rows[i]) for i in outcome["migrated"] if i in rows]
        self.mig_refused = [InstanceLink(r["id"], routes.flow(r["id"]),
                                         rows.get(r["id"], {}).get("version", 0),
                                         rows.get(r["id"], {}).get("status", ""),
                                         reasons="; ".join(r["reasons"]))
                            for r in outcome["refused"]]
        self.mig_dry, self.mig_shown = dry, True
        self.mig_checked = key if dry else ""
        if dry:
            return None
        self._choose(store, self.name, self.version)
        self.mig_dry, self.mig_shown = False, True  # `_choose` keeps the result shown
        return rx.toast.success(f"Migrated {len(self.mig_migrated)} instance(s) to version"
                                f" {target}; {len(self.mig_refused)} refused")

    def _migrated(self, store: Store, source: int, target: int, mapping: dict[str, str],
                  dry: bool, actor: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The store's answer to the migration, and the rows of the instances it names."""
        outcome = store.migrate_instances(self.name, source, target, mapping, dry_run=dry,
                                          actor=actor)
        ids = outcome["migrated"] + [r["id"] for r in outcome["refused"]]
        return outcome, {r["id"]: r for r in store.instance_rows(ids)}
