"""State of one's own account page (`/account`): who they are (name, roles,
organisation) and changing their password with the current one (`bpflow.accounts`: a
wrong current password counts as a failed sign-in; every other session of theirs ends,
this one goes on with a new token)."""

from __future__ import annotations

from typing import Any

import reflex as rx

from bpflow import accounts, auth
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import RateLimited
from bpflow.forms import FormError
from bpflow_app.pages.users_state import password_error
from bpflow_app.session import SessionState

FIELDS = ("current-password", "new-password", "new-password-again")  # the inputs' ids


class AccountState(SessionState):
    roles: list[str] = []
    errors: dict[str, str] = {}  # by field: current, new, again
    busy: bool = False

    def _fetch(self, caller: Caller) -> None:
        self.roles = list(caller.roles)

    @rx.event
    def load(self):
        self.errors = {}
        if self._visitor() is None:
            return None
        return self._guarded(self._fetch)

    @rx.event
    def change_password(self, form_data: dict[str, Any]):
        self.busy = True
        yield
        try:
            yield self._guarded(lambda caller: self._change(caller, form_data))
        finally:
            self.busy = False

    def _change(self, caller: Caller, form_data: dict[str, Any]):
        current = str(form_data.get("current") or "")
        new = str(form_data.get("new") or "")
        again = str(form_data.get("again") or "")
        errors = {}
        if not current:
            errors["current"] = self.gettext("Enter your current password")
        problem = password_error(new, self.gettext)
        if problem:
            errors["new"] = problem
        elif new != again:
            errors["again"] = self.gettext("The new password and its repetition differ")
        self.errors = errors
        if errors:
            return None
        try:
            user = accounts.change_password(store_for(caller), caller, current, new,
                                            self._client())
        except RateLimited as exc:
            self.errors = {"current": self.gettext(
                "Too many failed attempts; try again in %(seconds)s s",
                seconds=exc.retry_after)}
            return None
        except FormError as exc:
            self.errors = ({"current": self.gettext("Wrong password")}
                           if "current_password" in exc.errors else {"new": problem})
            return None
        # every other session of theirs has ended; this one goes on with a new token
        self.token = auth.issue_token(user)
        return [rx.toast.success(self.gettext(
            "Your password was changed; your other sessions have ended")),
            *[rx.set_value(field, "") for field in FIELDS]]
