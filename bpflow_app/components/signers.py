"""Add signers (加签) and remove signers (减签) on the approval card (SPEC §15): the card's
round (who decided, who is next, what is still needed), its buttons, and the one dialog
of a page (whom, where, why, then a confirmation), `SignersState`'s."""

from __future__ import annotations

import reflex as rx

from bpflow_app.i18n import _
from bpflow_app.pages.signers_state import SignersState as G

NO = {"translate": "no"}  # names are data, never translated


def round_lines(lines: rx.Var[list[str]]) -> rx.Component:
    """Where the round stands, a line each."""
    return rx.cond(lines.length() > 0, rx.vstack(
        rx.foreach(lines, lambda line: rx.text(line, size="2", class_name="round-line")),
        spacing="1", class_name="approval-round", role="group",
        custom_attrs={"aria-label": _("Where the approval stands")}))


def add_button(mail: rx.Var[int], step: rx.Var[str], asked: rx.Var[list[str]]
               ) -> rx.Component:
    return rx.button(rx.icon("user-plus", size=14), _("Add signers"), size="2", variant="soft",
                     on_click=G.open_add(mail, step, asked), class_name="add-signers",
                     aria_label=_("Add signers: %(step)s", step=step))


def remove_button(mail: rx.Var[int], step: rx.Var[str], removable: rx.Var[list[str]]
                  ) -> rx.Component:
    return rx.button(rx.icon("user-minus", size=14), _("Remove signers"), size="2",
                     variant="soft", color_scheme="gray", class_name="remove-signers",
                     on_click=G.open_remove(mail, step, removable),
                     aria_label=_("Remove signers: %(step)s", step=step))


def card_moves(b) -> rx.Component:
    """The approval card's signers buttons, for whom they are for (`BoxView`)."""
    return rx.cond((b.sign_mail > 0) | (b.removable.length() > 0), rx.hstack(
        rx.cond(b.sign_mail > 0, add_button(b.sign_mail, b.title, b.approvers)),
        rx.cond(b.removable.length() > 0, remove_button(b.round_mail, b.title, b.removable)),
        spacing="2", wrap="wrap"))


PLACE_TEXT = (
    ("before", _("Before me"), _("They decide first; then it comes back to me.")),
    ("after", _("After me"), _("My approval is recorded; they approve too.")),
    ("with", _("With me"), _("They join this round; the quorum counts over everyone.")),
)


def _people() -> rx.Component:
    return rx.vstack(
        rx.foreach(G.people, lambda name: rx.el.label(
            rx.checkbox(checked=G.chosen.contains(name), on_change=lambda _v: G.pick(name),
                        custom_attrs={"data-name": name, "aria-label": rx.cond(
                            G.mode == "add", _("Ask %(who)s", who=name),
                            _("Stop asking %(who)s", who=name))}),
            rx.text(name, size="2", custom_attrs=NO),
            style={"display": "flex", "gap": "8px", "alignItems": "center"},
            class_name="signer-option")),
        rx.cond(G.people.length() == 0, rx.text(_("Nobody else can be asked."), size="2",
                                                color_scheme="gray")),
        spacing="1", max_height="220px", overflow_y="auto", width="100%", role="group",
        custom_attrs={"aria-label": _("People")})


def _places() -> rx.Component:
    return rx.radio_group.root(
        rx.vstack(*[rx.el.label(
            rx.radio_group.item(value=value),
            rx.vstack(rx.text(label, size="2", weight="medium"),
                      rx.text(hint, size="1", color_scheme="gray"), spacing="0"),
            style={"display": "flex", "gap": "8px", "alignItems": "start"})
            for value, label, hint in PLACE_TEXT], spacing="2"),
        value=G.where, on_change=G.set_where, name="where",
        custom_attrs={"aria-label": _("Where they decide")})


def _confirmation() -> rx.Component:
    where = rx.match(G.where, *[(v, label) for v, label, _hint in PLACE_TEXT], "")
    return rx.callout(
        rx.cond(G.mode == "add",
                rx.text(_("Ask %(who)s", who=G.chosen.join(", ")), " — ", where),
                rx.text(_("Stop asking %(who)s", who=G.chosen.join(", ")))),
        icon="circle-help", width="100%", class_name="signers-confirm")


def signers_dialog() -> rx.Component:
    """The page's one signers dialog."""
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title(rx.cond(G.mode == "add", _("Add signers"), _("Remove signers"))),
            rx.dialog.description(rx.text.strong(G.step, custom_attrs=NO), " ",
                                  rx.cond(G.mode == "add",
                                          _("Who else should decide on this request?"),
                                          _("Who should no longer be asked? Only people who"
                                            " have not decided can be removed.")),
                                  size="2"),
            rx.vstack(
                _people(),
                rx.cond(G.mode == "add", _places()),
                rx.input(value=G.comment, on_change=G.set_comment, width="100%",
                         placeholder=_("Comment (optional)"), max_length=2000,
                         id="signers-comment", aria_label=_("Comment")),
                rx.cond(G.confirming, _confirmation()),
                rx.cond(G.error != "", rx.text(G.error, color_scheme="red", size="2",
                                               role="alert", class_name="signers-error")),
                rx.flex(
                    rx.dialog.close(rx.button(_("Cancel"), type="button", variant="soft",
                                              color_scheme="gray", on_click=G.close)),
                    rx.cond(G.confirming, rx.button(_("Back"), type="button", variant="soft",
                                                    on_click=G.back)),
                    rx.button(rx.cond(G.confirming, _("Confirm"),
                                      rx.cond(G.mode == "add", _("Add"), _("Remove"))),
                              type="button", on_click=G.submit, loading=G.busy,
                              color_scheme=rx.cond(G.mode == "add", "indigo", "red"),
                              id="signers-submit"),
                    spacing="3", justify="end", width="100%"),
                spacing="3", width="100%", margin_top="12px"),
        ),
        open=G.is_open,
        on_open_change=lambda _open: G.close,
    )
