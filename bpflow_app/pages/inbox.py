"""The inbox (`/inbox`): approval mail, in-site messages and guest messages in tabs."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.components.ui import empty_state, page_header, row_badge
from bpflow_app.pages.inbox_state import InboxState, MailView
from bpflow_app.session import SessionState

S = InboxState
TABS = (("approval", "Approvals", "stamp"), ("message", "Messages", "message-square"),
        ("guest", "Guest messages", "user-round"))


def _tab(kind: str, label: str, icon: str) -> rx.Component:
    return rx.tabs.trigger(
        rx.hstack(rx.icon(icon, size=14), label,
                  rx.cond(S.unread[kind] > 0, rx.badge(S.unread[kind], color_scheme="red",
                                                       radius="full", variant="solid",
                                                       class_name="unread")),
                  spacing="2", align="center"),
        value=kind,
    )


def _signed(m: rx.Var[MailView]) -> rx.Component:
    return rx.vstack(
        rx.cond(m.signature_ok,
                rx.badge(rx.icon("shield-check", size=12), "Signature verified",
                         color_scheme="green", variant="soft"),
                rx.callout(m.notice, icon="shield-alert", color_scheme="red", role="alert",
                           class_name="tampered", width="100%")),
        rx.el.details(rx.el.summary(rx.text("Signed payload", size="2", as_="span")),
                      rx.el.pre(m.payload, class_name="result-text signed-payload")),
        spacing="2", width="100%", align="start",
    )


def _decide(m: rx.Var[MailView]) -> rx.Component:
    return rx.vstack(
        rx.text_area(placeholder="Comment (optional)", on_blur=S.set_comment, rows="2",
                     width="100%", custom_attrs={"aria-label": "Comment"}, key=m.id),
        rx.hstack(
            rx.button(rx.icon("check", size=14), "Approve", color_scheme="green",
                      on_click=S.decide(m.id, "approved"), loading=S.deciding == m.id),
            rx.button(rx.icon("x", size=14), "Reject", color_scheme="red", variant="soft",
                      on_click=S.decide(m.id, "rejected"), loading=S.deciding == m.id),
            spacing="2",
        ),
        spacing="2", width="100%",
    )


def _opened(m: rx.Var[MailView]) -> rx.Component:
    return rx.vstack(
        rx.separator(),
        rx.text(m.body, size="2", class_name="mail-body"),
        rx.cond(m.instance != "", rx.link("Open the flow", href=routes.flow(m.instance),
                                          size="2")),
        rx.cond(m.kind == "approval", _signed(m)),
        rx.cond(m.decision != "", rx.text("Decided: ", m.decision,
                                          rx.cond(m.comment != "", " — " + m.comment, ""),
                                          size="2", weight="medium")),
        rx.cond(m.open, _decide(m)),
        spacing="3", width="100%", align="start",
    )


def _mail(m: rx.Var[MailView]) -> rx.Component:
    """A mail of the list: plain elements in the theme's tokens (assets/styles.css), so a
    page of 25 costs a few elements each to draw; the opened one gets the full box."""
    return rx.el.div(
        rx.el.div(
            rx.cond(~m.read, rx.el.span(class_name="mail-dot", aria_label="unread",
                                        role="img")),
            rx.el.div(
                rx.el.p(m.subject, class_name="mail-subject"),
                rx.el.p("From ", m.sender, " · ", m.created, class_name="mail-meta"),
                class_name="mail-title"),
            rx.cond(m.decision != "", row_badge(m.decision, m.decision)),
            rx.cond(~m.signature_ok, row_badge("failure", "tampered")),
            rx.cond(m.open, row_badge("pending", "waiting for you")),
            rx.el.button(rx.cond(S.opened == m.id, "Close", "Open"), type="button",
                         class_name="row-button", on_click=S.toggle(m.id),
                         aria_label=rx.cond(S.opened == m.id, "Close ", "Open ") + m.subject),
            class_name="mail-head",
        ),
        rx.cond(S.opened == m.id, _opened(m)),
        class_name=rx.cond(m.read, "mail", "mail unread"),
        custom_attrs={"data-mail": m.id, "data-kind": m.kind},
    )


def _list() -> rx.Component:
    pager = rx.cond(S.pages > 1, rx.hstack(
        rx.button("Newer", variant="soft", on_click=S.turn(-1), disabled=S.page == 0),
        rx.text("Page ", S.page + 1, " of ", S.pages, size="2"),
        rx.button("Older", variant="soft", on_click=S.turn(1),
                  disabled=S.page + 1 >= S.pages),
        justify="end", width="100%", align="center"))
    return rx.cond(
        S.loading,
        rx.center(rx.spinner(size="3"), padding="32px", aria_busy="true"),
        rx.cond(S.mails.length() > 0,
                rx.vstack(rx.foreach(S.mails, _mail), pager, spacing="2", width="100%",
                          id="mail-list"),
                rx.box(empty_state("inbox", "Nothing here", "New mail will appear in this tab."),
                       id="inbox-empty", width="100%")),
    )


def inbox_page() -> rx.Component:
    tabs = [_tab(*t) for t in TABS[:2]]
    tabs.append(rx.cond(SessionState.is_admin, _tab(*TABS[2])))
    return rx.vstack(
        page_header("Inbox", "Approvals waiting for you, messages, and notes from guests."),
        rx.tabs.root(rx.tabs.list(*tabs), value=S.kind, on_change=S.show, width="100%"),
        _list(),
        spacing="3", width="100%",
    )
