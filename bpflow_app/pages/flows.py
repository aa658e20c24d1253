"""My flows: the templates the user may start (with a form for their declared inputs),
the user's instances, newest first, a page at a time, filtered by status, template and a
text (template, id or last step), and the flows others started that the user takes part
in (named in a task, or sent approval mail)."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

import reflex as rx

from bpflow.access import Caller, may_start, startable
from bpflow.backend import store_for
from bpflow.errors import Unauthorized
from bpflow.forms import FormError, validate
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.store.public import AlreadyStarted
from bpflow_app import routes
from bpflow_app.boxview import FieldView, clock_text, field_view
from bpflow_app.components.fields import fields
from bpflow_app.components.ui import empty_state, page_header, state_badge
from bpflow_app.session import SessionState, expired
from engine.errors import BpflowError
from engine.model import FIELD_TYPES, Field, Template

PAGE_SIZE = 10
OUTER_MOST = 1000  # outer flows of one user looked at (one per sign-in series)
SEARCH_MOST = 2000  # a text search looks at the user's newest flows, this many
TAKING_PART = 50  # flows others started that the user takes part in, newest first
ANY = "all"  # the filters' "no filter" choice
STATUSES = [ANY, "running", "completed", "failed", "suspended", "terminated"]
STEP_WORDS = {"circle_succeeded": "succeeded", "circle_failed": "failed",
              "circle_skipped": "skipped", "circle_reset": "reset",
              "circle_retry_scheduled": "failed, retry scheduled",
              "circle_pending": "waiting for its action", "circle_ready": "ready"}


@dataclass
class Startable:
    name: str
    title: str
    description: str
    version: int
    inputs: list[FieldView] = field(default_factory=list)


@dataclass
class InstanceLine:
    id: str
    template: str
    version: int
    status: str
    last_step: str
    updated: str
    starter: str = ""


def input_fields(template: Template) -> tuple[Field, ...]:
    """The declared `workflow.input` as form fields (structured types typed as JSON)."""
    return tuple(Field(k, t if t in FIELD_TYPES else "text",
                       k if t in FIELD_TYPES else f"{k} (JSON)", True)
                 for k, t in template.inputs.items())


def parse_inputs(template: Template, form_data: dict[str, Any]) -> dict[str, Any]:
    """Typed inputs from the start form, or FormError per field."""
    values, _ = validate(input_fields(template), form_data)
    errors = {}
    for k, t in template.inputs.items():
        if t not in FIELD_TYPES and isinstance(values.get(k), str):
            try:
                values[k] = json.loads(values[k])
            except ValueError:
                errors[k] = f"{k} must be JSON"
    if errors:
        raise FormError(errors)
    return values


def startables(caller: Caller, errors: dict[str, dict[str, str]] | None = None
               ) -> list[Startable]:
    """The templates `caller` may start (not retired, `starters` allowing them)."""
    store, errors = store_for(caller), errors or {}
    out = []
    for name, version, t in store.startable_templates(lambda body: may_start(caller, body)):
        if name == SIGNIN_TEMPLATE:
            continue  # the outer flow (the session), which signing in starts
        mine = errors.get(name, {})
        out.append(Startable(name, t.title or name, t.description, version,
                             [field_view(f"start-{name}", f, None, mine.get(f.name, ""))
                              for f in input_fields(t)]))
    return out


def _listed_before(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the store lists row `a` before row `b` (newest first, then by id)."""
    return a["created_at"] > b["created_at"] or (a["created_at"] == b["created_at"]
                                                 and a["id"] < b["id"])


