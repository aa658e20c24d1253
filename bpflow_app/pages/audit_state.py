"""State of the audit log page (`/audit`, admins, SPEC §18): the tenant's audit entries
newest first, a page at a time (the log's id cursor: `before` the oldest shown for older
ones, `after` the newest shown for newer ones), filtered by actor, kind and time (typed
in the browser's zone, read in UTC). Each entry's before and after are flattened into
lines of field, before, after for reading; the entries are read through `bpflow.audit`
(admins only: `bpflow.access`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import reflex as rx

from bpflow import audit
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow_app.boxview import iso_text
from bpflow_app.pages.substitute_state import local_time
from bpflow_app.session import SessionState

PAGE_SIZE = 50
ACTOR_MAX = 100  # characters of the actor filter (a username)
VALUE_MAX = 300  # characters of a value shown (the rest: "…")
NEWEST = 2**62  # a `before` cursor past every entry: the newest page
OPERATOR = ""  # the actor of an entry made on the command line (shown in words)


@dataclass
class Change:
    field: str  # the key in before/after ("" when they are not objects)
    before: str  # a value as read: "" none, "true"/"false", text, items joined by ", "
    after: str


@dataclass
class EntryLine:
    id: int
    at: str  # ISO (components/when.py shows it)
    actor: str  # OPERATOR: the installation's operator
    kind: str
    target: str
    changes: list[Change]


def shown(value: Any) -> str:
    """A value of an entry's before or after as a person reads it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        text = ", ".join(str(v) for v in value)
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    else:
        text = str(value)
    return text if len(text) <= VALUE_MAX else text[:VALUE_MAX - 1] + "…"


def changes(before: Any, after: Any) -> list[Change]:
    """Field by field when both sides are objects (or missing), else one line."""
    if all(isinstance(v, dict) or v is None for v in (before, after)):
        old, new = before or {}, after or {}
        keys = list(old) + [k for k in new if k not in old]
        return [Change(str(k), shown(old.get(k)), shown(new.get(k))) for k in keys]
    return [Change("", shown(before), shown(after))]


def entry_line(e: dict[str, Any]) -> EntryLine:
    return EntryLine(e["id"], iso_text(e["at"]), e["actor"] or OPERATOR, e["kind"],
                     e["target"], changes(e["before"], e["after"]))


class AuditState(SessionState):
    entries: list[EntryLine] = []
    actor: str = ""  # the filters in force
    kind: str = ""
    since: str = ""  # as typed (datetime-local), in the browser's zone
    until: str = ""
    offset: str = "0"  # the browser's getTimezoneOffset() when the filters were applied
    older: bool = False  # whether there are entries before the oldest shown
    newer: bool = False  # whether there are entries after the newest shown
    errors: dict[str, str] = {}

    @rx.event
    def load(self):
        if self._visitor() is None:
            return None
        return self._guarded(lambda caller: self._read(caller), admin=True)

    @rx.event
    def apply(self, form_data: dict[str, Any]):
        actor = str(form_data.get("actor") or "").strip()[:ACTOR_MAX]
        kind = str(form_data.get("kind") or "")
        self.actor, self.kind = actor, kind if kind in audit.KINDS else ""
        self.since = str(form_data.get("since") or "")[:40]
        self.until = str(form_data.get("until") or "")[:40]
        self.offset = str(form_data.get("tz") or "0")[:8]
        return self._guarded(lambda caller: self._read(caller), admin=True)

    @rx.event
    def clear(self):
        self.actor = self.kind = self.since = self.until = ""
        said = self._guarded(lambda caller: self._read(caller), admin=True)
        return [rx.set_value(f"audit-{name}", "") for name in ("actor", "since", "until")
                ] + ([said] if said is not None else [])

    @rx.event
    def set_kind(self, kind: str):
        self.kind = kind if kind in audit.KINDS else ""

    @rx.event
    def older_page(self):
        before = self.entries[-1].id if self.entries else None
        return self._guarded(lambda caller: self._read(caller, before=before), admin=True)

    @rx.event
    def newer_page(self):
        after = self.entries[0].id if self.entries else None
        return self._guarded(lambda caller: self._read(caller, after=after), admin=True)

    def _times(self) -> tuple[datetime | None, datetime | None] | None:
        """The time filters in UTC; None (and `errors` said) when one is unreadable."""
        read = {name: local_time(text, self.offset) if text else None
                for name, text in (("since", self.since), ("until", self.until))}
        self.errors = {name: self.gettext("Enter a date and time")
                       for name, text in (("since", self.since), ("until", self.until))
                       if text and read[name] is None}
        return None if self.errors else (read["since"], read["until"])

    def _read(self, caller: Caller, *, before: int | None = None,
              after: int | None = None):
        """The page of entries before `before` (None with `after` None: the newest) or
        after `after` (the next newer ones), newest first."""
        times = self._times()
        if times is None:
            return rx.toast.error(self.gettext("Please check the filters"))
        store = store_for(caller)
        filters = {"actor": self.actor or None, "kind": self.kind or None,
                   "since": times[0], "until": times[1]}
        if after is not None:  # oldest first from `after`: the page just newer
            found = audit.entries(store, caller, after, PAGE_SIZE + 1, **filters)
            if len(found) <= PAGE_SIZE:  # no page newer than that one: the newest
                return self._read(caller)
            found, self.newer, self.older = found[:PAGE_SIZE][::-1], True, True
        else:
            found = audit.entries(store, caller, None, PAGE_SIZE + 1,
                                  before=NEWEST if before is None else before, **filters)
            self.older = len(found) > PAGE_SIZE
            found = found[:PAGE_SIZE]
            self.newer = before is not None
        if not found and before is not None:  # read past the oldest: start again
            return self._read(caller)
        self.entries = [entry_line(e) for e in found]
        return None
