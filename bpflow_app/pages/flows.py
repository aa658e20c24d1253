"""My flows: the templates the user may start (with a form for their declared inputs),
the user's instances, newest first, a page at a time, filtered by status, template and a
text (template, id or last step), and the flows others started that the user takes part
in (named in a task, or sent approval mail)."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.components.fields import fields
from bpflow_app.components.ui import empty_state, page_header, state_badge
from bpflow_app.flowsview import ANY, SEARCH_MOST, InstanceLine, Startable
from bpflow_app.pages.flows_state import STATUSES, FlowsState


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
