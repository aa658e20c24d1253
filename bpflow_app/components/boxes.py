"""The boxes of ready circles: a form (form layer → action layer → circle), a
confirmation, or the status of an action that runs elsewhere. Each is headed by its
step's description; its uri and an action's engine detail show in the technical view
only (`technical`)."""

from __future__ import annotations

from collections.abc import Callable

import reflex as rx

from bpflow_app.boxview import BoxView
from bpflow_app.components.fields import fields
from bpflow_app.components.returning import returned_note
from bpflow_app.components.signers import card_moves, round_lines
from bpflow_app.components.ui import state_badge
from bpflow_app.components.when import when
from bpflow_app.i18n import _

TONES = {"running": ("loader", "indigo"), "retrying": ("triangle-alert", "amber"),
         "approval": ("hourglass", "amber"), "timer": ("clock", "gray")}


def _hidden(b: rx.Var[BoxView]) -> list[rx.Component]:
    return [rx.el.input(type="hidden", name="__circle", value=b.cid),
            rx.el.input(type="hidden", name="__bookmark", value=b.bookmark)]


def _form(b: rx.Var[BoxView], state) -> rx.Component:
    check = getattr(state, "check_field", None)
    return rx.form(
        rx.vstack(
            fields(b.fields, (lambda name, value: check(b.cid, name, value))
                   if check is not None else None),
            *_hidden(b),
            rx.cond(b.form_error != "", rx.callout(b.form_error, icon="circle-alert",
                                                   color_scheme="red", width="100%")),
            rx.button(b.submit_label, type="submit", loading=state.busy == b.cid,
                      aria_label=_("%(action)s: %(step)s", action=b.submit_label,
                                   step=b.title)),
            spacing="3", width="100%", align="start",
        ),
        on_submit=state.submit, reset_on_submit=False, key=b.bookmark,
        aria_label=_("Form: %(step)s", step=b.title),
    )


def _confirm(b: rx.Var[BoxView], state) -> rx.Component:
    return rx.vstack(
        rx.callout(b.confirm_text, icon="circle-help", width="100%", class_name="confirm-text"),
        rx.form(
            rx.flex(
                rx.button(_("Accept"), type="button", loading=state.busy == b.cid,
                          on_click=state.accept(b.cid, b.bookmark),
                          aria_label=_("Accept: %(step)s", step=b.title)),
                rx.input(name="reason", placeholder=_("Reason (optional)"), flex="1",
                         min_width="140px",
                         aria_label=_("Reason for declining: %(step)s", step=b.title)),
                rx.button(_("Decline"), type="submit", color_scheme="red", variant="soft",
                          loading=state.busy == b.cid,
                          aria_label=_("Decline: %(step)s", step=b.title)),
                *_hidden(b),
                spacing="2", wrap="wrap", width="100%", align="center",
            ),
            on_submit=state.decline, reset_on_submit=True, key=b.bookmark,
        ),
        spacing="3", width="100%",
    )


def _status(b: rx.Var[BoxView], technical: rx.Var[bool]) -> rx.Component:
    icon = rx.match(b.tone, *[(k, rx.icon(i, size=18, color=rx.color(c, 10),
                                          class_name=f"tone-{k}"))
                              for k, (i, c) in TONES.items()], rx.icon("circle", size=18))
    return rx.vstack(
        rx.hstack(rx.cond(b.tone == "running", rx.spinner(size="2"), icon),
                  rx.text(b.status_title, weight="medium"), spacing="2", align="center"),
        rx.foreach(b.status_lines, lambda line: rx.text(line, size="2", class_name="status-line")),
        rx.cond(b.at != "", rx.text(
            rx.cond(b.tone == "retrying", _("Next try:"), _("At:")), " ", when(b.at),
            size="2", class_name="status-line")),
        rx.cond(technical, rx.foreach(b.tech_lines, lambda line: rx.code(
            line, size="1", variant="ghost", class_name="tech-line"))),
        rx.cond(b.approvers.length() > 0, rx.hstack(
            rx.text(_("Approvers:"), size="2"),
            rx.foreach(b.approvers, lambda a: rx.badge(a, variant="surface",
                                                         custom_attrs={"translate": "no"})),
            rx.text(_("(%(quorum)s)", quorum=b.quorum), size="2", color_scheme="gray"),
            spacing="1", wrap="wrap", align="center")),
        rx.cond(b.tone == "approval", rx.fragment(round_lines(b.round_lines), card_moves(b))),
        spacing="2", width="100%", align="start", role="status",
    )


def _waits(b: rx.Var[BoxView]) -> rx.Component:
    """Whom the box waits for, with its due time (overdue marked)."""
    return rx.cond(b.waits != "", rx.hstack(
        rx.icon("user-round", size=16, color=rx.color("gray", 10)),
        rx.text(b.waits, size="2", weight="medium", class_name="waits-for"),
        rx.cond(b.due != "", rx.text(_("due"), " ", when(b.due), size="1",
                                     color_scheme="gray", class_name="due-at")),
        rx.cond(b.overdue, rx.badge(_("Overdue"), color_scheme="red", variant="solid",
                                    class_name="overdue")),
        spacing="2", align="center", wrap="wrap"))


def box_card(b: rx.Var[BoxView], state,
             footer: Callable[[rx.Var[BoxView]], rx.Component] | None = None,
             technical: rx.Var[bool] | bool = False) -> rx.Component:
    """A box; `footer(b)`, when given, adds the moves the viewer may make on it;
    `technical` shows the circle's uri and the engine's detail of its action."""
    technical = rx.Var.create(technical)
    return rx.card(
        rx.vstack(
            rx.hstack(rx.heading(b.title, size="3", as_="h3"),
                      state_badge(rx.cond(b.tone == "retrying", "retrying", "ready"),
                                  rx.match(b.kind, ("status", b.status_title),
                                           ("wait", _("waiting")), _("waiting for you"))),
                      justify="between", width="100%", align="center", wrap="wrap"),
            rx.cond(technical, rx.code(b.description, size="1", variant="ghost",
                                       class_name="circle-uri")),
            _waits(b),
            returned_note(b.returned_note),
            rx.match(b.kind, ("form", _form(b, state)), ("confirm", _confirm(b, state)),
                     ("wait", rx.fragment()), _status(b, technical)),
            footer(b) if footer is not None else rx.fragment(),
            spacing="3", width="100%",
        ),
        width="100%", class_name="circle-box",
        custom_attrs={"data-circle": b.cid, "data-kind": b.kind,
                      "aria-label": _("Step: %(step)s", step=b.title)},
    )
