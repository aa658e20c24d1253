"""Users (`/users`, admins): who can sign in, a form to add someone (with built-in or
custom roles), changing a user's roles and disabling an account, each after a confirmation
(users are never deleted; a disabled account's sessions end within seconds; an admin can
neither disable themselves nor take away their own admin role). Self-service registration
is off unless `BPFLOW_REGISTRATION=open` (see `pages/register.py`)."""

from __future__ import annotations

import reflex as rx

from bpflow.access import ROLES, USER
from bpflow_app.components.ui import empty_state, page_header
from bpflow_app.pages.users_state import UserLine, UsersState
from bpflow_app.session import SessionState


def _error(name: str) -> rx.Component:
    return rx.cond(UsersState.errors.contains(name),
                   rx.text(UsersState.errors[name], color_scheme="red", size="1", role="alert"))


def _form() -> rx.Component:
    return rx.card(rx.form(rx.vstack(
        rx.heading("Add a user", size="4", as_="h2"),
        rx.el.label(rx.text("Username", size="2"), html_for="new-username"),
        rx.input(name="username", id="new-username", width="100%", auto_complete="off"),
        _error("username"),
        rx.el.label(rx.text("Password", size="2"), html_for="new-password"),
        rx.input(name="password", id="new-password", type="password", width="100%",
                 auto_complete="new-password"),
        _error("password"),
        rx.el.label(rx.text("Roles", size="2"), html_for="new-role"),
        rx.input(name="role", id="new-role", width="100%", default_value=USER,
                 auto_complete="off"),
        rx.text(f"Separated by commas: {', '.join(ROLES)} or your own, such as finance.",
                size="1", color_scheme="gray"),
        _error("role"),
        rx.button("Add user", type="submit", loading=UsersState.busy),
        spacing="2", width="100%", align="start"),
        on_submit=UsersState.add, reset_on_submit=False), width="100%")


def _row(u: rx.Var[UserLine]) -> rx.Component:
    status = rx.cond(u.disabled != "", rx.text("disabled " + u.disabled, size="1"),
                     rx.cond(u.username == UsersState.username, rx.text("you", size="1"),
                             rx.button("Disable", size="1", variant="soft", color_scheme="red",
                                       on_click=UsersState.ask_disable(u.username),
                                       aria_label="Disable " + u.username)))
    roles = rx.hstack(
        rx.text(u.roles, size="2"),
        rx.cond(u.disabled == "", rx.icon_button(
            rx.icon("pencil", size=12), size="1", variant="ghost",
            on_click=UsersState.ask_roles(u.username, u.roles),
            aria_label="Change the roles of " + u.username)),
        spacing="2", align="center")
    return rx.table.row(rx.table.cell(u.username), rx.table.cell(roles),
                        rx.table.cell(rx.text(u.created, size="1")), rx.table.cell(status),
                        custom_attrs={"data-user": u.username})


def _roles_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title("Roles of ", UsersState.editing),
        rx.alert_dialog.description(
            "Replace their roles with these, separated by commas: " + ", ".join(ROLES)
            + " or your own, such as finance. They apply within seconds.", size="2"),
        rx.input(value=UsersState.new_roles, on_change=UsersState.set_new_roles,
                 id="edit-roles", width="100%", margin_top="12px",
                 custom_attrs={"aria-label": "Roles"}),
        rx.cond(UsersState.roles_error != "",
                rx.text(UsersState.roles_error, color_scheme="red", size="1", role="alert")),
        rx.flex(
            rx.alert_dialog.cancel(rx.button("Cancel", variant="soft", color_scheme="gray",
                                             on_click=UsersState.cancel_roles)),
            rx.button("Save roles", on_click=UsersState.save_roles, id="confirm-roles"),
            spacing="3", justify="end", margin_top="12px"),
    ), open=UsersState.editing != "")


def _disable_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title("Disable ", UsersState.disabling, "?"),
        rx.alert_dialog.description(
            "They can no longer sign in, and their open sessions end within seconds. Users "
            "are never deleted: their flows and history stay.", size="2"),
        rx.flex(
            rx.alert_dialog.cancel(rx.button("Cancel", variant="soft", color_scheme="gray",
                                             on_click=UsersState.cancel_disable)),
            rx.button("Disable", color_scheme="red", on_click=UsersState.confirm_disable,
                      id="confirm-disable"),
            spacing="3", justify="end", margin_top="12px"),
    ), open=UsersState.disabling != "")


def users_page() -> rx.Component:
    table = rx.box(rx.table.root(
        rx.table.header(rx.table.row(rx.table.column_header_cell("User"),
                                     rx.table.column_header_cell("Roles"),
                                     rx.table.column_header_cell("Since"),
                                     rx.table.column_header_cell("Account"))),
        rx.table.body(rx.foreach(UsersState.users, _row)), width="100%", variant="surface"),
        overflow_x="auto", width="100%")
    body = rx.grid(table, _form(), _roles_dialog(), _disable_dialog(), spacing="4",
                   width="100%", align_items="start",
                   grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                          "minmax(0,3fr) minmax(0,2fr)"])
    return rx.vstack(
        page_header("Users", "Registration is closed: administrators add people here."),
        rx.cond(SessionState.is_admin, body, empty_state("lock", "Administrators only")),
        spacing="3", width="100%",
    )
