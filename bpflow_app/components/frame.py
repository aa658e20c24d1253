"""The frame's components: the outer circle around signed-in pages (sign-in form until
the `auth` circle succeeds, then the page inside the `main` circle), the navigation, and
the plain frame of public pages. Their state is `bpflow_app/frame_state.py`."""

from __future__ import annotations

from collections.abc import Callable

import reflex as rx

from bpflow_app import routes
from bpflow_app.components.fields import fields
from bpflow_app.components.language import language_menu
from bpflow_app.components.ui import state_badge
from bpflow_app.frame_state import REGISTRATION_OPEN, FrameState, SignInState
from bpflow_app.i18n import LangState, _
from bpflow_app.session import SessionState


def brand() -> rx.Component:
    return rx.link(
        rx.hstack(rx.image(src="/favicon.ico", width="26px", height="26px", alt=""),
                  rx.heading("bpflow", size="5", as_="span"), spacing="2", align="center"),
        href=routes.HOME, underline="none", color="inherit", aria_label=_("bpflow home"),
    )


def _nav_link(label: rx.Var, href: str, icon: str, badge: rx.Var | None = None) -> rx.Component:
    inner = [rx.icon(icon, size=16), rx.text(label, size="2")]
    if badge is not None:
        inner.append(rx.cond(badge > 0, rx.badge(badge, color_scheme="red", radius="full",
                                                 variant="solid", id=f"nav-{icon}-badge")))
    return rx.link(rx.hstack(*inner, spacing="1", align="center"), href=href,
                   underline="none", color_scheme="gray", high_contrast=True)


def _links() -> list[rx.Component]:
    return [
        _nav_link(_("My flows"), routes.FLOWS, "workflow"),
        _nav_link(_("Inbox"), routes.INBOX, "inbox", FrameState.unread),
        rx.cond(SessionState.is_admin, _nav_link(_("Templates"), routes.TEMPLATES, "files")),
        rx.cond(SessionState.is_admin, _nav_link(_("Users"), routes.USERS, "users")),
        rx.cond(SessionState.is_admin, _nav_link(_("Webhooks"), routes.WEBHOOKS, "webhook")),
    ]


def outer_steps() -> rx.Component:
    """The outer flow, auth → main, as two small circles (in words: signing in, then
    one's flows)."""
    return rx.hstack(
        state_badge("success", _("Sign in")),
        rx.icon("arrow-right", size=14, color=rx.color("gray", 9)),
        rx.cond(SessionState.outer != "",
                rx.link(state_badge(rx.cond(FrameState.main_state == "success", "success",
                                            "ready"), _("Your flows")),
                        href=routes.flow(SessionState.outer), underline="none",
                        aria_label=_("The outer flow")),
                state_badge("ready", _("Your flows"))),
        spacing="1", align="center", id="outer-steps",
    )


def tenant_name() -> rx.Component:
    """The signed-in user's organisation, unless it is `default` (SPEC §12)."""
    return rx.cond(SessionState.organisation != "",
                   rx.badge(rx.icon("building-2", size=14), SessionState.organisation,
                            variant="surface", size="2", id="tenant-name",
                            aria_label=_("Organisation")))


def navbar() -> rx.Component:
    user_menu = rx.menu.root(
        rx.menu.trigger(rx.button(rx.icon("circle-user", size=16), SessionState.username,
                                  variant="soft", size="2", id="user-menu",
                                  custom_attrs={"translate": "no"})),  # a name
        rx.menu.content(
            rx.menu.item(rx.link(_("My account"), href=routes.ACCOUNT, underline="none",
                                 color="inherit", width="100%"), as_child=True,
                         id="my-account"),
            rx.menu.item(_("Sign out"), on_click=SessionState.sign_out, id="sign-out"),
        ),
    )
    return rx.box(
        rx.flex(
            rx.hstack(brand(), tenant_name(),
                      rx.box(outer_steps(), display=["none", "none", "block"]),
                      spacing="4", align="center"),
            rx.flex(*_links(), language_menu(SessionState.choose_language), user_menu,
                    spacing="4", align="center", wrap="wrap", justify="end"),
            justify="between", align="center", wrap="wrap", spacing="3",
            max_width="1280px", margin_x="auto", padding_x="16px", padding_y="10px",
        ),
        as_="header",
        border_bottom=f"1px solid {rx.color('gray', 5)}",
        background=rx.color("gray", 1),
        position="sticky", top="0", z_index="10",
    )


