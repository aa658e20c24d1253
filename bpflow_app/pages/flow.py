"""The flow page (`/flow/[id]`): the drawing, the boxes of its open steps beside it (whom
each waits for; claim, give back, take back), the starter's controls (abort, suspend,
resume, each explained and confirmed), the selected step's details and the history told
in sentences. Admins also get the technical view: uris, raw results, the steps' table,
every event of the history and fixing a stuck flow (resetting steps)."""

from __future__ import annotations

import reflex as rx
from reflex.event import EventChain
from reflex.vars.base import VarData

from bpflow_app import routes
from bpflow_app.boxview import BoxView
from bpflow_app.catalogs import N_
from bpflow_app.components.boxes import box_card
from bpflow_app.components.drawing import flow_drawing, info_rows, legend
from bpflow_app.components.files import comment_thread, files_list, uploads
from bpflow_app.components.nudges import copies_card, copy_dialog, nudge_bar
from bpflow_app.components.returning import return_button, return_dialog
from bpflow_app.components.signers import signers_dialog
from bpflow_app.components.ui import empty_state, state_badge, tab_names, tab_panel
from bpflow_app.components.when import when
from bpflow_app.flowview import STATE_WORDS, CircleInfo, HistoryRow
from bpflow_app.i18n import LangState, _, ngettext, rich
from bpflow_app.pages.flow_state import FlowState
from bpflow_app.pages.handover import mail_hand_dialog
from bpflow_app.pages.mail_state import MailState

S = FlowState
TECH = S.intervention  # the technical view is on (only admins can turn it on)
TAB_ID, PANEL_ID = "flow-tab-", "flow-panel"  # a tab's id is TAB_ID and its value

# an instance's status as the page says it
STATUS_WORDS = {"running": N_("running"), "completed": N_("completed"),
                "failed": N_("failed"), "suspended": N_("suspended"),
                "terminated": N_("terminated")}


def status_label(status: rx.Var) -> rx.Var:
    return rx.match(status, *[(k, _(v)) for k, v in STATUS_WORDS.items()], status)


class _Relabel(rx.Fragment):
    """Asks for the texts made on the server (boxes, history) again when the page's
    language changes (`FlowState.relabel`, which does nothing while they are in it)."""

    def add_hooks(self) -> list[str | rx.Var]:
        lang = LangState.lang
        call = rx.Var.create(EventChain.create(S.relabel, args_spec=lambda: [],
                                               key="relabel"))
        return [rx.Var(
            f"useEffect(() => {{ ({call!s})(); }}, [{lang!s}])",
            _var_data=VarData.merge(lang._get_all_var_data(), call._get_all_var_data(),
                                    VarData(imports={"react": ["useEffect"]})))]


def _relabel() -> rx.Component:
    return _Relabel.create()


def _banner() -> rx.Component:
    return rx.match(
        S.head.status,
        ("completed", rx.callout(_("This flow is complete."), icon="circle-check",
                                 color_scheme="green", id="flow-banner", width="100%")),
        ("failed", rx.callout(
            rx.vstack(
                rx.cond(TECH | (S.head.failed == ""),
                        rx.text(_("The flow cannot finish on its own: %(reason)s",
                                  reason=S.head.reason)),
                        rx.text(_("The flow cannot finish on its own: %(steps)s failed.",
                                  steps=S.head.failed))),
                rx.cond(S.is_admin,
                        rx.text(_("Turn on the technical view and select the failed step "
                                  "to run it again or reset it.")),
                        rx.cond(S.can_act, rx.text(_(
                            "An administrator can fix it; or abort it if it is no longer "
                            "needed.")))),
                spacing="1"),
            icon="circle-x", color_scheme="red", id="flow-banner", width="100%")),
        ("suspended", rx.callout(_("This flow is suspended: nothing moves until it is "
                                   "resumed."), icon="circle-pause",
                                 color_scheme="amber", id="flow-banner", width="100%")),
        ("terminated", rx.callout(_("This flow was aborted: %(reason)s",
                                    reason=S.head.reason),
                                  icon="octagon-x", color_scheme="gray", id="flow-banner",
                                  width="100%")),
        rx.fragment(),
    )


