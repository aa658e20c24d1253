"""State of the templates page (admins): every template with its versions (locked ones
marked) and whether it is retired, a drawing preview and per-circle statistics of the
chosen version, uploads (a file or pasted JSON) whose analysis errors are listed with their
JSON pointers, and retiring or restoring a template after a confirmation."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import reflex as rx

from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.store import Store
from bpflow_app.drawing import Drawing, draw
from bpflow_app.session import SessionState
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
