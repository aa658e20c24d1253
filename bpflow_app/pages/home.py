"""Home page: what bpflow is and where to start."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.catalogs import N_
from bpflow_app.components.language import language_menu
from bpflow_app.i18n import LangState, _

TAGLINE = N_("Business flows drawn as circles and arrows.")


def _nav_card(title: rx.Var, text: rx.Var, href: str, icon: str, link_id: str) -> rx.Component:
    """A card-shaped link to one of the entry points of the app."""
    return rx.link(
        rx.card(
            rx.hstack(
                rx.icon(icon, size=22),
                rx.vstack(rx.text(title, weight="bold", size="3"),
                          rx.text(text, size="2", color_scheme="gray"),
                          spacing="1", align="start"),
                spacing="3", align="center",
            ),
            size="2", width="100%",
        ),
        href=href, id=link_id, underline="none", width="100%",
    )


def index() -> rx.Component:
    return rx.el.main(
        rx.container(
            rx.vstack(
                rx.hstack(
                    rx.hstack(
                        rx.image(src="/favicon.ico", width="40px", height="40px", alt=""),
                        rx.heading("bpflow", size="9", as_="h1"),
                        spacing="3", align="center",
                    ),
                    language_menu(LangState.choose),
                    justify="between", align="center", width="100%",
                ),
                rx.text(_(TAGLINE), size="5", color_scheme="gray"),
                rx.grid(
                    _nav_card(_("Sign in"),
                              _("Walk through your flows and clear your approvals."),
                              routes.FLOWS, "log-in", "home-sign-in"),
                    _nav_card(_("Guest message"), _("Leave a message without an account."),
                              routes.GUEST, "mail", "home-guest-message"),
                    columns=rx.breakpoints(initial="1", sm="2"), spacing="4", width="100%",
                ),
                spacing="5", align="start", padding_y="15vh",
            ),
            size="2",
        ),
        min_height="100vh",
    )
