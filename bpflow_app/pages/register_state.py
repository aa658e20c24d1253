"""State of self-service registration: closed unless the server runs with
`BPFLOW_REGISTRATION=open`; new accounts get the `user` role only."""

from __future__ import annotations

from typing import Any

import reflex as rx

from bpflow.access import USER
from bpflow.backend import get_store
from bpflow_app.frame_state import REGISTRATION_OPEN
from bpflow_app.pages.users_state import user_problems


class RegisterState(rx.State):
    errors: dict[str, str] = {}
    done: bool = False

    @rx.event
    def register(self, form_data: dict[str, Any]):
        if not REGISTRATION_OPEN:
            return rx.toast.error("Registration is closed")
        name = str(form_data.get("username") or "").strip()
        password = str(form_data.get("password") or "")
        self.errors = user_problems(name, password)
        if not self.errors:
            try:
                get_store().add_user(name, password, [USER])
                self.done = True
            except ValueError as exc:
                self.errors = {"username": str(exc)}
        return None
