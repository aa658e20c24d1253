"""Users (`/users`, admins): who can sign in, a form to add someone (with built-in or
custom roles), changing a user's roles, giving someone a new password (which ends their
sessions) and disabling an account, each after a confirmation (users are never deleted; a
disabled account's sessions end within seconds; an admin can neither disable themselves
nor take away their own admin role, and changes their own password on their account
page). Self-service registration is off unless `BPFLOW_REGISTRATION=open` (see
`pages/register.py`)."""

from __future__ import annotations

import reflex as rx

from bpflow.access import ROLES, USER
from bpflow_app import routes
from bpflow_app.catalogs import N_
from bpflow_app.components.names import NO, by, data, named
from bpflow_app.components.ui import empty_state, page_header
from bpflow_app.components.when import when
from bpflow_app.i18n import _, rich
from bpflow_app.pages.users_state import MIN_PASSWORD, UserLine, UsersState
from bpflow_app.session import SessionState

BUILT_IN = ", ".join(ROLES)
EXAMPLE = "finance"  # a role of one's own


def _error(name: str) -> rx.Component:
    return rx.cond(UsersState.errors.contains(name),
                   rx.text(UsersState.errors[name], color_scheme="red", size="1", role="alert"))


def _form() -> rx.Component:
    return rx.card(rx.form(rx.vstack(
        rx.heading(_("Add a user"), size="4", as_="h2"),
        rx.el.label(rx.text(_("Username"), size="2"), html_for="new-username"),
        rx.input(name="username", id="new-username", width="100%", auto_complete="off"),
        _error("username"),
        rx.el.label(rx.text(_("Password"), size="2"), html_for="new-password"),
        rx.input(name="password", id="new-password", type="password", width="100%",
                 auto_complete="new-password"),
        _error("password"),
        rx.el.label(rx.text(_("Roles"), size="2"), html_for="new-role"),
        rx.input(name="role", id="new-role", width="100%", default_value=USER,
                 auto_complete="off"),
        rx.text(rich(N_("Separated by commas: %(roles)s or your own, such as %(example)s."),
                     roles=lambda: data(BUILT_IN), example=lambda: data(EXAMPLE)),
                size="1", color_scheme="gray"),
        _error("role"),
        rx.button(_("Add user"), type="submit", loading=UsersState.busy),
        spacing="2", width="100%", align="start"),
        on_submit=UsersState.add, reset_on_submit=False, aria_label=_("Add a user")),
        width="100%")


# On a phone the table leaves out since when each account exists, so its buttons fit.
PHONE_HIDDEN = ["none", "table-cell"]


def _substitute_link(username: rx.Var) -> rx.Component:
    """To the user's substitute (the substitute page, an admin's view of theirs)."""
    label = "substitute-name-" + username
    return rx.fragment(
        named(label, N_("Substitute of %(name)s"), name=username),
        rx.button(rx.link(_("Substitute"), href=routes.substitute_of(username),
                          underline="none", color="inherit"),
                  size="1", variant="soft", as_child=True, custom_attrs=by(label)))


def _row(u: rx.Var[UserLine]) -> rx.Component:
    reset, disable = "reset-name-" + u.username, "disable-name-" + u.username
    actions = rx.hstack(
        named(reset, N_("Reset password for %(name)s"), name=u.username),
        rx.button(_("Reset password"), size="1", variant="soft",
                  on_click=UsersState.ask_reset(u.username), custom_attrs=by(reset)),
        _substitute_link(u.username),
        named(disable, N_("Disable %(name)s"), name=u.username),
        rx.button(_("Disable"), size="1", variant="soft", color_scheme="red",
                  on_click=UsersState.ask_disable(u.username), custom_attrs=by(disable)),
        spacing="2", wrap="wrap")
    status = rx.cond(
        u.disabled != "",
        rx.text(rich(N_("Disabled %(when)s"), when=lambda: when(u.disabled)), size="1"),
        rx.cond(u.username == UsersState.username, rx.text(_("you"), size="1"), actions))
    edit = "roles-name-" + u.username
    roles = rx.hstack(
        rx.text(u.roles, size="2", custom_attrs=NO),
        rx.cond(u.disabled == "", rx.fragment(
            named(edit, N_("Change the roles of %(name)s"), name=u.username),
            rx.icon_button(rx.icon("pencil", size=12), size="1", variant="ghost",
                           on_click=UsersState.ask_roles(u.username, u.roles),
                           custom_attrs=by(edit)))),
        spacing="2", align="center")
    return rx.table.row(rx.table.row_header_cell(u.username, custom_attrs=NO),
                        rx.table.cell(roles),
                        rx.table.cell(rx.text(when(u.created), size="1"), display=PHONE_HIDDEN),
                        rx.table.cell(status), custom_attrs={"data-user": u.username})


