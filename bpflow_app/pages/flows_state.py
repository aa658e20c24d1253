"""State of My flows: the templates the user may start, the user's flows a page at a time
through the filters (status, template, a text), the flows others started that the user
takes part in, and starting a flow (one per click: a double click starts one)."""

from __future__ import annotations

import secrets
from typing import Any

import reflex as rx

from bpflow import moves
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import Unauthorized
from bpflow.forms import FormError
from bpflow.languages import pick
from bpflow_app import routes
from bpflow_app.flowsview import (
    ANY,
    InstanceLine,
    Startable,
    found_instances,
    instance_lines,
    my_flows,
    parse_inputs,
    startables,
    template_choices,
)
from bpflow_app.session import SessionState, expired
from engine.errors import BpflowError
from engine.instance import INSTANCE_STATUSES

PAGE_SIZE = 10
TAKING_PART = 50  # flows others started that the user takes part in, newest first
STATUSES = [ANY, *INSTANCE_STATUSES]


class FlowsState(SessionState):
    startables: list[Startable] = []
    instances: list[InstanceLine] = []
    total: int = 0
    page: int = 0
    loading: bool = True
    starting: str = ""
    status: str = ANY  # the filters
    template: str = ANY
    query: str = ""
    templates: list[str] = [ANY]  # the template filter's choices, by name
    template_titles: dict[str, str] = {}  # and their titles in the reader's language
    cut: bool = False  # the text search looked at the newest SEARCH_MOST flows only
    taking_part: list[InstanceLine] = []
    _start_key: str = ""  # the Idempotency-Key of this page's starts (a double click)

    @rx.var
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))

    @rx.var
    def filtered(self) -> bool:
        return self.status != ANY or self.template != ANY or bool(self.query.strip())

    @rx.event
    def load(self):
        caller = self._visitor()
        if caller is None:
            return None
        lang = self._language()
        self.startables = startables(caller, lang=lang)
        self._start_key = secrets.token_urlsafe(12)  # kept until the page is loaded again
        store = store_for(caller)
        choices = template_choices(store, lang)
        self.templates = [ANY, *(name for name, _ in choices)]
        self.template_titles = dict(choices)
        self._list(caller)
        self.taking_part = instance_lines(store, store.taking_part(caller, TAKING_PART),
                                          caller, lang)
        self.loading = False
        return None

    def _list(self, caller: Caller) -> None:
        """The page of the user's flows that the filters let through."""
        store = store_for(caller)
        template = None if self.template == ANY else self.template
        status = None if self.status == ANY else self.status
        text, offset = self.query.strip(), self.page * PAGE_SIZE
        lang = self._language()
        if text:
            self.instances, self.total, self.cut = found_instances(
                store, caller, text, offset, PAGE_SIZE, template, status, lang)
            return
        self.instances, self.total = my_flows(store, caller, offset, PAGE_SIZE, template,
                                              status, lang)
        self.cut = False

    def _relist(self):
        """Show the filtered list again, from its first page."""
        self.page = 0
        return self._guarded(self._list)

    @rx.event
    def turn(self, delta: int):
        self.page = min(max(0, self.page + delta), self.pages - 1)
        return self._guarded(self._list)

    @rx.event
    def set_status(self, value: str):
        self.status = value if value in STATUSES else ANY
        return self._relist()

    @rx.event
    def set_template(self, value: str):
        self.template = value if value in self.templates else ANY
        return self._relist()

    @rx.event
    def set_query(self, value: str):
        self.query = str(value)[:200]
        return self._relist()

    @rx.event
    def clear_filters(self):
        self.status, self.template, self.query = ANY, ANY, ""
        return self._relist()

    @rx.event
    def start(self, form_data: dict[str, Any]):
        name = str(form_data.pop("__template", ""))
        self.starting = name
        yield
        try:
            yield self._start(name, form_data)
        finally:
            self.starting = ""

    def _start(self, name: str, form_data: dict[str, Any]):
        lang = self._language()
        title = next((t.title for t in self.startables if t.name == name), name)
        try:
            caller = self._caller()
            _, template = store_for(caller).template(name)
            title = pick(template.title, lang) or name
            inputs = parse_inputs(template, form_data, self.gettext)
            inst = self._start_once(caller, name, inputs)
        except Unauthorized as exc:
            return expired(self, exc)
        except FormError as exc:
            self.startables = startables(caller, {name: exc.errors}, lang)
            return rx.toast.error(self.gettext("Please check the inputs"))
        except BpflowError as exc:
            return rx.toast.error(self.gettext("Could not start %(title)s: %(reason)s",
                                               title=title, reason=self.explain(exc)))
        return [rx.redirect(routes.flow(inst.id)),
                rx.toast.success(self.gettext("Started %(title)s", title=title))]

    def _start_once(self, caller: Caller, name: str, inputs: dict[str, Any]):
        """Start `name` under this page's key: a second click (queued behind the first)
        gets the instance the first one started."""
        self._start_key = self._start_key or secrets.token_urlsafe(12)
        return moves.start(store_for(caller), caller, name, inputs,
                           key=f"{self._start_key}:{name}")[0]
