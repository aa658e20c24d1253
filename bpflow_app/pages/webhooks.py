"""Webhooks (`/webhooks`, admins): where the tenant's events are POSTed (SPEC §11). The
list shows each webhook's URL, event types, state (why a disabled one was disabled) and
delivery counts; a form adds one (the secret is shown only here, before it is added);
deleting asks first; the chosen webhook's latest deliveries are listed below."""

from __future__ import annotations

import reflex as rx

from bpflow.store.public import TYPES
from bpflow_app.catalogs import N_
from bpflow_app.components.names import NO, by, named
from bpflow_app.components.ui import empty_state, page_header
from bpflow_app.components.when import number, when
from bpflow_app.i18n import _, rich
from bpflow_app.pages.webhooks_state import DeliveryLine, HookLine, WebhooksState
from bpflow_app.session import SessionState

STATE_COLORS = {"active": "green", "failing": "amber", "disabled": "red",
                "delivered": "green", "pending": "amber", "failed": "red"}
STATE_WORDS = {"active": N_("active"), "failing": N_("failing"), "disabled": N_("disabled"),
               "delivered": N_("delivered"), "pending": N_("pending"), "failed": N_("failed")}
# what each event type means, beside its name (the name is what the receiver gets)
TYPE_WORDS = {"instance.started": N_("a flow was started"),
              "instance.completed": N_("a flow completed"),
              "instance.failed": N_("a flow failed"),
              "instance.terminated": N_("a flow was ended"),
              "instance.suspended": N_("a flow was suspended"),
              "instance.resumed": N_("a flow was resumed"),
              "instance.migrated": N_("a flow was migrated"),
              "circle.entered": N_("a circle became ready"),
              "circle.left": N_("a circle finished"),
              "circle.reset": N_("a circle was reset"),
              "approval.signers_added": N_("signers were added to an approval"),
              "approval.signers_removed": N_("signers were removed from an approval"),
              "cc.sent": N_("people were copied on a flow"),
              "urge.sent": N_("people were urged or reminded"),
              "task.returned": N_("work was returned to an earlier step"),
              "approval.transferred": N_("an approval was transferred to someone else"),
              "approval.delegated": N_("someone was asked to answer an approval"),
              "task.transferred": N_("a task was handed to someone else"),
              "task.delegated": N_("someone was asked to answer a task"),
              "comment.added": N_("someone commented on a flow")}


def _badge(state: rx.Var[str]) -> rx.Component:
    return rx.badge(rx.match(state, *[(k, _(v)) for k, v in STATE_WORDS.items()], state),
                    color_scheme=rx.match(state, *STATE_COLORS.items(), "gray"),
                    variant="soft")


def _error(name: str) -> rx.Component:
    return rx.cond(WebhooksState.errors.contains(name),
                   rx.text(WebhooksState.errors[name], color_scheme="red", size="1",
                           role="alert"))


def _type_box(kind: str) -> rx.Component:
    return rx.vstack(
        rx.checkbox(_(TYPE_WORDS.get(kind, kind)), checked=WebhooksState.picked.contains(kind),
                    on_change=lambda on: WebhooksState.toggle(kind, on), size="1",
                    custom_attrs={"data-type": kind}),
        rx.code(kind, size="1", variant="ghost", color_scheme="gray", padding_left="20px"),
        spacing="0", align="start")


def _form() -> rx.Component:
    return rx.card(rx.form(rx.vstack(
        rx.heading(_("Add a webhook"), size="4", as_="h2"),
        rx.el.label(rx.text(_("URL"), size="2"), html_for="new-url"),
        rx.input(name="url", id="new-url", width="100%", placeholder="https://",
                 auto_complete="off", custom_attrs=NO),  # an address
        _error("url"),
        rx.text(_("Events"), size="2", id="new-events"),
        rx.grid(*[_type_box(kind) for kind in TYPES], columns={"initial": "1", "sm": "2"},
                spacing="2",
                width="100%", role="group", custom_attrs={"aria-labelledby": "new-events"}),
        _error("events"),
        rx.el.label(rx.text(_("Secret"), size="2"), html_for="new-secret"),
        rx.hstack(rx.input(value=WebhooksState.secret, on_change=WebhooksState.set_secret,
                           id="new-secret", name="secret", width="100%",
                           auto_complete="off"),
                  rx.icon_button(rx.icon("refresh-cw", size=14), type="button", size="2",
                                 variant="soft", on_click=WebhooksState.another_secret,
                                 aria_label=_("Another secret")), width="100%"),
        rx.text(rich(N_("Copy it now: the receiver checks %(header)s with it, and bpflow "
                        "never shows it again."),
                     header=lambda: rx.code("X-Bpflow-Signature", size="1", variant="ghost")),
                size="1", color_scheme="gray"),
        _error("secret"),
        rx.button(_("Add webhook"), type="submit"),
        spacing="2", width="100%", align="start"),
        on_submit=WebhooksState.add, reset_on_submit=False, aria_label=_("Add a webhook")),
        width="100%")


