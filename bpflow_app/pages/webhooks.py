"""Webhooks (`/webhooks`, admins): where the tenant's events are POSTed (SPEC §11). The
list shows each webhook's URL, event types, state (why a disabled one was disabled) and
delivery counts; a form adds one (the secret is shown only here, before it is added);
deleting asks first; the chosen webhook's latest deliveries are listed below."""

from __future__ import annotations

import reflex as rx

from bpflow.store.public import TYPES
from bpflow_app.components.ui import empty_state, page_header
from bpflow_app.pages.webhooks_state import DeliveryLine, HookLine, WebhooksState
from bpflow_app.session import SessionState

STATE_COLORS = {"active": "green", "failing": "amber", "disabled": "red",
                "delivered": "green", "pending": "amber", "failed": "red"}


def _badge(state: rx.Var[str]) -> rx.Component:
    return rx.badge(state, color_scheme=rx.match(state, *STATE_COLORS.items(), "gray"),
                    variant="soft")


def _error(name: str) -> rx.Component:
    return rx.cond(WebhooksState.errors.contains(name),
                   rx.text(WebhooksState.errors[name], color_scheme="red", size="1",
                           role="alert"))


def _type_box(kind: str) -> rx.Component:
    return rx.checkbox(kind, checked=WebhooksState.picked.contains(kind),
                       on_change=lambda on: WebhooksState.toggle(kind, on), size="1",
                       custom_attrs={"data-type": kind})


def _form() -> rx.Component:
    return rx.card(rx.form(rx.vstack(
        rx.heading("Add a webhook", size="4", as_="h2"),
        rx.el.label(rx.text("URL", size="2"), html_for="new-url"),
        rx.input(name="url", id="new-url", width="100%", placeholder="https://",
                 auto_complete="off"),
        _error("url"),
        rx.text("Events", size="2"),
        rx.grid(*[_type_box(kind) for kind in TYPES], columns="2", spacing="1",
                width="100%"),
        _error("events"),
        rx.el.label(rx.text("Secret", size="2"), html_for="new-secret"),
        rx.hstack(rx.input(value=WebhooksState.secret, on_change=WebhooksState.set_secret,
                           id="new-secret", name="secret", width="100%",
                           auto_complete="off"),
                  rx.icon_button(rx.icon("refresh-cw", size=14), type="button", size="2",
                                 variant="soft", on_click=WebhooksState.another_secret,
                                 aria_label="Another secret"), width="100%"),
        rx.text("Copy it now: the receiver checks X-Bpflow-Signature with it, and bpflow "
                "never shows it again.", size="1", color_scheme="gray"),
        _error("secret"),
        rx.button("Add webhook", type="submit"),
        spacing="2", width="100%", align="start"),
        on_submit=WebhooksState.add, reset_on_submit=False), width="100%")


def _hook_row(h: rx.Var[HookLine]) -> rx.Component:
    state = rx.vstack(_badge(h.state),
                      rx.cond(h.reason != "", rx.text(h.reason, size="1", color_scheme="red")),
                      spacing="1", align="start")
    counts = rx.text(h.delivered.to_string() + " delivered, " + h.pending.to_string()
                     + " pending, " + h.failed.to_string() + " failed", size="1")
    actions = rx.hstack(
        rx.button("Deliveries", size="1", variant="soft",
                  on_click=WebhooksState.choose(h.id), aria_label="Deliveries to " + h.url),
        rx.button("Delete", size="1", variant="soft", color_scheme="red",
                  on_click=WebhooksState.ask_delete(h.id), aria_label="Delete " + h.url),
        spacing="2")
    return rx.table.row(
        rx.table.cell(rx.text(h.url, size="2", style={"word_break": "break-all"})),
        rx.table.cell(rx.text(h.events, size="1")), rx.table.cell(state),
        rx.table.cell(counts), rx.table.cell(actions),
        custom_attrs={"data-webhook": h.id})


def _delivery_row(d: rx.Var[DeliveryLine]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.text(d.event, size="1")), rx.table.cell(rx.text(d.type, size="1")),
        rx.table.cell(_badge(d.state)), rx.table.cell(rx.text(d.attempts, size="1")),
        rx.table.cell(rx.text(d.status, size="1")),
        rx.table.cell(rx.text(d.error, size="1", style={"word_break": "break-all"})),
        rx.table.cell(rx.text(d.when, size="1")), custom_attrs={"data-delivery": d.id})


def _table(headers: list[str], body: rx.Component) -> rx.Component:
    return rx.box(rx.table.root(
        rx.table.header(rx.table.row(*[rx.table.column_header_cell(h) for h in headers])),
        rx.table.body(body), width="100%", variant="surface"), overflow_x="auto",
        width="100%")


def _deliveries() -> rx.Component:
    return rx.cond(WebhooksState.chosen != 0, rx.vstack(
        rx.hstack(rx.heading("Latest deliveries", size="4", as_="h2"),
                  rx.button("Refresh", size="1", variant="soft",
                            on_click=WebhooksState.refresh), align="center", spacing="3"),
        rx.cond(WebhooksState.deliveries.length() > 0,
                _table(["Event", "Type", "State", "Attempts", "Status", "Error",
                        "Delivered / next"],
                       rx.foreach(WebhooksState.deliveries, _delivery_row)),
                rx.text("Nothing delivered yet: events come as they happen.", size="2",
                        color_scheme="gray")),
        spacing="2", width="100%"))


def _delete_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title("Delete this webhook?"),
        rx.alert_dialog.description(
            "No more events are sent to it, and its delivery log is deleted too.", size="2"),
        rx.flex(
            rx.alert_dialog.cancel(rx.button("Cancel", variant="soft", color_scheme="gray",
                                             on_click=WebhooksState.cancel_delete)),
            rx.button("Delete", color_scheme="red", on_click=WebhooksState.confirm_delete,
                      id="confirm-delete-webhook"),
            spacing="3", justify="end", margin_top="12px"),
    ), open=WebhooksState.deleting != 0)


def webhooks_page() -> rx.Component:
    hooks = rx.cond(WebhooksState.hooks.length() > 0,
                    _table(["URL", "Events", "State", "Deliveries", ""],
                           rx.foreach(WebhooksState.hooks, _hook_row)),
                    empty_state("webhook", "No webhooks yet",
                                "Add one to have this tenant's events POSTed to it."))
    body = rx.grid(rx.vstack(hooks, _deliveries(), spacing="4", width="100%"), _form(),
                   _delete_dialog(), spacing="4", width="100%", align_items="start",
                   grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                          "minmax(0,3fr) minmax(0,2fr)"])
    return rx.vstack(
        page_header("Webhooks", "Events of this organisation, POSTed where you say, signed."),
        rx.cond(SessionState.is_admin, body, empty_state("lock", "Administrators only")),
        spacing="3", width="100%",
    )