def _roles_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title(rich(N_("Roles of %(name)s"),
                                   name=lambda: data(UsersState.editing))),
        rx.alert_dialog.description(
            rich(N_("Replace their roles with these, separated by commas: %(roles)s or your "
                    "own, such as %(example)s. They apply within seconds."),
                 roles=lambda: data(BUILT_IN), example=lambda: data(EXAMPLE)), size="2"),
        rx.input(value=UsersState.new_roles, on_change=UsersState.set_new_roles,
                 id="edit-roles", width="100%", margin_top="12px",
                 custom_attrs={"aria-label": _("Roles")}),
        rx.cond(UsersState.roles_error != "",
                rx.text(UsersState.roles_error, color_scheme="red", size="1", role="alert")),
        rx.flex(
            rx.alert_dialog.cancel(rx.button(_("Cancel"), variant="soft", color_scheme="gray",
                                             on_click=UsersState.cancel_roles)),
            rx.button(_("Save roles"), on_click=UsersState.save_roles, id="confirm-roles"),
            spacing="3", justify="end", margin_top="12px"),
    ), open=UsersState.editing != "")


def _reset_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title(rich(N_("New password for %(name)s"),
                                   name=lambda: data(UsersState.resetting))),
        rx.alert_dialog.description(
            _("Tell them the new password in person or another safe way. Every session of "
              "theirs ends; they sign in again with it, and can change it on their account "
              "page."), size="2"),
        rx.form(
            rx.vstack(
                rx.el.label(rx.text(_("New password"), size="2"), html_for="reset-password"),
                rx.input(name="password", id="reset-password", type="password", width="100%",
                         auto_complete="new-password"),
                rx.text(_("At least %(count)s characters.", count=MIN_PASSWORD), size="1",
                        color_scheme="gray"),
                rx.cond(UsersState.reset_error != "",
                        rx.text(UsersState.reset_error, color_scheme="red", size="1",
                                role="alert")),
                rx.flex(
                    rx.alert_dialog.cancel(rx.button(
                        _("Cancel"), type="button", variant="soft", color_scheme="gray",
                        on_click=UsersState.cancel_reset)),
                    rx.button(_("Reset password"), type="submit", id="confirm-reset"),
                    spacing="3", justify="end", width="100%"),
                spacing="2", width="100%", margin_top="12px"),
            on_submit=UsersState.reset_password, reset_on_submit=False),
    ), open=UsersState.resetting != "")


def _disable_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title(rich(N_("Disable %(name)s?"),
                                   name=lambda: data(UsersState.disabling))),
        rx.alert_dialog.description(
            _("They can no longer sign in, and their open sessions end within seconds. "
              "Users are never deleted: their flows and history stay."), size="2"),
        rx.flex(
            rx.alert_dialog.cancel(rx.button(_("Cancel"), variant="soft", color_scheme="gray",
                                             on_click=UsersState.cancel_disable)),
            rx.button(_("Disable"), color_scheme="red", on_click=UsersState.confirm_disable,
                      id="confirm-disable"),
            spacing="3", justify="end", margin_top="12px"),
    ), open=UsersState.disabling != "")


def users_page() -> rx.Component:
    table = rx.box(rx.table.root(
        rx.table.header(rx.table.row(rx.table.column_header_cell(_("User")),
                                     rx.table.column_header_cell(_("Roles")),
                                     rx.table.column_header_cell(_("Since"),
                                                                 display=PHONE_HIDDEN),
                                     rx.table.column_header_cell(_("Account")))),
        rx.table.body(rx.foreach(UsersState.users, _row)), width="100%", variant="surface"),
        overflow_x="auto", width="100%")
    body = rx.grid(table, _form(), _roles_dialog(), _reset_dialog(), _disable_dialog(),
                   spacing="4", width="100%", align_items="start",
                   grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                          "minmax(0,3fr) minmax(0,2fr)"])
    return rx.vstack(
        page_header(_("Users"), _("Registration is closed: administrators add people here.")),
        rx.cond(SessionState.is_admin, body, empty_state("lock", _("Administrators only"))),
        spacing="3", width="100%",
    )
