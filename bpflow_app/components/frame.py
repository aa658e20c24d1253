"""The frame's components: the outer circle around signed-in pages (sign-in form until
the `auth` circle succeeds, then the page inside the `main` circle), the navigation, and
the plain frame of public pages. Their state is `bpflow_app/frame_state.py`."""

from __future__ import annotations

from collections.abc import Callable

import reflex as rx

from bpflow_app import routes
from bpflow_app.components.fields import fields
from bpflow_app.components.language import language_menu
from bpflow_app.components.later import later
from bpflow_app.components.ui import state_badge
from bpflow_app.frame_state import REGISTRATION_OPEN, FrameState, SignInState
from bpflow_app.i18n import LangState, _
from bpflow_app.session import SessionState


def brand() -> rx.Component:
    return rx.link(
        rx.hstack(rx.image(src="/favicon.ico", width="26px", height="26px", alt=""),
                  rx.text("bpflow", size="5", weight="bold", as_="span"), spacing="2",
                  align="center"),
        href=routes.HOME, underline="none", color="inherit", aria_label=_("bpflow home"),
    )


def _nav_link(label: rx.Var, href: str, icon: str, badge: rx.Var | None = None) -> rx.Component:
    inner = [rx.icon(icon, size=16), rx.text(label, size="2")]
    if badge is not None:
        inner.append(rx.cond(badge > 0, rx.badge(badge, color_scheme="red", radius="full",
                                                 variant="solid", id=f"nav-{icon}-badge")))
    # Each page's code is its own file, which the router fetches ahead (`PREFETCH`), so
    # going to a page does not wait for its code.
    return rx.link(rx.hstack(*inner, spacing="1", align="center"), href=href,
                   underline="none", color_scheme="gray", high_contrast=True,
                   custom_attrs={"prefetch": PREFETCH})


# When the router fetches the linked pages' code. On a first visit (the page's own
# scripts came over the network), once the link is on the screen: after the page is
# painted, so that its first paint does not share the line with them (a phone's first
# load: bench/lighthouse.py). When the browser had the app's files already (its scripts
# came from its cache; they are immutable), as soon as the link is drawn: the others
# are in the cache too, and a click soon after the page shows does not wait for them
# (bench/ui_latency.py, the inbox opened in the app). Decided once per page load.
PREFETCH = rx.Var(
    "((globalThis.__bpflowCached ??= performance.getEntriesByType('resource').some("
    "(e) => e.name.endsWith('.js') && e.transferSize === 0 && e.decodedBodySize > 0))"
    " ? 'render' : 'viewport')", _var_type=str)


def _links() -> list[rx.Component]:
    return [
        _nav_link(_("My flows"), routes.FLOWS, "workflow"),
        _nav_link(_("Inbox"), routes.INBOX, "inbox", FrameState.unread),
        rx.cond(SessionState.is_admin, _nav_link(_("Templates"), routes.TEMPLATES, "files")),
        rx.cond(SessionState.can_design, _nav_link(_("Design"), routes.DESIGN, "pen-tool")),
        rx.cond(SessionState.is_admin, _nav_link(_("Users"), routes.USERS, "users")),
        rx.cond(SessionState.is_admin, _nav_link(_("Webhooks"), routes.WEBHOOKS, "webhook")),
        rx.cond(SessionState.is_admin, _nav_link(_("Audit log"), routes.AUDIT, "scroll-text")),
        rx.cond(SessionState.is_admin, _nav_link(_("Operations"), routes.OPERATIONS,
                                                 "activity")),
    ]


def outer_steps() -> rx.Component:
    """The outer flow (SPEC §9), `auth` → `main`, as two small circles named in the
    reader's words; the second opens the outer flow's page."""
    return rx.hstack(
        state_badge("success", _("Signed in")),
        rx.icon("arrow-right", size=14, color=rx.color("gray", 9), aria_hidden="true"),
        rx.cond(SessionState.outer != "",
                rx.link(state_badge(rx.cond(FrameState.main_state == "success", "success",
                                            "ready"), _("Working")),
                        href=routes.flow(SessionState.outer), underline="none",
                        title=_("The outer flow")),
                state_badge("ready", _("Working"))),
        spacing="1", align="center", id="outer-steps",
    )


def tenant_name() -> rx.Component:
    """The signed-in user's organisation, unless it is `default` (SPEC §12)."""
    return rx.cond(SessionState.organisation != "",
                   rx.badge(rx.icon("building-2", size=14, aria_hidden="true"),
                            SessionState.organisation, variant="surface", size="2",
                            id="tenant-name", title=_("Organisation")))


