"""Self-service registration (`/register`): closed unless the server runs with
`BPFLOW_REGISTRATION=open`; new accounts get the `user` role only."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.catalogs import N_
from bpflow_app.components.frame import public_frame
from bpflow_app.frame_state import REGISTRATION_OPEN
from bpflow_app.i18n import _, rich
from bpflow_app.pages.register_state import RegisterState


def _open() -> rx.Component:
    def err(name: str) -> rx.Component:
        return rx.cond(RegisterState.errors.contains(name),
                       rx.text(RegisterState.errors[name], color_scheme="red", size="1",
                               role="alert", id=f"reg-{name}-error"))

    return rx.cond(RegisterState.done, rx.callout(
        rx.text(rich(N_("Your account is ready. %(sign_in)s"),
                     sign_in=lambda: rx.link(_("Sign in"), href=routes.FLOWS))),
        icon="circle-check", color_scheme="green"), rx.form(rx.vstack(
            rx.el.label(rx.text(_("Username"), size="2"), html_for="reg-username"),
            rx.input(name="username", id="reg-username", width="100%",
                     auto_complete="username"), err("username"),
            rx.el.label(rx.text(_("Password"), size="2"), html_for="reg-password"),
            rx.input(name="password", id="reg-password", type="password", width="100%",
                     auto_complete="new-password"),
            err("password"),
            rx.button(_("Create account"), type="submit"), spacing="2", align="start"),
            on_submit=RegisterState.register, aria_label=_("Create an account")))


def register_page() -> rx.Component:
    closed = rx.callout(_("Registration is closed. An administrator can create an account "
                          "for you."), icon="lock", color_scheme="gray")
    return public_frame(rx.vstack(rx.heading(_("Create an account"), size="7", as_="h1"),
                                  rx.card(_open() if REGISTRATION_OPEN else closed,
                                          width="100%"),
                                  spacing="4", width="100%"))