def _hint(text: rx.Var) -> rx.Component:
    return rx.text(text, size="1", color_scheme="gray", class_name="control-hint")


def _moves(b: rx.Var[BoxView]) -> rx.Component:
    """What the viewer may do with a box besides filling it in, each explained."""
    return rx.cond(b.claim | b.unclaim | b.withdraw | (b.mail != 0), rx.vstack(
        rx.cond(b.claim, rx.hstack(
            rx.button(rx.icon("hand", size=14), _("Claim"), size="2",
                      on_click=S.claim(b.cid),
                      aria_label=_("Claim: %(step)s", step=b.title)),
            _hint(_("Take this task, so the others asked no longer see it as theirs.")),
            spacing="2", align="center")),
        rx.cond(b.unclaim, rx.hstack(
            rx.button(_("Give back"), size="2", variant="soft", color_scheme="gray",
                      on_click=S.unclaim(b.cid),
                      aria_label=_("Give back: %(step)s", step=b.title)),
            _hint(_("Let any of the others asked take it instead.")),
            spacing="2", align="center")),
        rx.cond(b.withdraw, rx.hstack(
            rx.button(rx.icon("undo-2", size=14), _("Take it back"), size="2",
                      variant="soft", color_scheme="amber",
                      on_click=S.ask_control("withdraw", b.cid),
                      aria_label=_("Take it back: %(step)s", step=b.title)),
            _hint(_("Stop waiting for this and get the step before it back to change it.")),
            spacing="2", align="center")),
        rx.cond(b.mail != 0, _hand_over(b)),
        spacing="2", width="100%", class_name="box-moves"))


def _hand_over(b: rx.Var[BoxView]) -> rx.Component:
    """The viewer's own pending approval of the step: Transfer… and Delegate… (SPEC §15;
    deciding it is the inbox's)."""
    return rx.hstack(
        rx.button(rx.icon("forward", size=14), _("Transfer…"), size="2", variant="outline",
                  on_click=MailState.ask_hand(b.mail, "transfer"),
                  aria_label=_("Transfer: %(step)s", step=b.title)),
        rx.button(rx.icon("user-round-search", size=14), _("Delegate…"), size="2",
                  variant="outline", on_click=MailState.ask_hand(b.mail, "delegate"),
                  aria_label=_("Delegate: %(step)s", step=b.title)),
        rx.link(_("Decide in the inbox"), href=routes.INBOX + "?tab=approval", size="2"),
        spacing="2", align="center", wrap="wrap")


def _return(b: rx.Var[BoxView]) -> rx.Component:
    """"Return to…" for a pending approver of the box's approval (SPEC §15)."""
    return rx.cond(b.return_mail > 0, rx.hstack(
        return_button(S.iid, b.cid, b.return_mail, b.title),
        _hint(_("Send it back to an earlier step to be amended, saying what to amend.")),
        spacing="2", align="center", class_name="box-moves"))


def _control(what: str, icon: str, label: rx.Var, hint: rx.Var, **props) -> rx.Component:
    return rx.cond(S.head.controls.contains(what), rx.hstack(
        rx.button(rx.icon(icon, size=14), label, variant="soft", size="2",
                  on_click=S.ask_control(what, ""), id=f"{what}-flow",
                  custom_attrs={"aria-describedby": f"{what}-flow-hint"}, **props),
        rx.text(hint, size="1", color_scheme="gray", id=f"{what}-flow-hint"),
        spacing="2", align="center"))


def _controls() -> rx.Component:
    """The controls of the whole flow for those `bpflow.access` lets control it (its
    starter, admins): the moves the engine's table allows from its status, explained."""
    return rx.cond(S.can_act & (S.head.controls.length() > 0), rx.vstack(
        _control("suspend", "circle-pause",
                 _("Suspend"), _("Pause it: nobody is asked anything until it is resumed.")),
        _control("resume", "circle-play", _("Resume"),
                 _("Let it go on from where it was suspended.")),
        _control("abort", "octagon-x", _("Abort"),
                 _("Stop it for good, with a reason; nobody is asked any more."),
                 color_scheme="red"),
        spacing="2", id="flow-controls", width="100%"))


