"""State of self-service registration: closed unless the server runs with
`BPFLOW_REGISTRATION=open`; new accounts get the `user` role only. What is wrong with the
form is said in the page's language."""

from __future__ import annotations

from typing import Any

import reflex as rx

from bpflow.access import USER
from bpflow.backend import get_store
from bpflow.store.public import (
    USERNAME_MAX,
    USERNAME_PUNCTUATION,
    normal_username,
    username_problem,
)
from bpflow_app.frame_state import REGISTRATION_OPEN
from bpflow_app.i18n import LangState
from bpflow_app.pages.users_state import MIN_PASSWORD


class RegisterState(LangState):
    errors: dict[str, str] = {}
    done: bool = False

    def _username_problem(self, name: str) -> str | None:
        """Why `name` (normalised) cannot be a username, in the reader's words."""
        if not 1 <= len(name) <= USERNAME_MAX:
            return self.gettext("A username has 1 to %(most)s characters", most=USERNAME_MAX)
        if username_problem(name) is None:
            return None
        # the first character that makes it one (a prefix is checked as a whole name)
        bad = next((ch for i, ch in enumerate(name) if username_problem(name[:i + 1])),
                   name[-1])
        return self.gettext("A username has letters, digits and %(signs)s only (not "
                            "“%(char)s”)", signs=" ".join(sorted(USERNAME_PUNCTUATION)), char=bad)

    def _problems(self, name: str, password: str) -> dict[str, str]:
        problems = {}
        problem = self._username_problem(normal_username(name))
        if problem:
            problems["username"] = problem
        if len(password) < MIN_PASSWORD:
            problems["password"] = self.gettext(
                "A password has at least %(least)s characters", least=MIN_PASSWORD)
        return problems

    @rx.event
    def register(self, form_data: dict[str, Any]):
        if not REGISTRATION_OPEN:
            return rx.toast.error(self.gettext("Registration is closed"))
        name = str(form_data.get("username") or "").strip()
        password = str(form_data.get("password") or "")
        self.errors = self._problems(name, password)
        if not self.errors:
            try:
                get_store().add_user(name, password, [USER])
                self.done = True
            except ValueError:  # taken meanwhile (the only refusal left)
                self.errors = {"username": self.gettext(
                    "There is already an account named %(name)s", name=name)}
        return None
