"""My flows: the templates the user may start (with a form for their declared inputs),
the user's flows, newest first, a page at a time, filtered by status, template and a
text (template, id or last step), and the flows others started that the user takes part
in (named in a task, or sent approval mail). Each flow is listed by its template's
title, with a summary (its first form's values) and whom it waits for."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.catalogs import N_
from bpflow_app.components.fields import fields
from bpflow_app.components.names import NO, by, data, named
from bpflow_app.components.ui import empty_state, page_header, state_badge, visually_hidden
from bpflow_app.components.when import number, when
from bpflow_app.flowsview import ANY, SEARCH_MOST, InstanceLine, Startable
from bpflow_app.i18n import _, rich
from bpflow_app.pages.flows_state import STATUSES, FlowsState

# A flow's status in words (the badge's colour is the status's own).
STATUS_WORDS = {"running": N_("running"), "completed": N_("completed"),
                "failed": N_("failed"), "suspended": N_("suspended"),
                "terminated": N_("terminated")}
# The last step of a flow in words (`flowsview.STEP_WORDS`' kinds); `step` is the step's
# description.
STEP_TEXTS = {"circle_succeeded": N_("%(step)s: done"),
              "circle_failed": N_("%(step)s: failed"),
              "circle_skipped": N_("%(step)s: skipped"),
              "circle_reset": N_("%(step)s: to be done again"),
              "circle_retry_scheduled": N_("%(step)s: failed, to be retried"),
              "circle_pending": N_("%(step)s: in progress"),
              "circle_ready": N_("%(step)s: to do")}


def status_word(status: rx.Var) -> rx.Var:
    """A flow's status in the reader's words."""
    return rx.match(status, *[(k, _(v)) for k, v in STATUS_WORDS.items()], status)


def status_badge(status: rx.Var) -> rx.Component:
    return state_badge(status, status_word(status))


def progress(i: rx.Var[InstanceLine]) -> rx.Component:
    """Where a flow is: whom it waits for, else its last step (names and the step's
    description as data)."""
    step = rx.match(i.step_kind,
                    *[(k, rich(v, step=lambda: data(i.last_step)))
                      for k, v in STEP_TEXTS.items()],
                    data(i.last_step))
    return rx.cond(i.waits_you, _("Waits for you"),
                   rx.cond(i.waits != "", rich(N_("Waits for %(who)s"),
                                               who=lambda: data(i.waits)), step))


def _startable(t: rx.Var[Startable]) -> rx.Component:
    return rx.card(
        rx.form(
            rx.vstack(
                rx.hstack(rx.heading(t.title, size="4", as_="h3", custom_attrs=NO),
                          rx.badge(_("v%(version)s", version=t.version), variant="surface"),
                          justify="between", width="100%", align="center"),
                rx.text(t.description, size="2", color_scheme="gray", custom_attrs=NO),
                fields(t.inputs),
                rx.el.input(type="hidden", name="__template", value=t.name),
                named("start-name-" + t.name, N_("Start %(name)s"), name=t.name),
                rx.button(rx.icon("play", size=16), _("Start"), type="submit",
                          loading=FlowsState.starting == t.name, id="start-" + t.name,
                          custom_attrs=by("start-name-" + t.name)),
                spacing="3", align="start", height="100%",
            ),
            on_submit=FlowsState.start, reset_on_submit=False,
        ),
        width="100%",
    )


# On a phone the table keeps three columns (flow, status, Open) and where the flow is
# goes under its title, so the Open link stays on the screen.
WIDE = ["none", "table-cell"]


def _flow_cell(i: rx.Var[InstanceLine], *more: rx.Component) -> rx.Component:
    return rx.table.cell(
        rx.link(i.title, href=routes.flow(i.id), weight="medium", class_name="flow-title",
                custom_attrs=NO),
        rx.cond(i.summary != "", rx.text(i.summary, size="1", class_name="flow-summary",
                                         custom_attrs=NO)),
        *more,
        rx.text(progress(i), size="1", color_scheme="gray", display=["block", "none"]),
        overflow_wrap="anywhere")


def _open_cell(i: rx.Var[InstanceLine], table: str) -> rx.Component:
    name = f"open-{table}-" + i.id
    return rx.table.cell(named(name, N_("Open %(id)s"), id=i.id),
                         rx.link(_("Open"), href=routes.flow(i.id), custom_attrs=by(name)))


def _open_header() -> rx.Component:
    return rx.table.column_header_cell(visually_hidden(_("Open")))


def _instance_row(i: rx.Var[InstanceLine]) -> rx.Component:
    return rx.table.row(
        _flow_cell(i),
        rx.table.cell(status_badge(i.status)),
        rx.table.cell(rx.text(progress(i), size="2", class_name="flow-progress"),
                      display=WIDE),
        rx.table.cell(rx.text(when(i.updated, relative=True), size="1", color_scheme="gray"),
                      display=["none", "none", "table-cell"]),
        _open_cell(i, "mine"),
        class_name="instance-row", custom_attrs={"data-instance": i.id},
    )


def _instances() -> rx.Component:
    table = rx.table.root(
        rx.table.header(rx.table.row(
            rx.table.column_header_cell(_("Flow")),
            rx.table.column_header_cell(_("Status")),
            rx.table.column_header_cell(_("Where it is"), display=WIDE),
            rx.table.column_header_cell(_("Updated"), display=["none", "none", "table-cell"]),
            _open_header())),
        rx.table.body(rx.foreach(FlowsState.instances, _instance_row)),
        width="100%", variant="surface",
    )
    pager = rx.hstack(
        rx.button(rx.icon("chevron-left", size=16), _("Newer"), variant="soft",
                  on_click=FlowsState.turn(-1), disabled=FlowsState.page == 0),
        rx.text(_("Page %(page)s of %(pages)s", page=FlowsState.page + 1,
                  pages=FlowsState.pages), size="2"),
        rx.button(_("Older"), rx.icon("chevron-right", size=16), variant="soft",
                  on_click=FlowsState.turn(1),
                  disabled=FlowsState.page + 1 >= FlowsState.pages),
        justify="end", align="center", width="100%",
    )
    return rx.cond(
        FlowsState.total > 0,
        rx.vstack(rx.box(table, overflow_x="auto", width="100%"), pager, width="100%"),
        rx.cond(FlowsState.filtered,
                empty_state("search-x", _("No flow matches"),
                            _("Nothing of yours matches these filters."),
                            rx.button(_("Clear the filters"), variant="soft",
                                      on_click=FlowsState.clear_filters)),
                empty_state("workflow", _("No flows yet"),
                            _("Start one of the templates above; it will be listed here."))))


def _filters() -> rx.Component:
    S = FlowsState
    return rx.flex(
        rx.input(rx.input.slot(rx.icon("search", size=16)), value=S.query,
                 on_change=S.set_query, debounce_timeout=300,
                 placeholder=_("Search template, id or last step"), id="flows-search",
                 aria_label=_("Search my flows"), flex="1", min_width="200px"),
        rx.select.root(
            rx.select.trigger(id="flows-status", aria_label=_("Status")),
            rx.select.content(*[rx.select.item(_("Any status") if v == ANY
                                               else _(STATUS_WORDS.get(v, v)), value=v)
                                for v in STATUSES]),
            value=S.status, on_change=S.set_status),
        rx.select.root(
            rx.select.trigger(id="flows-template", aria_label=_("Template")),
            rx.select.content(rx.foreach(S.templates, lambda v: rx.select.item(
                rx.cond(v == ANY, _("Any template"), data(S.template_titles[v])), value=v))),
            value=S.template, on_change=S.set_template),
        rx.cond(S.filtered, rx.button(_("Clear"), variant="ghost", on_click=S.clear_filters,
                                      id="flows-clear")),
        spacing="2", wrap="wrap", align="center", width="100%", id="flows-filters",
    )


def _taking_part_row(i: rx.Var[InstanceLine]) -> rx.Component:
    return rx.table.row(
        _flow_cell(i, rx.text(rich(N_("started by %(name)s"), name=lambda: data(i.starter)),
                              size="1", color_scheme="gray")),
        rx.table.cell(status_badge(i.status)),
        rx.table.cell(rx.text(progress(i), size="2", class_name="flow-progress"),
                      display=WIDE),
        _open_cell(i, "part"),
        class_name="taking-part-row", custom_attrs={"data-instance": i.id},
    )


def _taking_part() -> rx.Component:
    table = rx.table.root(
        rx.table.header(rx.table.row(
            rx.table.column_header_cell(_("Flow")),
            rx.table.column_header_cell(_("Status")),
            rx.table.column_header_cell(_("Where it is"), display=WIDE),
            _open_header())),
        rx.table.body(rx.foreach(FlowsState.taking_part, _taking_part_row)),
        width="100%", variant="surface",
    )
    return rx.cond(FlowsState.taking_part.length() > 0,
                   rx.box(table, overflow_x="auto", width="100%", id="taking-part"),
                   empty_state("users", _("Nothing here yet"),
                               _("Flows others started appear here once they ask you for "
                                 "something (a task or an approval).")))


def flows_page() -> rx.Component:
    return rx.vstack(
        page_header(_("My flows"), _("Start a flow, or continue one where you left it.")),
        rx.heading(_("Start a flow"), size="4", as_="h2"),
        rx.cond(
            FlowsState.loading,
            rx.center(rx.spinner(), width="100%", padding="24px"),
            rx.grid(rx.foreach(FlowsState.startables, _startable),
                    columns=rx.breakpoints(initial="1", sm="2", lg="3"), spacing="4",
                    width="100%"),
        ),
        rx.heading(_("Your flows"), size="4", as_="h2", margin_top="16px"),
        _filters(),
        rx.cond(FlowsState.cut, rx.text(
            _("The search looked at your newest %(n)s flows.", n=number(SEARCH_MOST)),
            size="1", color_scheme="gray")),
        rx.cond(FlowsState.loading, rx.skeleton(height="120px", width="100%"), _instances()),
        rx.heading(_("Taking part"), size="4", as_="h2", margin_top="16px"),
        rx.text(_("Flows others started that asked you for something."), size="2",
                color_scheme="gray"),
        rx.cond(FlowsState.loading, rx.skeleton(height="80px", width="100%"),
                _taking_part()),
        spacing="3", width="100%",
    )