def sign_in_panel() -> rx.Component:
    """The `auth` circle's box: its form, sent to its auth action."""
    return rx.center(
        rx.card(
            rx.form(
                rx.vstack(
                    rx.hstack(brand(), language_menu(SignInState.choose_here),
                              justify="between", align="center", width="100%"),
                    rx.heading(_("Sign in"), size="6", as_="h1"),
                    rx.text(_("The first circle of your outer flow: once it succeeds, your "
                              "flows continue where you left them."), size="2",
                            color_scheme="gray"),
                    fields(SignInState.fields),
                    rx.cond(SignInState.error != "",
                            rx.callout(SignInState.error, icon="triangle-alert",
                                       color_scheme="red", role="alert", width="100%")),
                    rx.button(_("Sign in"), type="submit", loading=SignInState.busy,
                              width="100%", size="3", id="sign-in-submit"),
                    rx.hstack(
                        rx.link(_("Leave a message as a guest"), href=routes.GUEST, size="2"),
                        rx.cond(REGISTRATION_OPEN,
                                rx.link(_("Create an account"), href=routes.REGISTER,
                                        size="2")),
                        justify="between", width="100%", wrap="wrap",
                    ),
                    spacing="4", width="100%",
                ),
                on_submit=SignInState.sign_in,
                on_mount=SignInState.load,
                reset_on_submit=False,
                aria_label=_("Sign in"),
            ),
            size="4", width="100%", max_width="420px",
        ),
        min_height="80vh", padding="16px",
    )


def loading_screen(**props) -> rx.Component:
    return rx.center(rx.spinner(size="3"), rx.text(_("Loading…"), size="2"), min_height="60vh",
                     spacing="3", aria_busy="true", **props)


def outer_circle(content: Callable[[], rx.Component]) -> Callable[[], rx.Component]:
    """Wrap a page: sign-in until authenticated, then the page in the signed-in frame."""

    def page() -> rx.Component:
        return rx.cond(
            FrameState.ready,  # set by the page's last on_load handler (frame_state.page_loads)
            rx.cond(
                SessionState.signed_in,
                rx.cond(  # the page's data was loaded for this session (not a former one)
                    FrameState.loaded_for == SessionState.session_key,
                    rx.box(navbar(),
                           rx.box(content(), as_="main", max_width="1280px", margin_x="auto",
                                  padding=["12px", "16px", "24px"], width="100%"),
                           min_height="100vh"),
                    loading_screen(on_mount=FrameState.catch_up),
                ),
                sign_in_panel(),
            ),
            loading_screen(),
        )

    page.__name__ = content.__name__
    return page


def public_frame(*children: rx.Component) -> rx.Component:
    """Pages without an account (home, guest): the brand and a sign-in link."""
    return rx.box(
        rx.box(
            rx.flex(brand(),
                    rx.hstack(language_menu(LangState.choose),
                              rx.link(_("Sign in"), href=routes.FLOWS, size="2"),
                              spacing="4", align="center"),
                    justify="between", align="center", max_width="1280px", margin_x="auto",
                    padding_x="16px", padding_y="10px"),
            as_="header", border_bottom=f"1px solid {rx.color('gray', 5)}",
        ),
        rx.box(*children, as_="main", max_width="760px", margin_x="auto",
               padding=["12px", "16px", "32px"]),
        min_height="100vh",
    )