def navbar() -> rx.Component:
    """The page's `header` landmark: the brand, the outer flow, the `nav` of the pages, the
    language and the user's menu."""
    user_menu = rx.menu.root(
        rx.menu.trigger(rx.button(rx.icon("circle-user", size=16), SessionState.username,
                                  variant="soft", size="2", id="user-menu",
                                  custom_attrs={"translate": "no"})),
        rx.menu.content(
            rx.menu.item(rx.link(_("My account"), href=routes.ACCOUNT, underline="none",
                                 color="inherit", width="100%"), as_child=True,
                         id="my-account"),
            rx.menu.item(rx.link(_("My substitute"), href=routes.SUBSTITUTE, underline="none",
                                 color="inherit", width="100%"), as_child=True,
                         id="my-substitute"),
            rx.menu.item(_("Sign out"), on_click=SessionState.sign_out, id="sign-out"),
        ),
    )
    return rx.el.header(
        rx.flex(
            rx.hstack(brand(), tenant_name(),
                      rx.box(outer_steps(), display=["none", "none", "block"]),
                      spacing="4", align="center"),
            # on a phone the pages take a row of their own, under the brand and the menus
            rx.el.nav(rx.flex(*_links(), spacing=rx.breakpoints(initial="3", md="4"),
                              align="center", wrap="wrap"),
                      aria_label=_("Pages"), order=rx.breakpoints(initial="3", md="2"),
                      width=rx.breakpoints(initial="100%", md="auto"),
                      margin_left=rx.breakpoints(initial="0", md="auto")),
            rx.hstack(language_menu(SessionState.choose_language), user_menu, spacing="4",
                      align="center", order=rx.breakpoints(initial="2", md="3")),
            justify="between", align="center", wrap="wrap",
            spacing=rx.breakpoints(initial="2", md="4"),
            max_width="1280px", margin_x="auto", padding_x="16px", padding_y="10px",
        ),
        border_bottom=f"1px solid {rx.color('gray', 5)}",
        background=rx.color("gray", 1),
        position="sticky", top="0", z_index="10",
    )


def sign_in_panel() -> rx.Component:
    """The `auth` circle's box: its form, sent to its auth action."""
    return rx.el.main(rx.center(
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
    ))


def loading_screen(**props) -> rx.Component:
    return rx.el.main(rx.center(rx.spinner(size="3"), rx.text(_("Loading…"), size="2"),
                                min_height="60vh", spacing="3", aria_busy="true", **props))


def outer_circle(content: Callable[[], rx.Component]) -> Callable[[], rx.Component]:
    """Wrap a page: sign-in until authenticated, then the page in the signed-in frame."""

    def page() -> rx.Component:
        return rx.cond(
            FrameState.ready,  # set by the page's last on_load handler (frame_state.page_loads)
            rx.cond(
                SessionState.signed_in,
                rx.cond(  # the page's data was loaded for this session (not a former one)
                    FrameState.loaded_for == SessionState.session_key,
                    # drawn in slices (components/later.py): one long task less
                    later(loading_screen(),
                          rx.box(navbar(),
                                 rx.el.main(content(), max_width="1280px", margin_x="auto",
                                            padding=["12px", "16px", "24px"], width="100%",
                                            box_sizing="border-box"),
                                 min_height="100vh")),
                    loading_screen(on_mount=FrameState.catch_up),
                ),
                sign_in_panel(),
            ),
            loading_screen(),
        )

    page.__name__ = content.__name__
    # Reflex compiles a page's components into a module named after the module of the
    # function given to add_page: the page's own, so that each route loads its own
    # components only (with this module's, every signed-in route loaded all of them).
    page.__module__ = content.__module__
    return page


def public_frame(*children: rx.Component) -> rx.Component:
    """Pages without an account (home, guest): the brand and a sign-in link."""
    return rx.box(
        rx.el.header(
            rx.flex(brand(),
                    rx.hstack(language_menu(LangState.choose),
                              rx.link(_("Sign in"), href=routes.FLOWS, size="2"),
                              spacing="4", align="center"),
                    justify="between", align="center", max_width="1280px", margin_x="auto",
                    padding_x="16px", padding_y="10px"),
            border_bottom=f"1px solid {rx.color('gray', 5)}",
        ),
        rx.el.main(*children, max_width="760px", margin_x="auto",
                   padding=["12px", "16px", "32px"]),
        min_height="100vh",
    )