def business_instances(store: Any, user_id: int, offset: int, limit: int,
                       template: str | None = None,
                       status: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """A page of the user's instances (of one template, in one status, if given), newest
    first, and their total, without the user's outer flows (`signin`: the session, which
    the frame shows, never a flow anyone started). A sign-in continues the same outer
    flow, so they are few: the page is read with room for them, and each row's place
    counts the outer flows listed before it."""
    if template == SIGNIN_TEMPLATE:
        return [], 0
    if template:
        return store.list_instances(user_id, template, status, limit, offset)
    outer, skipped = store.list_instances(user_id, SIGNIN_TEMPLATE, status, OUTER_MOST)
    if not skipped:
        return store.list_instances(user_id, None, status, limit, offset)
    rows, total = store.list_instances(user_id, None, status, limit + skipped, offset)
    outer_ids = {r["id"] for r in outer}
    before = sum(_listed_before(o, rows[0]) for o in outer) if rows else 0
    page = []
    for place, row in enumerate(rows, start=offset):
        if row["id"] in outer_ids:
            before += 1
        elif offset <= place - before < offset + limit:
            page.append(row)
    return page, total - skipped


def instance_lines(rows: list[dict[str, Any]],
                   steps: dict[str, dict[str, Any]]) -> list[InstanceLine]:
    out = []
    for r in rows:
        step = steps.get(r["id"])
        text = f"{step['circle']} {STEP_WORDS.get(step['kind'], step['kind'])}" if step else ""
        starter = r.get("user") if isinstance(r.get("user"), dict) else {}
        out.append(InstanceLine(r["id"], r["template"], r["version"], r["status"], text,
                                clock_text(r["updated_at"]), str(starter.get("username", ""))))
    return out


def matches(line: InstanceLine, text: str) -> bool:
    """Whether a flow's template, id or last step holds `text` (any case)."""
    text = text.casefold()
    return any(text in v.casefold() for v in (line.template, line.id, line.last_step))


def found_instances(store: Any, user_id: int, text: str, offset: int, limit: int,
                    template: str | None = None, status: str | None = None
                    ) -> tuple[list[InstanceLine], int, bool]:
    """A page of the user's flows whose template, id or last step holds `text`, their
    total, and whether the search stopped at the newest `SEARCH_MOST`."""
    rows, total = business_instances(store, user_id, 0, SEARCH_MOST, template, status)
    lines = [line for line in instance_lines(rows, store.last_steps([r["id"] for r in rows]))
             if matches(line, text)]
    return lines[offset:offset + limit], len(lines), total > SEARCH_MOST


def template_choices(store: Any) -> list[str]:
    """The template filter's choices: every template but the outer flow, by name."""
    return [ANY] + sorted(n for n in store.template_versions() if n != SIGNIN_TEMPLATE)


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
    templates: list[str] = [ANY]
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
        self.startables = startables(caller)
        self._start_key = secrets.token_urlsafe(12)  # kept until the page is loaded again
        store = store_for(caller)
        self.templates = template_choices(store)
        self._list(caller)
        rows = store.taking_part(caller, TAKING_PART)
        self.taking_part = instance_lines(rows, store.last_steps([r["id"] for r in rows]))
        self.loading = False
        return None

    def _list(self, caller: Caller) -> None:
        """The page of the user's flows that the filters let through."""
        store = store_for(caller)
        template = None if self.template == ANY else self.template
        status = None if self.status == ANY else self.status
        text, offset = self.query.strip(), self.page * PAGE_SIZE
        if text:
            self.instances, self.total, self.cut = found_instances(
                store, caller.id, text, offset, PAGE_SIZE, template, status)
            return
        rows, self.total = business_instances(store, caller.id, offset, PAGE_SIZE, template,
                                              status)
        self.instances, self.cut = instance_lines(
            rows, store.last_steps([r["id"] for r in rows])), False

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
        try:
            caller = self._caller()
            _, template = store_for(caller).template(name)
            inputs = parse_inputs(template, form_data)
            inst = self._start_once(caller, name, inputs)
        except Unauthorized as exc:
            return expired(self, exc)
        except FormError as exc:
            self.startables = startables(caller, {name: exc.errors})
            return rx.toast.error("Please check the inputs")
        except BpflowError as exc:
            return rx.toast.error(f"Could not start {name}: {exc}")
        return [rx.redirect(routes.flow(inst.id)), rx.toast.success(f"Started {name}")]

    def _start_once(self, caller: Caller, name: str, inputs: dict[str, Any]):
        """Start `name` under this page's key: a second click (queued behind the first)
        gets the instance the first one started."""
        self._start_key = self._start_key or secrets.token_urlsafe(12)
        store = store_for(caller)
        try:
            return store.start(name, inputs, caller.as_user(),
                               instance_id=store.keyed_id(caller.id, f"{self._start_key}:{name}"),
                               admit=lambda body: startable(caller, body))
        except AlreadyStarted as exc:
            return exc.instance


def _startable(t: rx.Var[Startable]) -> rx.Component:
    return rx.card(
        rx.form(
            rx.vstack(
                rx.hstack(rx.heading(t.title, size="4", as_="h3"),
                          rx.badge("v", t.version, variant="surface"),
                          justify="between", width="100%", align="center"),
                rx.text(t.description, size="2", color_scheme="gray"),
                fields(t.inputs),
                rx.el.input(type="hidden", name="__template", value=t.name),
                rx.button(rx.icon("play", size=16), "Start", type="submit",
                          loading=FlowsState.starting == t.name,
                          aria_label="Start " + t.name, id="start-" + t.name),
                spacing="3", align="start", height="100%",
            ),
            on_submit=FlowsState.start, reset_on_submit=False,
        ),
        width="100%",
    )


# On a phone the table keeps three columns (flow, status, Open) and the last step goes
# under the flow's name, so the Open link stays on the screen.
WIDE = ["none", "table-cell"]


def _instance_row(i: rx.Var[InstanceLine]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.link(i.template, href=routes.flow(i.id), weight="medium"),
                      rx.text(i.last_step, size="1", color_scheme="gray",
                              display=["block", "none"]),
                      overflow_wrap="anywhere"),
        rx.table.cell(state_badge(i.status)),
        rx.table.cell(rx.text(i.last_step, size="2"), display=WIDE),
        rx.table.cell(rx.text(i.updated, size="1", color_scheme="gray"),
                      display=["none", "none", "table-cell"]),
        rx.table.cell(rx.link("Open", href=routes.flow(i.id), aria_label="Open " + i.id)),
        class_name="instance-row",
    )


