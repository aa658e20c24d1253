"""The page of a path the app does not have (Reflex's `404` route): the frame of the public
pages, what happened, and the ways back in."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.catalogs import N_
from bpflow_app.components.frame import public_frame
from bpflow_app.i18n import _

TITLE = N_("Page not found")


def not_found_page() -> rx.Component:
    return public_frame(
        rx.vstack(
            rx.heading(_(TITLE), size="7", as_="h1"),
            rx.text(_("There is no page at this address. It may have been mistyped, or the "
                      "link that brought you here is out of date."), color_scheme="gray"),
            rx.card(
                rx.hstack(
                    rx.link(rx.hstack(rx.icon("house", size=16), rx.text(_("Home")),
                                      spacing="1", align="center"),
                            href=routes.HOME, id="not-found-home"),
                    rx.link(rx.hstack(rx.icon("workflow", size=16), rx.text(_("My flows")),
                                      spacing="1", align="center"),
                            href=routes.FLOWS, id="not-found-flows"),
                    spacing="5", align="center",
                ),
                width="100%", size="3",
            ),
            spacing="4", width="100%", id="not-found",
        ),
    )