CONTROL_TEXT = {
    "abort": (N_("Abort this flow?"), N_("It stops for good: nothing in it runs any more and"
              " nobody is asked any more. Say why; the reason is kept in its history."),
              N_("Abort")),
    "suspend": (N_("Suspend this flow?"), N_("Nothing in it moves until it is resumed; the"
                " steps waiting for people wait."), N_("Suspend")),
    "resume": (N_("Resume this flow?"), N_("It goes on from where it was suspended."),
               N_("Resume")),
    "withdraw": (N_("Take this step back?"), N_("Whoever it waits for is no longer asked (an"
                 " approval request is closed) and the step before it comes back to you to"
                 " amend."), N_("Take it back")),
}


def _control_dialog() -> rx.Component:
    def pick(i: int) -> rx.Var:
        return rx.match(S.ask, *[(k, _(v[i])) for k, v in CONTROL_TEXT.items()], "")
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title(pick(0)),
            rx.alert_dialog.description(
                rx.cond(S.ask_step != "", rx.text.strong(S.ask_step, " ")), pick(1),
                size="2"),
            rx.form(
                rx.vstack(
                    rx.cond(S.ask == "abort", rx.input(
                        name="reason", placeholder=_("Why is it aborted?"), width="100%",
                        max_length=500, id="control-reason", aria_label=_("Reason"))),
                    rx.cond(S.ask == "withdraw", rx.input(
                        name="reason", placeholder=_("Why (optional)"), width="100%",
                        max_length=500, id="control-reason", aria_label=_("Reason"))),
                    rx.cond(S.ask_error != "", rx.text(S.ask_error, color_scheme="red",
                                                       size="2", role="alert")),
                    rx.flex(
                        rx.alert_dialog.cancel(rx.button(
                            _("Cancel"), type="button", variant="soft", color_scheme="gray",
                            on_click=S.cancel_control)),
                        rx.button(pick(2), type="submit", loading=S.asking,
                                  color_scheme=rx.cond(S.ask == "abort", "red", "indigo"),
                                  id="confirm-control"),
                        spacing="3", justify="end", width="100%"),
                    spacing="3", width="100%", margin_top="12px"),
                on_submit=S.confirm_control, reset_on_submit=False),
        ),
        open=S.ask_open,
        on_open_change=lambda _open: S.cancel_control,
    )


def _levels_button() -> rx.Component:
    return rx.hstack(
        rx.input(type="number", value=S.levels.to_string(), on_change=S.set_levels, width="64px",
                 custom_attrs={"min": 0, "max": 99, "aria-label": _("Levels to reset")}),
        rx.button(ngettext("Reset %(n)s level", "Reset %(n)s levels", S.levels),
                  variant="soft", on_click=S.ask_reset("levels")),
        spacing="1", align="center",
    )


def _intervene() -> rx.Component:
    return rx.vstack(
        rx.separator(),
        rx.heading(_("Fix a stuck flow"), size="2", as_="h4"),
        rx.text(_("Send this step, and everything after it, back to waiting. You will see "
                  "which steps are affected before anything changes."), size="1",
                color_scheme="gray"),
        rx.flex(
            rx.button(rx.icon("rotate-ccw", size=14), _("Run this step again"),
                      variant="soft", on_click=S.ask_reset("self")),
            _levels_button(),
            rx.button(_("Reset all"), variant="soft", color_scheme="red",
                      on_click=S.ask_reset("all")),
            spacing="2", wrap="wrap", align="center",
        ),
        spacing="2", width="100%", id="intervention-menu",
    )


