"""State of the substitute page (`/substitute`, "My substitute" in the user menu; an
admin's for someone with `?user=NAME`, from the users page): the substitution as it is
(whom, from, until, for which templates, active or not) and setting or clearing it, all
through `bpflow.substitutes` (who may is `bpflow.access`'s)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import reflex as rx

from bpflow import substitutes
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import BpflowError
from bpflow_app.session import SessionState

STATUSES = ("none", "active", "upcoming", "ended")


def local_time(text: str, offset_minutes: Any) -> datetime | None:
    """A `datetime-local` input's value (`2026-12-01T09:00`, the browser's zone) in UTC,
    with the browser's `getTimezoneOffset()` (minutes behind UTC); None when unreadable."""
    try:
        naive = datetime.fromisoformat(text.strip())
        offset = int(str(offset_minutes or "0").strip())
    except (ValueError, AttributeError):
        return None
    if naive.tzinfo is not None or not -24 * 60 <= offset <= 24 * 60:
        return None
    return (naive + timedelta(minutes=offset)).replace(tzinfo=UTC)


def template_list(text: str) -> list[str] | None:
    """Template names separated by commas or spaces; None for none (every template)."""
    names = [t for t in text.replace(",", " ").split() if t]
    return names or None


class SubstituteState(SessionState):
    whose: str = ""  # whose substitution the page shows ("" until loaded)
    mine: bool = True  # the caller's own
    status: str = "none"  # one of STATUSES
    to: str = ""
    starts: str = ""  # ISO 8601, shown with components/when.py
    until: str = ""
    templates: list[str] = []
    set_by: str = ""
    people: list[str] = []  # whom they may name
    errors: dict[str, str] = {}  # by field: to, from, until
    busy: bool = False

    def _target(self, caller: Caller) -> str:
        asked = str(self.router.url.query_parameters.get("user") or "").strip()
        return asked[:100] or caller.username

    def _fetch(self, caller: Caller) -> Any:
        store = store_for(caller)
        self.whose = self._target(caller)
        self.mine = self.whose == caller.username
        try:
            found = substitutes.get(store, caller, self.whose)
        except BpflowError as exc:
            self.status = "none"
            return rx.toast.error(self.explain(exc))
        self.people = [n for n in store.usernames() if n != self.whose]
        self._show(found)
        return None

    def _show(self, found: dict[str, Any] | None) -> None:
        if found is None:
            self.status, self.to, self.starts, self.until = "none", "", "", ""
            self.templates, self.set_by = [], ""
            return
        self.to, self.starts, self.until = found["to"], found["from"], found["until"]
        self.templates, self.set_by = list(found["templates"] or []), found["set_by"]
        self.status = "active" if found["active"] else (
            "upcoming" if datetime.fromisoformat(found["from"]) > datetime.now(UTC)
            else "ended")

    @rx.event
    def load(self):
        self.errors = {}
        if self._visitor() is None:
            return None
        return self._guarded(self._fetch)

    @rx.event
    def save(self, form_data: dict[str, Any]):
        self.busy = True
        yield
        try:
            yield self._guarded(lambda caller: self._save(caller, form_data))
        finally:
            self.busy = False

    def _save(self, caller: Caller, form_data: dict[str, Any]) -> Any:
        to = str(form_data.get("to") or "").strip()
        starts = local_time(str(form_data.get("from") or ""), form_data.get("tz"))
        ends = local_time(str(form_data.get("until") or ""), form_data.get("tz"))
        errors = {}
        if not to:
            errors["to"] = self.gettext("Choose a substitute")
        if starts is None:
            errors["from"] = self.gettext("Enter a date and time")
        if ends is None:
            errors["until"] = self.gettext("Enter a date and time")
        self.errors = errors
        if errors:
            return None
        assert starts is not None and ends is not None
        try:
            found = substitutes.put(store_for(caller), caller, self.whose or caller.username,
                                    to, starts, ends,
                                    template_list(str(form_data.get("templates") or "")))
        except BpflowError as exc:
            return rx.toast.error(self.explain(exc))
        self._show(found)
        return rx.toast.success(self.gettext("%(name)s is the substitute now", name=to))

    @rx.event
    def clear(self):
        return self._guarded(self._clear)

    def _clear(self, caller: Caller) -> Any:
        try:
            substitutes.clear(store_for(caller), caller, self.whose or caller.username)
        except BpflowError as exc:
            return rx.toast.error(self.explain(exc))
        self._show(None)
        return rx.toast.success(self.gettext("The substitute was cleared"))
