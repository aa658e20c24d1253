"""Users (`/users`, admins): who can sign in, a form to add someone, and disabling an
account (users are never deleted; a disabled account's sessions end within seconds).
Self-service registration is off unless `BPFLOW_REGISTRATION=open` (see
`pages/register.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import reflex as rx

from bpflow.access import ROLES, USER, Caller
from bpflow.backend import get_store
from bpflow.errors import BpflowError
from bpflow.security import normal_username, username_problem
from bpflow_app.boxview import clock_text
from bpflow_app.components.ui import empty_state, page_header
from bpflow_app.session import SessionState

MIN_PASSWORD = 8


@dataclass
class UserLine:
    username: str
    roles: str
    created: str
    disabled: str  # when it was disabled, "" while enabled


def user_problems(username: str, password: str) -> dict[str, str]:
    problems = {}
    problem = username_problem(normal_username(username))
    if problem:
        problems["username"] = problem[0].upper() + problem[1:]
    if len(password) < MIN_PASSWORD:
        problems["password"] = f"A password has at least {MIN_PASSWORD} characters"
    return problems


class UsersState(SessionState):
    users: list[UserLine] = []
    errors: dict[str, str] = {}
    busy: bool = False

    def _fetch(self) -> None:
        self.users = [UserLine(u["username"], ", ".join(u["roles"]), clock_text(u["created_at"]),
                               clock_text(u["disabled_at"]))
                      for u in get_store().list_users()]

    @rx.event
    def load(self):
        if self._visitor() is None:
            return None
        return self._guarded(lambda _: self._fetch(), admin=True)

    @rx.event
    def add(self, form_data: dict[str, Any]):
        self.busy = True
        yield
        try:
            yield self._add(form_data)
        finally:
            self.busy = False

    def _add(self, form_data: dict[str, Any]):
        return self._guarded(lambda _: self._add_user(form_data), admin=True)

    def _add_user(self, form_data: dict[str, Any]):
        name = str(form_data.get("username") or "").strip()
        password = str(form_data.get("password") or "")
        role = str(form_data.get("role") or USER)
        self.errors = user_problems(name, password)
        if self.errors:
            return rx.toast.error("Please check the form")
        try:
            get_store().add_user(name, password, [role if role in ROLES else USER])
        except ValueError as exc:
            self.errors = {"username": str(exc)}
            return rx.toast.error(str(exc))
        self._fetch()
        return [rx.toast.success(f"Added {name}"), rx.set_value("new-username", ""),
                rx.set_value("new-password", "")]


    @rx.event
    def disable(self, username: str):
        return self._guarded(lambda caller: self._disable(caller, username), admin=True)

    def _disable(self, caller: Caller, username: str):
        if username == caller.username:
            return rx.toast.error("You cannot disable your own account")
        try:
            changed = get_store().disable_user(username)
        except BpflowError as exc:
            return rx.toast.error(str(exc))
        self._fetch()
        return rx.toast.success(f"Disabled {username}" if changed
                                else f"{username} was disabled already")


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
        rx.el.label(rx.text("Role", size="2"), html_for="new-role"),
        rx.select.root(rx.select.trigger(id="new-role"), rx.select.content(
            *[rx.select.item(r, value=r) for r in ROLES]), name="role", default_value=USER),
        rx.button("Add user", type="submit", loading=UsersState.busy),
        spacing="2", width="100%", align="start"),
        on_submit=UsersState.add, reset_on_submit=False), width="100%")


def _row(u: rx.Var[UserLine]) -> rx.Component:
    status = rx.cond(u.disabled != "", rx.text("disabled " + u.disabled, size="1"),
                     rx.button("Disable", size="1", variant="soft", color_scheme="red",
                               on_click=UsersState.disable(u.username),
                               aria_label="Disable " + u.username))
    return rx.table.row(rx.table.cell(u.username), rx.table.cell(u.roles),
                        rx.table.cell(rx.text(u.created, size="1")), rx.table.cell(status))


def users_page() -> rx.Component:
    table = rx.box(rx.table.root(
        rx.table.header(rx.table.row(rx.table.column_header_cell("User"),
                                     rx.table.column_header_cell("Roles"),
                                     rx.table.column_header_cell("Since"),
                                     rx.table.column_header_cell("Account"))),
        rx.table.body(rx.foreach(UsersState.users, _row)), width="100%", variant="surface"),
        overflow_x="auto", width="100%")
    body = rx.grid(table, _form(), spacing="4", width="100%", align_items="start",
                   grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                          "minmax(0,3fr) minmax(0,2fr)"])
    return rx.vstack(
        page_header("Users", "Registration is closed: administrators add people here."),
        rx.cond(SessionState.is_admin, body, empty_state("lock", "Administrators only")),
        spacing="3", width="100%",
    )
