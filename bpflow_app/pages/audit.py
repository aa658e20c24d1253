"""The audit log (`/audit`, admins, SPEC §18): what this organisation's administrators
did, newest first, with who, when, to what, and each changed field before and after.
Filters by administrator, kind and time (typed in the browser's own zone); older and
newer pages follow the log's cursor. Its state is `audit_state.py`."""

from __future__ import annotations

import reflex as rx

from bpflow import audit
from bpflow_app.catalogs import N_
from bpflow_app.components.names import NO, data
from bpflow_app.components.ui import empty_state, page_header
from bpflow_app.components.when import when
from bpflow_app.i18n import _
from bpflow_app.pages.audit_state import OPERATOR, AuditState, Change, EntryLine
from bpflow_app.pages.substitute import BROWSER_OFFSET
from bpflow_app.session import SessionState

ANY = "any"  # the kind picker's "every kind"
KIND_WORDS = {"user_added": N_("User added"),
              "user_roles_changed": N_("Roles changed"),
              "user_disabled": N_("User disabled"),
              "password_reset": N_("Password reset"),
              "template_uploaded": N_("Template uploaded"),
              "template_retired": N_("Template retired"),
              "template_restored": N_("Template restored"),
              "instances_migrated": N_("Flows migrated"),
              "webhook_added": N_("Webhook added"),
              "webhook_deleted": N_("Webhook deleted"),
              "quotas_changed": N_("Quotas changed"),
              "tenant_added": N_("Organisation added"),
              "substitute_set": N_("Substitute set"),
              "substitute_cleared": N_("Substitute cleared"),
              "operation_started": N_("Bulk operation started"),
              "operation_finished": N_("Bulk operation finished")}
# the fields of an entry's before and after (`bpflow.audit.KINDS`); others shown as data
FIELD_WORDS = {"roles": N_("Roles"), "disabled": N_("Disabled"), "version": N_("Version"),
               "retired": N_("Retired"), "instances": N_("Flows"),
               "map": N_("Map of renamed circles"), "refused": N_("Refused"),
               "url": N_("URL"), "events": N_("Events"), "admin": N_("Administrator"),
               "quotas": N_("Quotas"), "user": N_("User"), "to": N_("Substitute"),
               "from": N_("From"), "until": N_("Until"), "templates": N_("Templates"),
               "active": N_("Active"), "set_by": N_("Set by"), "set_at": N_("Set at")}


def _kind(kind: rx.Var[str]) -> rx.Component:
    return rx.match(kind, *[(k, rx.text(_(v), size="2")) for k, v in KIND_WORDS.items()],
                    rx.code(kind, size="1", variant="ghost", custom_attrs=NO))


def _field(name: rx.Var[str]) -> rx.Component:
    return rx.match(name, *[(k, rx.text(_(v), size="1", weight="medium"))
                            for k, v in FIELD_WORDS.items()],
                    rx.code(name, size="1", variant="ghost", custom_attrs=NO))


def _value(v: rx.Var[str]) -> rx.Component:
    return rx.match(v, ("true", rx.text(_("yes"), size="1")),
                    ("false", rx.text(_("no"), size="1")),
                    ("", rx.text("—", size="1", color_scheme="gray", aria_label=_("none"))),
                    rx.text(v, size="1", style={"word_break": "break-word"},
                            custom_attrs=NO))


def _change(c: rx.Var[Change]) -> rx.Component:
    return rx.hstack(
        rx.cond(c.field != "", _field(c.field)), _value(c.before),
        rx.icon("arrow-right", size=12, aria_hidden="true", flex_shrink="0"),
        _value(c.after), spacing="2", align="center", wrap="wrap", class_name="audit-change")


