"""One's own account (`/account`, from the header's user menu): name, roles and
organisation, and changing one's password (the current one required; every other
session ends). Its state is `account_state.py`."""

from __future__ import annotations

import reflex as rx

from bpflow_app.components.names import NO
from bpflow_app.components.ui import page_header, section
from bpflow_app.i18n import _
from bpflow_app.pages.account_state import AccountState
from bpflow_app.session import SessionState


def _field(name: str, label: rx.Var, control_id: str, complete: str) -> rx.Component:
    return rx.vstack(
        rx.el.label(rx.text(label, size="2", weight="medium"), html_for=control_id),
        rx.input(name=name, id=control_id, type="password", width="100%",
                 auto_complete=complete,
                 custom_attrs={"aria-invalid": AccountState.errors.contains(name)}),
        rx.cond(AccountState.errors.contains(name),
                rx.text(AccountState.errors[name], color_scheme="red", size="1",
                        role="alert", id=f"{control_id}-error")),
        spacing="1", width="100%",
    )


def _facts() -> rx.Component:
    def fact(term: rx.Var, value: rx.Component) -> rx.Component:
        return rx.fragment(rx.el.dt(rx.text(term, size="2", color_scheme="gray")),
                           rx.el.dd(value, margin="0"))
    return rx.el.dl(
        fact(_("Username"), rx.text(SessionState.username, weight="medium",
                                            id="account-name", custom_attrs=NO)),
        fact(_("Roles"), rx.hstack(rx.foreach(AccountState.roles,
                                             lambda r: rx.badge(r, variant="surface",
                                                                   custom_attrs=NO)),
                                  spacing="1", wrap="wrap", id="account-roles")),
        rx.cond(SessionState.organisation != "",
                fact(_("Organisation"), rx.text(SessionState.organisation,
                                                       custom_attrs=NO))),
        display="grid", grid_template_columns="max-content 1fr", column_gap="16px",
        row_gap="8px", align_items="center", margin="0",
    )


def _password_form() -> rx.Component:
    return rx.form(
        rx.vstack(
            _field("current", _("Current password"), "current-password", "current-password"),
            _field("new", _("New password"), "new-password", "new-password"),
            rx.text(_("At least 8 characters. Your other sessions end when you change it; "
                      "this one stays signed in."), size="1", color_scheme="gray"),
            _field("again", _("New password again"), "new-password-again", "new-password"),
            rx.button(_("Change password"), type="submit", loading=AccountState.busy,
                      id="change-password"),
            spacing="3", width="100%", align="start", max_width="420px",
        ),
        on_submit=AccountState.change_password, reset_on_submit=False,
        aria_label=_("Change password"),
    )


def account_page() -> rx.Component:
    return rx.vstack(
        page_header(_("My account")),
        rx.grid(section(_("Account"), _facts()),
                section(_("Change password"), _password_form()),
                spacing="4", width="100%", align_items="start",
                grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                       "minmax(0,2fr) minmax(0,3fr)"]),
        spacing="3", width="100%",
    )
