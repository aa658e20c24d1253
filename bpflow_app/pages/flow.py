"""The flow page (`/flow/[id]`): the drawing, the boxes of its open circles beside it
(whom each waits for; claim, unclaim, take back), the starter's controls (abort, suspend,
resume, each after a confirmation), the selected circle's details with the intervention
menu, and the history."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.boxview import BoxView
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


def _moves(b: rx.Var[BoxView]) -> rx.Component:
    """What the viewer may do with a box besides filling it in."""
    return rx.cond(b.claim | b.unclaim | b.withdraw, rx.flex(
        rx.cond(b.claim, rx.button(rx.icon("hand", size=14), "Claim", size="2",
                                   on_click=S.claim(b.cid), aria_label="Claim " + b.cid)),
        rx.cond(b.unclaim, rx.button("Unclaim", size="2", variant="soft", color_scheme="gray",
                                     on_click=S.unclaim(b.cid),
                                     aria_label="Unclaim " + b.cid)),
        rx.cond(b.withdraw, rx.button(rx.icon("undo-2", size=14), "Take it back", size="2",
                                      variant="soft", color_scheme="amber",
                                      on_click=S.ask_control("withdraw", b.cid),
                                      aria_label="Take back " + b.cid)),
        spacing="2", wrap="wrap", class_name="box-moves"))


def _controls() -> rx.Component:
    """The starter's (or an admin's) controls of the whole flow: the moves the engine's
    table allows from its status."""
    allowed = S.head.controls
    return rx.cond(S.can_act, rx.flex(
        rx.cond(allowed.contains("suspend"), rx.button(
            rx.icon("circle-pause", size=14), "Suspend", variant="soft", size="2",
            on_click=S.ask_control("suspend", ""), id="suspend-flow")),
        rx.cond(allowed.contains("resume"), rx.button(
            rx.icon("circle-play", size=14), "Resume", variant="soft", size="2",
            on_click=S.ask_control("resume", ""), id="resume-flow")),
        rx.cond(allowed.contains("abort"),
                rx.button(rx.icon("octagon-x", size=14), "Abort", variant="soft", size="2",
                          color_scheme="red", on_click=S.ask_control("abort", ""),
                          id="abort-flow")),
        spacing="2", wrap="wrap", id="flow-controls"))


CONTROL_TEXT = {
    "abort": ("Abort this flow?", "It stops for good: nothing in it runs any more and nobody"
              " is asked any more. Say why; the reason is kept in its history.", "Abort"),
    "suspend": ("Suspend this flow?", "Nothing in it moves until it is resumed; the steps"
                " waiting for people wait.", "Suspend"),
    "resume": ("Resume this flow?", "It goes on from where it was suspended.", "Resume"),
    "withdraw": ("Take this step back?", "Whoever it waits for is no longer asked (an"
                 " approval request is closed) and the step before it comes back to you to"
                 " amend.", "Take it back"),
}


def _control_dialog() -> rx.Component:
    def pick(i: int) -> rx.Var:
        return rx.match(S.ask, *[(k, v[i]) for k, v in CONTROL_TEXT.items()], "")
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title(pick(0)),
            rx.alert_dialog.description(
                rx.cond(S.ask_circle != "", rx.text.strong(S.ask_circle, ": ")), pick(1),
                size="2"),
            rx.form(
                rx.vstack(
                    rx.cond(S.ask == "abort", rx.input(
                        name="reason", placeholder="Why is it aborted?", width="100%",
                        max_length=500, id="control-reason", aria_label="Reason")),
                    rx.cond(S.ask == "withdraw", rx.input(
                        name="reason", placeholder="Why (optional)", width="100%",
                        max_length=500, id="control-reason", aria_label="Reason")),
                    rx.cond(S.ask_error != "", rx.text(S.ask_error, color_scheme="red",
                                                       size="2", role="alert")),
                    rx.flex(
                        rx.alert_dialog.cancel(rx.button(
                            "Cancel", type="button", variant="soft", color_scheme="gray",
                            on_click=S.cancel_control)),
                        rx.button(pick(2), type="submit", loading=S.asking,
                                  color_scheme=rx.cond(S.ask == "abort", "red", "indigo"),
                                  id="confirm-control"),
                        spacing="3", justify="end", width="100%"),
                    spacing="3", width="100%", margin_top="12px"),
                on_submit=S.confirm_control, reset_on_submit=False),
        ),
        open=S.ask_open,
        on_open_change=lambda _: S.cancel_control,
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
                rx.vstack(rx.foreach(S.boxes, lambda b: box_card(b, S, _moves)), width="100%",
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
            rx.hstack(_controls(), rx.box(state_badge(S.head.status), id="flow-status"),
                      spacing="3", align="center", wrap="wrap"),
            justify="between", align="center", width="100%", wrap="wrap", spacing="2",
        ),
        _banner(),
        rx.cond(~S.can_act, rx.callout(
            "You were asked about this flow, so you can follow it here and act on the steps "
            "that wait for you; the person who started it (or an administrator) controls it.",
            icon="eye", color_scheme="gray", width="100%", id="read-only")),
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
        _control_dialog(),
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