def _instances() -> rx.Component:
    table = rx.table.root(
        rx.table.header(rx.table.row(
            rx.table.column_header_cell("Flow"), rx.table.column_header_cell("Status"),
            rx.table.column_header_cell("Last step", display=WIDE),
            rx.table.column_header_cell("Updated", display=["none", "none", "table-cell"]),
            rx.table.column_header_cell(""))),
        rx.table.body(rx.foreach(FlowsState.instances, _instance_row)),
        width="100%", variant="surface",
    )
    pager = rx.hstack(
        rx.button(rx.icon("chevron-left", size=16), "Newer", variant="soft",
                  on_click=FlowsState.turn(-1), disabled=FlowsState.page == 0),
        rx.text("Page ", FlowsState.page + 1, " of ", FlowsState.pages, size="2"),
        rx.button("Older", rx.icon("chevron-right", size=16), variant="soft",
                  on_click=FlowsState.turn(1),
                  disabled=FlowsState.page + 1 >= FlowsState.pages),
        justify="end", align="center", width="100%",
    )
    return rx.cond(
        FlowsState.total > 0,
        rx.vstack(rx.box(table, overflow_x="auto", width="100%"), pager, width="100%"),
        rx.cond(FlowsState.filtered,
                empty_state("search-x", "No flow matches",
                            "Nothing of yours matches these filters.",
                            rx.button("Clear the filters", variant="soft",
                                      on_click=FlowsState.clear_filters)),
                empty_state("workflow", "No flows yet",
                            "Start one of the templates above; it will be listed here.")))


def _filters() -> rx.Component:
    S = FlowsState
    return rx.flex(
        rx.input(rx.input.slot(rx.icon("search", size=16)), value=S.query,
                 on_change=S.set_query, debounce_timeout=300,
                 placeholder="Search template, id or last step", id="flows-search",
                 aria_label="Search my flows", flex="1", min_width="200px"),
        rx.select.root(
            rx.select.trigger(id="flows-status", aria_label="Status"),
            rx.select.content(*[rx.select.item("Any status" if v == ANY else v, value=v)
                                for v in STATUSES]),
            value=S.status, on_change=S.set_status),
        rx.select.root(
            rx.select.trigger(id="flows-template", aria_label="Template"),
            rx.select.content(rx.foreach(S.templates, lambda v: rx.select.item(
                rx.cond(v == ANY, "Any template", v), value=v))),
            value=S.template, on_change=S.set_template),
        rx.cond(S.filtered, rx.button("Clear", variant="ghost", on_click=S.clear_filters,
                                      id="flows-clear")),
        spacing="2", wrap="wrap", align="center", width="100%", id="flows-filters",
    )


def _taking_part_row(i: rx.Var[InstanceLine]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.link(i.template, href=routes.flow(i.id), weight="medium"),
                      rx.text("started by ", i.starter, size="1", color_scheme="gray"),
                      overflow_wrap="anywhere"),
        rx.table.cell(state_badge(i.status)),
        rx.table.cell(rx.text(i.last_step, size="2"), display=WIDE),
        rx.table.cell(rx.link("Open", href=routes.flow(i.id), aria_label="Open " + i.id)),
        class_name="taking-part-row", custom_attrs={"data-instance": i.id},
    )


def _taking_part() -> rx.Component:
    table = rx.table.root(
        rx.table.header(rx.table.row(
            rx.table.column_header_cell("Flow"), rx.table.column_header_cell("Status"),
            rx.table.column_header_cell("Last step", display=WIDE),
            rx.table.column_header_cell(""))),
        rx.table.body(rx.foreach(FlowsState.taking_part, _taking_part_row)),
        width="100%", variant="surface",
    )
    return rx.cond(FlowsState.taking_part.length() > 0,
                   rx.box(table, overflow_x="auto", width="100%", id="taking-part"),
                   empty_state("users", "Nothing here yet",
                               "Flows others started appear here once they ask you for"
                               " something (a task or an approval)."))


def flows_page() -> rx.Component:
    return rx.vstack(
        page_header("My flows", "Start a flow, or continue one where you left it."),
        rx.heading("Start a flow", size="4", as_="h2"),
        rx.cond(
            FlowsState.loading,
            rx.center(rx.spinner(), width="100%", padding="24px"),
            rx.grid(rx.foreach(FlowsState.startables, _startable),
                    columns=rx.breakpoints(initial="1", sm="2", lg="3"), spacing="4",
                    width="100%"),
        ),
        rx.heading("Your flows", size="4", as_="h2", margin_top="16px"),
        _filters(),
        rx.cond(FlowsState.cut, rx.text(
            f"The search looked at your newest {SEARCH_MOST:,} flows.", size="1",
            color_scheme="gray")),
        rx.cond(FlowsState.loading, rx.skeleton(height="120px", width="100%"), _instances()),
        rx.heading("Taking part", size="4", as_="h2", margin_top="16px"),
        rx.text("Flows others started that asked you for something.", size="2",
                color_scheme="gray"),
        rx.cond(FlowsState.loading, rx.skeleton(height="80px", width="100%"),
                _taking_part()),
        spacing="3", width="100%",
    )
