"""State of the users page (admins): the users of the admin's tenant, adding one (with
built-in or custom roles), changing a user's roles and disabling an account, each after a
confirmation; and the checks of a new account that self-service registration shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import reflex as rx

from bpflow.access import USER, Caller, own_account_kept, valid_roles
from bpflow.backend import store_for
from bpflow.errors import BpflowError
from bpflow.security import normal_username, username_problem
from bpflow_app.boxview import clock_text
from bpflow_app.session import SessionState

MIN_PASSWORD = 8


@dataclass
class UserLine:
    username: str
    roles: str
    created: str
    disabled: str  # when it was disabled, "" while enabled


def role_list(text: str) -> list[str]:
    """Roles typed as text: separated by commas (or spaces)."""
    return [r for r in text.replace(",", " ").split() if r]


def sentence(exc: Exception) -> str:
    text = str(exc)
    return text[:1].upper() + text[1:]


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
    editing: str = ""  # whose roles the roles dialog changes
    new_roles: str = ""  # what that dialog holds
    roles_error: str = ""
    disabling: str = ""  # whose disabling waits for a confirmation

    def _fetch(self, caller: Caller) -> None:
        """The users of the admin's tenant (admins administer their tenant only)."""
        self.users = [UserLine(u["username"], ", ".join(u["roles"]), clock_text(u["created_at"]),
                               clock_text(u["disabled_at"]))
                      for u in store_for(caller).list_users()]

    @rx.event
    def load(self):
        if self._visitor() is None:
            return None
        return self._guarded(self._fetch, admin=True)

    @rx.event
    def add(self, form_data: dict[str, Any]):
        self.busy = True
        yield
        try:
            yield self._add(form_data)
        finally:
            self.busy = False

    def _add(self, form_data: dict[str, Any]):
        return self._guarded(lambda caller: self._add_user(caller, form_data), admin=True)

    def _add_user(self, caller: Caller, form_data: dict[str, Any]):
        name = str(form_data.get("username") or "").strip()
        password = str(form_data.get("password") or "")
        roles = role_list(str(form_data.get("role") or USER))
        self.errors = user_problems(name, password)
        if not roles:
            self.errors["role"] = "A user needs at least one role"
        if self.errors:
            return rx.toast.error("Please check the form")
        try:
            roles = valid_roles(roles)
        except ValueError as exc:
            self.errors = {"role": sentence(exc)}
            return rx.toast.error("Please check the roles")
        try:
            store_for(caller).add_user(name, password, roles)  # in the admin's tenant
        except ValueError as exc:
            self.errors = {"username": str(exc)}
            return rx.toast.error(str(exc))
        self._fetch(caller)
        return [rx.toast.success(f"Added {name}"), rx.set_value("new-username", ""),
                rx.set_value("new-password", "")]


    @rx.event
    def ask_roles(self, username: str, roles: str):
        """Open the roles dialog of `username` (holding their roles now)."""
        self.editing, self.new_roles, self.roles_error = username, roles, ""

    @rx.event
    def set_new_roles(self, text: str):
        self.new_roles = text

    @rx.event
    def cancel_roles(self):
        self.editing, self.roles_error = "", ""

    @rx.event
    def save_roles(self):
        username, roles = self.editing, role_list(self.new_roles)
        return self._guarded(lambda caller: self._set_roles(caller, username, roles),
                             admin=True)

    def _set_roles(self, caller: Caller, username: str, roles: list[str]):
        try:
            own_account_kept(caller, username, roles)
            stored = store_for(caller).set_roles(username, roles)
        except (ValueError, BpflowError) as exc:
            self.roles_error = sentence(exc)
            return rx.toast.error(self.roles_error)
        self.editing, self.roles_error = "", ""
        self._fetch(caller)
        return rx.toast.success(f"{username} now has the roles {', '.join(stored)}")

    @rx.event
    def ask_disable(self, username: str):
        """Open the confirmation of disabling `username`."""
        self.disabling = username

    @rx.event
    def cancel_disable(self):
        self.disabling = ""

    @rx.event
    def confirm_disable(self):
        username, self.disabling = self.disabling, ""
        return self._guarded(lambda caller: self._disable(caller, username), admin=True)

    @rx.event
    def disable(self, username: str):
        return self._guarded(lambda caller: self._disable(caller, username), admin=True)

    def _disable(self, caller: Caller, username: str):
        try:
            own_account_kept(caller, username, disable=True)
            changed = store_for(caller).disable_user(username)
        except BpflowError as exc:
            return rx.toast.error(sentence(exc))
        self._fetch(caller)
        return rx.toast.success(f"Disabled {username}" if changed
                                else f"{username} was disabled already")
