"""The flow page's copies and urges (SPEC §15): the Urge button (for the starter and
admins, disabled with the time left while the hourly limit holds), the CC button and its
dialog, and who was copied with whether each has read it."""

from __future__ import annotations

from typing import Any

import reflex as rx

from bpflow_app.catalogs import N_
from bpflow_app.components.names import NO, data
from bpflow_app.components.when import when
from bpflow_app.flowview import CopyView
from bpflow_app.i18n import _, rich


def nudge_bar(S: Any) -> rx.Component:
    """Urge and CC, each explained; the Urge button says when it may be used again."""
    urge = rx.cond(S.can_urge, rx.hstack(
        rx.button(rx.icon("bell-ring", size=14), _("Urge"), variant="soft", size="2",
                  on_click=S.urge, loading=S.urging, disabled=S.urge_at != "",
                  id="urge-flow", custom_attrs={"aria-describedby": "urge-flow-hint"}),
        rx.text(rx.cond(S.urge_at != "",
                        rich(N_("Urged; you may urge again %(when)s"),
                             when=lambda: when(S.urge_at, relative=True)),
                        _("Remind whoever the open steps wait for, by mail (once an hour).")),
                size="1", color_scheme="gray", id="urge-flow-hint"),
        spacing="2", align="center"))
    copy = rx.cond(S.can_copy, rx.hstack(
        rx.button(rx.icon("copy", size=14), _("CC"), variant="soft", size="2",
                  on_click=S.ask_copy, id="copy-flow",
                  custom_attrs={"aria-describedby": "copy-flow-hint"}),
        rx.text(_("Send someone a copy: they may follow this flow read-only."), size="1",
                color_scheme="gray", id="copy-flow-hint"),
        spacing="2", align="center"))
    return rx.cond(S.can_urge | S.can_copy,
                   rx.vstack(urge, copy, spacing="2", width="100%", id="flow-nudges"))


def _copy_row(c: rx.Var[CopyView]) -> rx.Component:
    return rx.el.li(
        rx.hstack(
            data(c.user, class_name="copy-user"),
            rx.cond(c.step != "", rx.text(rich(N_("for %(step)s"),
                                               step=lambda: data(c.step)),
                                          size="1", color_scheme="gray")),
            rx.spacer(),
            rx.cond(c.read != "",
                    rx.badge(rich(N_("read %(when)s"),
                                  when=lambda: when(c.read, relative=True)),
                             color_scheme="green", variant="soft", class_name="copy-read"),
                    rx.badge(_("not read yet"), color_scheme="gray", variant="soft",
                             class_name="copy-unread")),
            width="100%", align="center", spacing="2"),
        custom_attrs={"data-copied": c.user}, class_name="copy-row", list_style="none")


def copies_card(S: Any) -> rx.Component:
    """Who was copied on the flow, and who has read it."""
    return rx.cond(S.copies.length() > 0, rx.card(
        rx.vstack(
            rx.heading(_("Copied to"), size="3", as_="h2"),
            rx.el.ul(rx.foreach(S.copies, _copy_row), padding="0", margin="0",
                     width="100%"),
            spacing="2", width="100%"),
        width="100%", id="flow-copies"))


def copy_dialog(S: Any) -> rx.Component:
    """Name the people to copy (usernames) and an optional comment."""
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title(_("Send a copy")),
            rx.alert_dialog.description(
                _("Each person gets the flow in their inbox under “Copied to me” and may "
                  "follow it read-only."), size="2"),
            rx.form(
                rx.vstack(
                    rx.el.label(rx.text(_("To (usernames, separated by commas)"), size="2",
                                        weight="medium"), html_for="copy-users"),
                    rx.input(name="users", id="copy-users", width="100%", max_length=2000,
                             custom_attrs=NO),
                    rx.input(name="comment", placeholder=_("Comment (optional)"),
                             width="100%", max_length=2000, id="copy-comment",
                             aria_label=_("Comment")),
                    rx.cond(S.copy_error != "", rx.text(S.copy_error, color_scheme="red",
                                                        size="2", role="alert")),
                    rx.flex(
                        rx.alert_dialog.cancel(rx.button(
                            _("Cancel"), type="button", variant="soft", color_scheme="gray",
                            on_click=S.cancel_copy)),
                        rx.button(_("Send copies"), type="submit", id="confirm-copy"),
                        spacing="3", justify="end", width="100%"),
                    spacing="3", width="100%", margin_top="12px"),
                on_submit=S.send_copy, reset_on_submit=False),
        ),
        open=S.copy_open,
        on_open_change=lambda _open: S.cancel_copy,
    )
