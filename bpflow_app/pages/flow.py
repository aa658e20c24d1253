"""The flow page (`/flow/[id]`): the drawing, the boxes waiting for the user beside it,
the selected circle's details with the intervention menu, and the history."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.components.boxes import box_card
from bpflow_app.components.drawing import flow_drawing, info_rows, legend
from bpflow_app.components.ui import empty_state, state_badge
from bpflow_app.flowview import CircleInfo, HistoryRow
from bpflow_app.pages.flow_state import FlowState

S = FlowState


def _banner() -> rx.Component:
    return rx.match(
        S.head.status,
        ("completed", rx.callout("This flow is complete.", icon="circle-check",
                                 color_scheme="green", id="flow-banner", width="100%")),
        ("failed", rx.callout(
            rx.text("The flow cannot finish on its own: ", S.head.reason,
                    ". Select a failed circle to retry or reset it."),
            icon="circle-x", color_scheme="red", id="flow-banner", width="100%")),
        ("suspended", rx.callout("This flow is suspended.", icon="circle-pause",
                                 color_scheme="amber", id="flow-banner", width="100%")),
        ("terminated", rx.callout(rx.text("This flow was terminated: ", S.head.reason),
                                  icon="octagon-x", color_scheme="gray", id="flow-banner",
                                  width="100%")),
        rx.fragment(),
    )


def _levels_button() -> rx.Component:
    label = rx.cond(S.levels == 1, "Reset 1 level", "Reset " + S.levels.to_string() + " levels")
    return rx.hstack(
        rx.input(type="number", value=S.levels.to_string(), on_change=S.set_levels, width="64px",
                 custom_attrs={"min": 0, "max": 99, "aria-label": "Levels to reset"}),
        rx.button(label, variant="soft", on_click=S.ask_reset("levels")),
        spacing="1", align="center",
    )


def _intervene() -> rx.Component:
    return rx.vstack(
        rx.separator(),
        rx.heading("Intervene", size="2", as_="h4"),
        rx.text("Send this circle, and everything after it, back to waiting. You will see "
                "which circles are affected before anything changes.", size="1",
                color_scheme="gray"),
        rx.flex(
            rx.button(rx.icon("rotate-ccw", size=14), "Retry this", variant="soft",
                      on_click=S.ask_reset("self")),
            _levels_button(),
            rx.button("Reset all", variant="soft", color_scheme="red",
                      on_click=S.ask_reset("all")),
            spacing="2", wrap="wrap", align="center",
        ),
        spacing="2", width="100%", id="intervention-menu",
    )


def _details() -> rx.Component:
    c = S.chosen
    return rx.cond(S.selected != "", rx.card(
        rx.vstack(
            rx.hstack(rx.heading(c.id, size="3", as_="h3"), state_badge(c.state),
                      rx.spacer(),
                      rx.icon_button(rx.icon("x", size=14), variant="ghost", size="1",
                                     on_click=S.select(S.selected), aria_label="Close details"),
                      width="100%", align="center"),
            info_rows(c),
            rx.cond(c.flow, rx.button(rx.icon("layers", size=14), "Open or close nested flow",
                                      variant="surface", size="1", on_click=S.toggle(c.id))),
            rx.cond(c.resettable & S.can_act, _intervene()),
            spacing="3", width="100%",
        ),
        width="100%", id="circle-details",
    ))


def _reset_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Reset ", S.preview.length(), " circle(s)?"),
            rx.alert_dialog.description(
                "These circles go back to waiting; their results are kept in the history.",
                size="2"),
            rx.flex(rx.foreach(S.preview, lambda c: rx.badge(c, size="2", variant="surface")),
                    spacing="2", wrap="wrap", margin_y="12px", id="reset-preview"),
            rx.flex(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft", color_scheme="gray",
                                                 on_click=S.cancel_reset)),
                rx.button("Reset", color_scheme="red", on_click=S.confirm_reset,
                          loading=S.resetting, id="confirm-reset"),
                spacing="3", justify="end",
            ),
        ),
        open=S.preview_open,
    )


def _flow_tab() -> rx.Component:
    drawing = rx.card(
        rx.vstack(
            rx.hstack(rx.heading("Drawing", size="3", as_="h2"), rx.spacer(),
                      rx.el.label(rx.hstack(rx.switch(checked=S.intervention,
                                                      on_change=S.set_intervention,
                                                      id="intervention-switch"),
                                            rx.text("Intervention mode", size="2"),
                                            spacing="2", align="center")),
                      width="100%", align="center"),
            flow_drawing(S, S.selected, S.preview, S.select, canvas=S.canvas),
            legend(S.intervention | S.preview_open),
            spacing="3", width="100%",
        ),
        width="100%",
    )
    side = rx.vstack(
        rx.heading("Open steps", size="3", as_="h2"),
        rx.cond(S.boxes.length() > 0,
                rx.vstack(rx.foreach(S.boxes, lambda b: box_card(b, S)), width="100%",
                          spacing="3", id="boxes"),
                empty_state("coffee", "Nothing to do here right now",
                            "Boxes appear when a circle waits for you.")),
        _details(),
        spacing="3", width="100%",
    )
    return rx.grid(drawing, side, spacing="4", width="100%", align_items="start",
                   grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                          "minmax(0,3fr) minmax(0,2fr)"])


def _circle_row(c: rx.Var[CircleInfo]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.button(c.id, variant="ghost", size="1",
                                on_click=[S.select(c.id), S.set_tab("flow")])),
        rx.table.cell(state_badge(c.state)),
        rx.table.cell(rx.text(rx.cond(c.reason != "", c.reason, c.result), size="1",
                              class_name="clip-text")),
        rx.table.cell(c.attempts),
    )


def _table(headers: list[str], body: rx.Component) -> rx.Component:
    return rx.box(rx.table.root(
        rx.table.header(rx.table.row(*[rx.table.column_header_cell(h) for h in headers])),
        body, width="100%", variant="surface", size="1"), overflow_x="auto", width="100%")


def _history_row(h: rx.Var[HistoryRow]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(h.seq), rx.table.cell(rx.text(h.at, size="1")),
        rx.table.cell(h.kind), rx.table.cell(h.circle), rx.table.cell(h.actor),
        rx.table.cell(rx.text(h.detail, size="1")),
    )


def _content() -> rx.Component:
    return rx.vstack(
        rx.flex(
            rx.vstack(
                rx.heading(S.head.title, size="7", as_="h1"),
                rx.text(S.head.template, " v", S.head.version, " · started by ", S.head.owner,
                        " on ", S.head.created, size="2", color_scheme="gray"),
                spacing="1"),
            rx.box(state_badge(S.head.status), id="flow-status"),
            justify="between", align="center", width="100%", wrap="wrap", spacing="2",
        ),
        _banner(),
        rx.cond(~S.can_act, rx.callout(
            "You were asked about this flow, so you can follow it here; only the person who "
            "started it (or an administrator) can act on it.", icon="eye", color_scheme="gray",
            width="100%", id="read-only")),
        rx.tabs.root(
            rx.tabs.list(rx.tabs.trigger("Flow", value="flow"),
                         rx.tabs.trigger("Circles", value="circles"),
                         rx.tabs.trigger("History", value="history")),
            rx.tabs.content(_flow_tab(), value="flow", padding_top="16px"),
            rx.tabs.content(_table(["Circle", "State", "Result or reason", "Failures"],
                                   rx.table.body(rx.foreach(S.circle_rows, _circle_row))),
                            value="circles", padding_top="16px"),
            rx.tabs.content(_table(["#", "When", "Event", "Circle", "Who", "Details"],
                                   rx.table.body(rx.foreach(S.history, _history_row))),
                            value="history", padding_top="16px", id="history"),
            value=S.tab, on_change=S.set_tab, width="100%",
        ),
        _reset_dialog(),
        spacing="4", width="100%",
    )


def flow_page() -> rx.Component:
    return rx.box(
        rx.cond(
            S.loading,
            rx.center(rx.spinner(size="3"), padding="48px", aria_busy="true"),
            rx.cond(S.missing,
                    empty_state("search-x", "Flow not found",
                                "It does not exist, or it is not yours to see.",
                                rx.link("Back to my flows", href=routes.FLOWS)),
                    _content()),
        ),
        width="100%",  # loaded by its on_load (frame_state.page_loads)
    )