def _details() -> rx.Component:
    c = S.chosen
    return rx.cond(S.selected != "", rx.card(
        rx.vstack(
            rx.hstack(rx.heading(c.name, size="3", as_="h3"),
                      state_badge(c.state, rx.match(
                          c.state, *[(k, _(v)) for k, v in STATE_WORDS.items()], c.state)),
                      rx.spacer(),
                      rx.icon_button(rx.icon("x", size=14), variant="ghost", size="1",
                                     on_click=S.select(S.selected),
                                     aria_label=_("Close details")),
                      width="100%", align="center"),
            info_rows(c, TECH),
            rx.cond(c.flow, rx.button(rx.icon("layers", size=14),
                                      _("Open or close the steps inside"),
                                      variant="surface", size="1", on_click=S.toggle(c.id))),
            rx.cond(c.resettable & TECH, _intervene()),
            spacing="3", width="100%",
        ),
        width="100%", id="circle-details",
    ))


def _reset_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title(ngettext("Reset %(n)s step?", "Reset %(n)s steps?",
                                           S.preview.length())),
            rx.alert_dialog.description(
                _("These steps go back to waiting; their results are kept in the history."),
                size="2"),
            rx.flex(rx.foreach(S.preview, lambda c: rx.badge(c, size="2", variant="surface")),
                    spacing="2", wrap="wrap", margin_y="12px", id="reset-preview"),
            rx.flex(
                rx.alert_dialog.cancel(rx.button(_("Cancel"), variant="soft",
                                                 color_scheme="gray",
                                                 on_click=S.cancel_reset)),
                rx.button(_("Reset"), color_scheme="red", on_click=S.confirm_reset,
                          loading=S.resetting, id="confirm-reset"),
                spacing="3", justify="end",
            ),
        ),
        open=S.preview_open,
    )


def _technical_switch() -> rx.Component:
    """Admins only: the engine's view of the flow."""
    return rx.cond(S.is_admin, rx.el.label(rx.hstack(
        rx.switch(checked=S.intervention, on_change=S.set_intervention,
                  id="intervention-switch",
                  custom_attrs={"aria-describedby": "technical-hint"}),
        rx.vstack(rx.text(_("Technical view"), size="2"),
                  rx.text(_("For administrators: step ids, raw results, every event, and "
                            "fixing a stuck flow."), size="1", color_scheme="gray",
                          id="technical-hint"),
                  spacing="0"),
        spacing="2", align="center")))


def _flow_tab() -> rx.Component:
    drawing = rx.card(
        rx.vstack(
            rx.hstack(rx.heading(_("Steps"), size="3", as_="h2"), rx.spacer(),
                      _technical_switch(), width="100%", align="center", wrap="wrap"),
            flow_drawing(S, S.selected, S.preview, S.select, canvas=S.canvas),
            legend(TECH | S.preview_open, S.junctions.length() > 0),
            spacing="3", width="100%",
        ),
        width="100%",
    )
    side = rx.vstack(
        rx.heading(_("Open steps"), size="3", as_="h2"),
        rx.cond(S.boxes.length() > 0,
                rx.vstack(rx.foreach(S.boxes, lambda b: box_card(
                    b, S, lambda b: rx.fragment(_moves(b), _return(b)), TECH)),
                          mail_hand_dialog(), width="100%", spacing="3", id="boxes"),
                empty_state("coffee", _("Nothing to do here right now"),
                            _("A step appears here when it waits for you or for others."))),
        _details(),
        copies_card(S),
        spacing="3", width="100%",
    )
    return rx.grid(drawing, side, spacing="4", width="100%", align_items="start",
                   grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                          "minmax(0,3fr) minmax(0,2fr)"])


def _circle_row(c: rx.Var[CircleInfo]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.button(c.id, variant="ghost", size="1",
                                on_click=[S.select(c.id), S.set_tab("flow")])),
        rx.table.cell(c.name),
        rx.table.cell(state_badge(c.state)),
        rx.table.cell(rx.text(rx.cond(c.reason != "", c.reason, c.result), size="1",
                              class_name="clip-text")),
        rx.table.cell(c.attempts),
    )


def _tab(label: rx.Var, value: str) -> rx.Component:
    """A tab of the flow page (its panel: the one panel, of the tab shown)."""
    return rx.tabs.trigger(label, value=value, **tab_names(TAB_ID + value, PANEL_ID))