def _hook_row(h: rx.Var[HookLine]) -> rx.Component:
    state = rx.vstack(_badge(h.state),
                      rx.cond(h.reason != "", rx.text(h.reason, size="1", color_scheme="red")),
                      spacing="1", align="start")
    counts = rx.text(_("%(delivered)s delivered, %(pending)s pending, %(failed)s failed",
                       delivered=number(h.delivered), pending=number(h.pending),
                       failed=number(h.failed)), size="1")
    shown, delete = "deliveries-name-" + h.id.to_string(), "delete-name-" + h.id.to_string()
    actions = rx.hstack(
        named(shown, N_("Deliveries to %(url)s"), url=h.url),
        rx.button(_("Deliveries"), size="1", variant="soft",
                  on_click=WebhooksState.choose(h.id), custom_attrs=by(shown)),
        named(delete, N_("Delete %(url)s"), url=h.url),
        rx.button(_("Delete"), size="1", variant="soft", color_scheme="red",
                  on_click=WebhooksState.ask_delete(h.id), custom_attrs=by(delete)),
        spacing="2", wrap="wrap")
    return rx.table.row(
        rx.table.cell(rx.text(h.url, size="2", style={"word_break": "break-all"},
                              custom_attrs=NO)),
        rx.table.cell(rx.code(h.events, size="1", variant="ghost")), rx.table.cell(state),
        rx.table.cell(counts), rx.table.cell(actions),
        custom_attrs={"data-webhook": h.id})


def _delivery_row(d: rx.Var[DeliveryLine]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.text(d.event, size="1")),
        rx.table.cell(rx.code(d.type, size="1", variant="ghost")),
        rx.table.cell(_badge(d.state)), rx.table.cell(rx.text(d.attempts, size="1")),
        rx.table.cell(rx.text(d.status, size="1")),
        rx.table.cell(rx.text(d.error, size="1", style={"word_break": "break-all"},
                              custom_attrs=NO)),  # the receiver's or the network's words
        rx.table.cell(rx.text(when(d.when), size="1")), custom_attrs={"data-delivery": d.id})


def _table(headers: list[rx.Var], body: rx.Component, label: rx.Var,
           least: str) -> rx.Component:
    """A table at least `least` wide: on a phone it scrolls sideways rather than break
    its words (Chinese ones) a character a line."""
    return rx.box(rx.table.root(
        rx.table.header(rx.table.row(*[rx.table.column_header_cell(h, white_space="nowrap")
                                       for h in headers])),
        rx.table.body(body), width="100%", min_width=least, variant="surface",
        aria_label=label), overflow_x="auto", width="100%")


def _deliveries() -> rx.Component:
    return rx.cond(WebhooksState.chosen != 0, rx.vstack(
        rx.hstack(rx.heading(_("Latest deliveries"), size="4", as_="h2"),
                  rx.button(_("Refresh"), size="1", variant="soft",
                            on_click=WebhooksState.refresh), align="center", spacing="3"),
        rx.cond(WebhooksState.deliveries.length() > 0,
                _table([_("Event"), _("Type"), _("State"), _("Attempts"), _("HTTP status"),
                        _("Error"), _("Delivered / next attempt")],
                       rx.foreach(WebhooksState.deliveries, _delivery_row),
                       _("Latest deliveries"), "720px"),
                rx.text(_("Nothing delivered yet: events come as they happen."), size="2",
                        color_scheme="gray")),
        spacing="2", width="100%"))


def _delete_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title(_("Delete this webhook?")),
        rx.alert_dialog.description(
            _("No more events are sent to it, and its delivery log is deleted too."),
            size="2"),
        rx.flex(
            rx.alert_dialog.cancel(rx.button(_("Cancel"), variant="soft", color_scheme="gray",
                                             on_click=WebhooksState.cancel_delete)),
            rx.button(_("Delete"), color_scheme="red", on_click=WebhooksState.confirm_delete,
                      id="confirm-delete-webhook"),
            spacing="3", justify="end", margin_top="12px"),
    ), open=WebhooksState.deleting != 0)


def webhooks_page() -> rx.Component:
    hooks = rx.cond(WebhooksState.hooks.length() > 0,
                    _table([_("URL"), _("Events"), _("State"), _("Deliveries"), _("Actions")],
                           rx.foreach(WebhooksState.hooks, _hook_row), _("Webhooks"),
                           "600px"),
                    empty_state("webhook", _("No webhooks yet"),
                                _("Add one to have this organisation's events POSTed to "
                                  "it.")))
    body = rx.grid(rx.vstack(hooks, _deliveries(), spacing="4", width="100%"), _form(),
                   _delete_dialog(), spacing="4", width="100%", align_items="start",
                   grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                          "minmax(0,3fr) minmax(0,2fr)"])
    return rx.vstack(
        page_header(_("Webhooks"),
                    _("Events of this organisation, POSTed where you say, signed.")),
        rx.cond(SessionState.is_admin, body, empty_state("lock", _("Administrators only"))),
        spacing="3", width="100%",
    )