def _row(e: rx.Var[EntryLine]) -> rx.Component:
    actor = rx.cond(e.actor == OPERATOR, rx.text(_("the operator (command line)"), size="2"),
                    rx.text(data(e.actor), size="2"))
    return rx.table.row(
        rx.table.cell(rx.text(when(e.at), size="2")), rx.table.cell(actor),
        rx.table.cell(_kind(e.kind)),
        rx.table.cell(rx.text(e.target, size="2", style={"word_break": "break-all"},
                              custom_attrs=NO)),
        rx.table.cell(rx.vstack(rx.foreach(e.changes, _change), spacing="1")),
        custom_attrs={"data-audit": e.id, "data-kind": e.kind})


def _labelled(label: rx.Var, control_id: str, control: rx.Component) -> rx.Component:
    error = rx.cond(AuditState.errors.contains(control_id.removeprefix("audit-")),
                    rx.text(AuditState.errors[control_id.removeprefix("audit-")],
                            color_scheme="red", size="1", role="alert"))
    return rx.vstack(rx.el.label(rx.text(label, size="2"), html_for=control_id), control,
                     error, spacing="1")


def _filters() -> rx.Component:
    kinds = rx.select.root(
        rx.select.trigger(id="audit-kind", aria_label=_("Kind")),
        rx.select.content(rx.select.item(_("Every kind"), value=ANY),
                          *[rx.select.item(_(KIND_WORDS[k]), value=k) for k in audit.KINDS]),
        name="kind", value=rx.cond(AuditState.kind == "", ANY, AuditState.kind),
        on_change=AuditState.set_kind)
    return rx.form(rx.flex(
        _labelled(_("Administrator"), "audit-actor",
                  rx.input(name="actor", id="audit-actor", auto_complete="off",
                           max_length=100, custom_attrs=NO)),
        rx.vstack(rx.text(_("Kind"), size="2", aria_hidden="true"), kinds, spacing="1"),
        _labelled(_("From"), "audit-since",
                  rx.input(type="datetime-local", name="since", id="audit-since")),
        _labelled(_("Until"), "audit-until",
                  rx.input(type="datetime-local", name="until", id="audit-until")),
        rx.el.input(type="hidden", name="tz", value=BROWSER_OFFSET),
        rx.hstack(rx.button(_("Filter"), type="submit", id="audit-filter"),
                  rx.button(_("Clear"), type="button", variant="soft", color_scheme="gray",
                            on_click=AuditState.clear), spacing="2"),
        spacing="3", wrap="wrap", align="end"),
        on_submit=AuditState.apply, reset_on_submit=False, aria_label=_("Filter the log"))


def _pager() -> rx.Component:
    return rx.hstack(
        rx.button(rx.icon("chevron-left", size=14), _("Newer"), size="1", variant="soft",
                  disabled=~AuditState.newer, on_click=AuditState.newer_page,
                  id="audit-newer"),
        rx.button(_("Older"), rx.icon("chevron-right", size=14), size="1", variant="soft",
                  disabled=~AuditState.older, on_click=AuditState.older_page,
                  id="audit-older"),
        spacing="2", justify="end", width="100%")


def _log() -> rx.Component:
    headers = [_("When"), _("Administrator"), _("What"), _("To what"), _("Before → after")]
    table = rx.box(rx.table.root(
        rx.table.header(rx.table.row(*[rx.table.column_header_cell(h, white_space="nowrap")
                                       for h in headers])),
        rx.table.body(rx.foreach(AuditState.entries, _row)), width="100%",
        min_width="760px", variant="surface", aria_label=_("Audit log")),
        overflow_x="auto", width="100%")
    return rx.cond(AuditState.entries.length() > 0,
                   rx.vstack(table, _pager(), spacing="2", width="100%"),
                   empty_state("scroll-text", _("Nothing recorded"),
                               _("What administrators do here is listed as they do it.")))


def audit_page() -> rx.Component:
    body = rx.vstack(_filters(), _log(), spacing="4", width="100%")
    return rx.vstack(
        page_header(_("Audit log"),
                    _("Who did what in this organisation, when, and what it changed.")),
        rx.cond(SessionState.is_admin, body, empty_state("lock", _("Administrators only"))),
        spacing="3", width="100%")