def _table(headers: list[rx.Var], body: rx.Component) -> rx.Component:
    return rx.box(rx.table.root(
        rx.table.header(rx.table.row(*[rx.table.column_header_cell(h) for h in headers])),
        body, width="100%", variant="surface", size="1"), overflow_x="auto", width="100%")


def _history_row(h: rx.Var[HistoryRow]) -> rx.Component:
    """A row of the history: when and what happened; in the technical view also the
    event's number, kind, circle, actor and data."""
    return rx.cond(h.plain | TECH, rx.table.row(
        rx.table.cell(rx.text(when(h.at), size="1"), white_space="nowrap"),
        rx.table.cell(h.text, class_name="history-text"),
        rx.cond(TECH, rx.fragment(
            rx.table.cell(h.seq), rx.table.cell(rx.code(h.kind, size="1")),
            rx.table.cell(h.circle), rx.table.cell(h.actor),
            rx.table.cell(rx.text(h.detail, size="1")))),
    ))


def _history() -> rx.Component:
    plain = [_("When"), _("What happened")]
    return rx.cond(
        TECH,
        _table([*plain, "#", _("Event"), _("Step id"), _("Who"), _("Details")],
               rx.table.body(rx.foreach(S.history, _history_row))),
        _table(plain, rx.table.body(rx.foreach(S.history, _history_row))),
    )


def _started() -> rx.Component:
    return rx.text(
        rich(N_("Started by %(owner)s, %(when)s"),
             owner=lambda: rx.text.span(S.head.owner, custom_attrs={"translate": "no"}),
             when=lambda: when(S.head.created)),
        rx.cond(TECH, rx.code(" ", S.head.template, " v", S.head.version, size="1",
                              variant="ghost", class_name="template-version")),
        size="2", color_scheme="gray")


def _content() -> rx.Component:
    return rx.vstack(
        _relabel(),
        rx.flex(
            rx.vstack(rx.heading(S.head.title, size="7", as_="h1"), _started(), spacing="1"),
            rx.box(state_badge(S.head.status, status_label(S.head.status)),
                   id="flow-status"),
            justify="between", align="center", width="100%", wrap="wrap", spacing="2",
        ),
        _controls(),
        nudge_bar(S),
        _banner(),
        rx.cond(~S.can_act, rx.callout(
            _("You were asked about this flow, so you can follow it here and act on the "
              "steps that wait for you; the person who started it (or an administrator) "
              "controls it."),
            icon="eye", color_scheme="gray", width="100%", id="read-only")),
        rx.tabs.root(
            rx.tabs.list(_tab(_("Flow"), "flow"), _tab(_("History"), "history"),
                         rx.cond(TECH, _tab(_("Steps (technical)"), "circles"))),
            tab_panel(
                rx.match(
                    S.tab,
                    ("history", rx.box(_history(), id="history")),
                    ("circles", rx.cond(TECH, _table(
                        [_("Step id"), _("Step"), _("State"), _("Result or reason"),
                         _("Failures")],
                        rx.table.body(rx.foreach(S.circle_rows, _circle_row))))),
                    _flow_tab()),
                id=PANEL_ID, tab_id=TAB_ID + S.tab, padding_top="16px"),
            value=S.tab, on_change=S.set_tab, width="100%",
        ),
        files_list(S.files),
        comment_thread(S.comments, S.send_comment, S.selected, S.chosen.name, S.commenting),
        uploads(),
        _reset_dialog(),
        _control_dialog(),
        signers_dialog(),
        copy_dialog(S),
        return_dialog(),
        spacing="4", width="100%",
    )


def flow_page() -> rx.Component:
    return rx.box(
        rx.cond(
            S.loading,
            rx.center(rx.spinner(size="3"), padding="48px", aria_busy="true"),
            rx.cond(S.missing,
                    empty_state("search-x", _("Flow not found"),
                                _("It does not exist, or it is not yours to see."),
                                rx.link(_("Back to my flows"), href=routes.FLOWS)),
                    _content()),
        ),
        width="100%",  # loaded by its on_load (frame_state.page_loads)
    )
