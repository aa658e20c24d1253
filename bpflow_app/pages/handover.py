"""The hand-over dialog (SPEC §15): transfer or delegate an approval (the inbox's mail
card, the flow page's approval box) or a task (the inbox's Tasks list)."""

from __future__ import annotations

import reflex as rx

from bpflow_app.i18n import _
from bpflow_app.pages.mail_state import MailState


def hand_dialog(state, texts: dict[str, rx.Component], prefix: str, key: rx.Var,
                is_open: rx.Var) -> rx.Component:
    """Transfer or delegate (`state.hand_how`) an approval or a task: whom to (a picker of
    `state.people`), a comment, and the button that confirms it; `texts` says what each
    does; the elements' ids start with `prefix`."""
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title(rx.cond(state.hand_how == "delegate", _("Delegate"),
                                      _("Transfer"))),
        rx.alert_dialog.description(rx.cond(state.hand_how == "delegate", texts["delegate"],
                                            texts["transfer"]), size="2"),
        rx.el.label(rx.text(_("To"), size="2", weight="medium"), html_for=prefix + "hand-to"),
        rx.select(state.people, value=state.hand_to, on_change=state.set_hand_to,
                  placeholder=_("Choose a person…"), width="100%", id=prefix + "hand-to",
                  custom_attrs={"aria-label": _("Hand to")}),
        rx.el.label(rx.text(_("Comment"), size="2", weight="medium"),
                    html_for=prefix + "hand-comment"),
        rx.text_area(on_blur=state.set_hand_comment, rows="2", width="100%",
                     id=prefix + "hand-comment", key=key,
                     placeholder=_("Why, or what to look at (optional)")),
        rx.flex(
            rx.alert_dialog.cancel(rx.button(_("Cancel"), variant="soft", color_scheme="gray",
                                             on_click=state.cancel_hand)),
            rx.button(rx.cond(state.hand_how == "delegate", _("Delegate"), _("Transfer")),
                      on_click=state.hand, id="confirm-" + prefix + "hand",
                      disabled=state.hand_to == ""),
            spacing="3", justify="end", margin_top="12px"),
    ), open=is_open)


def mail_hand_dialog() -> rx.Component:
    """The dialog of an approval's Transfer… and Delegate… (the inbox, the flow page)."""
    return hand_dialog(MailState, {
        "delegate": _("Ask someone to answer this approval for you. Their answer comes back"
                      " to you; only your confirmation counts."),
        "transfer": _("Hand this approval to another approver. They decide instead of you,"
                      " and it leaves your inbox.")}, "mail-", MailState.hand_mail,
                       MailState.hand_mail != 0)
