"""State of the users page (admins): the users of the admin's tenant, adding one (with
built-in or custom roles), changing a user's roles, giving someone a new password and
disabling an account, each after a confirmation; and the checks of a new account that
self-service registration shares. Its texts are in the admin's language (`gettext`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import reflex as rx

from bpflow import accounts, admin
from bpflow.access import USER, Caller, own_account_kept, valid_roles
from bpflow.backend import store_for
from bpflow.errors import BpflowError, Forbidden, NotFound
from bpflow.forms import FormError
from bpflow.security import normal_username, username_problem
from bpflow_app.boxview import iso_text
from bpflow_app.session import SessionState
from engine.model import ROLE_NAME

MIN_PASSWORD, MAX_PASSWORD = accounts.MIN_PASSWORD, accounts.MAX_PASSWORD
USERNAME_MAX = 100
USERNAME_MARKS = ". _ - @ + '"


@dataclass
class UserLine:
    username: str
    roles: str
    created: str  # ISO (components/when.py shows it)
    disabled: str  # when it was disabled (ISO), "" while enabled


def role_list(text: str) -> list[str]:
    """Roles typed as text: separated by commas (or spaces)."""
    return [r for r in text.replace(",", " ").split() if r]


def _english(message: str, **values: Any) -> str:
    return message % values if values else message


def password_error(password: str, gettext: Callable[..., str] = _english) -> str:
    """Why `password` cannot be one (`bpflow.accounts`' rule), in the page's language;
    "" when it can."""
    if accounts.password_problem(password) is None:
        return ""
    if len(password) < MIN_PASSWORD:
        return gettext("A password has at least %(count)s characters", count=MIN_PASSWORD)
    return gettext("A password has at most %(count)s characters", count=MAX_PASSWORD)


def user_problems(username: str, password: str,
                  gettext: Callable[..., str] = _english) -> dict[str, str]:
    problems = {}
    name = normal_username(username)
    if username_problem(name):
        problems["username"] = (
            gettext("A username has 1 to %(count)s characters", count=USERNAME_MAX)
            if not 1 <= len(name) <= USERNAME_MAX else
            gettext("A username has letters, digits and %(marks)s only, no spaces",
                    marks=USERNAME_MARKS))
    problem = password_error(password, gettext)
    if problem:
        problems["password"] = problem
    return problems


class UsersState(SessionState):
    users: list[UserLine] = []
    errors: dict[str, str] = {}
    busy: bool = False
    editing: str = ""  # whose roles the roles dialog changes
    new_roles: str = ""  # what that dialog holds
    roles_error: str = ""
    disabling: str = ""  # whose disabling waits for a confirmation
    resetting: str = ""  # whose new password the password dialog sets
    reset_error: str = ""

    def _fetch(self, caller: Caller) -> None:
        """The users of the admin's tenant (admins administer their tenant only)."""
        self.users = [UserLine(u["username"], ", ".join(u["roles"]), iso_text(u["created_at"]),
                               iso_text(u["disabled_at"]))
                      for u in store_for(caller).list_users()]

    def _roles_problem(self, roles: list[str]) -> str:
        """Why these roles cannot be given, in the page's language; "" when they can."""
        if not roles:
            return self.gettext("A user needs at least one role")
        try:
            valid_roles(roles)
        except ValueError:
            bad = sorted({r for r in roles if not ROLE_NAME.match(r)})
            return self.gettext(
                "Not a role name: %(names)s. A role is a lowercase letter, then up to 39"
                " lowercase letters, digits, _ or -.", names=", ".join(bad))
        return ""

    def _own_account(self, caller: Caller, username: str, roles: list[str] | None = None,
                     disable: bool = False) -> str:
        """Why an admin may not do this to their own account (`access.own_account_kept`),
        in the page's language; "" when they may."""
        try:
            own_account_kept(caller, username, roles, disable)
        except Forbidden:
            return (self.gettext("You cannot disable your own account") if disable else
                    self.gettext("You cannot take away your own admin role"))
        return ""

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
        self.errors = user_problems(name, password, self.gettext)
        problem = self._roles_problem(roles)
        if problem:
            self.errors["role"] = problem
        if self.errors:
            return rx.toast.error(self.gettext("Please check the form"))
        store = store_for(caller)  # the admin's tenant
        if store.username_taken(name):
            self.errors = {"username": self.gettext("The username %(name)s is taken",
                                                    name=normal_username(name))}
            return rx.toast.error(self.errors["username"])
        try:
            admin.add_user(store, caller, name, password, roles)
        except ValueError:  # taken meanwhile
            self.errors = {"username": self.gettext("The username %(name)s is taken",
                                                    name=normal_username(name))}
            return rx.toast.error(self.errors["username"])
        self._fetch(caller)
        return [rx.toast.success(self.gettext("Added %(name)s", name=normal_username(name))),
                rx.set_value("new-username", ""), rx.set_value("new-password", "")]

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
        self.roles_error = (self._roles_problem(roles)
                            or self._own_account(caller, username, roles))
        if self.roles_error:
            return rx.toast.error(self.roles_error)
        try:
            stored = admin.set_roles(store_for(caller), caller, username, roles)
        except NotFound:
            self.roles_error = self.gettext("There is no user %(name)s", name=username)
            return rx.toast.error(self.roles_error)
        self.editing, self.roles_error = "", ""
        self._fetch(caller)
        return rx.toast.success(self.gettext("%(name)s now has the roles %(roles)s",
                                             name=username, roles=", ".join(stored)))

    @rx.event
    def ask_reset(self, username: str):
        """Open the dialog giving `username` a new password."""
        self.resetting, self.reset_error = username, ""

    @rx.event
    def cancel_reset(self):
        self.resetting, self.reset_error = "", ""

    @rx.event
    def reset_password(self, form_data: dict[str, Any]):
        username, password = self.resetting, str(form_data.get("password") or "")
        return self._guarded(lambda caller: self._reset(caller, username, password),
                             admin=True)

    def _reset(self, caller: Caller, username: str, password: str):
        """A new password for `username` (not the admin's own: they change theirs on
        their account page); every session of theirs ends (`bpflow.accounts`)."""
        self.reset_error = password_error(password, self.gettext)
        if self.reset_error:
            return None
        try:
            accounts.reset_password(store_for(caller), username, password, by=caller)
        except Forbidden:
            self.reset_error = self.gettext(
                "Change your own password on your account page, with your current one")
            return None
        except NotFound:
            self.reset_error = self.gettext("There is no user %(name)s", name=username)
            return None
        except FormError:  # the rule checked above: not reached
            self.reset_error = password_error(password, self.gettext)
            return None
        self.resetting, self.reset_error = "", ""
        return [rx.toast.success(self.gettext(
            "%(name)s has a new password; their sessions have ended", name=username)),
            rx.set_value("reset-password", "")]

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
        problem = self._own_account(caller, username, disable=True)
        if problem:
            return rx.toast.error(problem)
        try:
            changed = admin.disable_user(store_for(caller), caller, username)
        except BpflowError:
            return rx.toast.error(self.gettext("There is no user %(name)s", name=username))
        self._fetch(caller)
        return rx.toast.success(self.gettext("Disabled %(name)s", name=username) if changed
                                else self.gettext("%(name)s was disabled already",
                                                  name=username))
