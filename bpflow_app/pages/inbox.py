"""The inbox (`/inbox`): approval mail, the user's tasks, in-site messages and guest
messages in tabs. It opens on the tab with work waiting (`inboxview.opening_tab`);
`/inbox?tab=tasks` opens the Tasks tab.

The tabs control one panel (Radix's content of the tab shown), whose content follows
the tab chosen: the Tasks tab's lists, or a page of mail of the kind chosen."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.catalogs import N_
from bpflow_app.components.names import NO, by, data, named
from bpflow_app.components.returning import return_button, return_dialog
from bpflow_app.components.signers import add_button, round_lines, signers_dialog
from bpflow_app.components.ui import empty_state, page_header, row_badge, tab_names, tab_panel
from bpflow_app.components.when import when
from bpflow_app.i18n import _, rich
from bpflow_app.inboxview import TASKS, MailView, TaskView
from bpflow_app.pages.handover import hand_dialog, mail_hand_dialog
from bpflow_app.pages.mail_state import MailState
from bpflow_app.pages.tasks_state import TasksState
from bpflow_app.session import SessionState

S = MailState
T = TasksState
TABS = (("approval", N_("Approvals"), "stamp"), ("message", N_("Messages"), "message-square"),
        ("guest", N_("Guest messages"), "user-round"))
# copies and urges (SPEC §15): "Copied to me" and "Reminders"
NUDGE_TABS = (("cc", N_("Copied to me"), "copy"), ("urge", N_("Reminders"), "bell-ring"))
TAB_ID, PANEL_ID = "inbox-tab-", "inbox-panel"  # a tab's id is TAB_ID and its kind


def _tab(kind: str, label: str, icon: str, count: rx.Var[int] | None = None,
         color: str = "red", badge_class: str = "unread") -> rx.Component:
    """A tab (its panel: the one panel, of the tab shown, `_panel`)."""
    count = S.unread[kind] if count is None else count
    return rx.tabs.trigger(
        rx.hstack(rx.icon(icon, size=14), _(label),
                  rx.cond(count > 0, rx.badge(count, color_scheme=color, radius="full",
                                              variant="solid", class_name=badge_class)),
                  spacing="2", align="center"),
        value=kind, **tab_names(TAB_ID + kind, PANEL_ID),
    )


def _panel(*children: rx.Component) -> rx.Component:
    """The tab panel of the tab shown (`ui.tab_panel`)."""
    return tab_panel(*children, id=PANEL_ID, tab_id=TAB_ID + S.kind, padding_top="12px")


def _signed(m: rx.Var[MailView]) -> rx.Component:
    return rx.vstack(
        rx.cond(m.signature_ok,
                rx.badge(rx.icon("shield-check", size=12), _("Signature verified"),
                         color_scheme="green", variant="soft"),
                rx.callout(m.notice, icon="shield-alert", color_scheme="red", role="alert",
                           class_name="tampered", width="100%")),
        rx.el.details(rx.el.summary(rx.text(_("Signed payload"), size="2", as_="span")),
                      rx.el.pre(m.payload, class_name="result-text signed-payload")),
        spacing="2", width="100%", align="start",
    )


def _decide(m: rx.Var[MailView]) -> rx.Component:
    return rx.vstack(
        rx.text_area(placeholder=_("Comment (optional; needed to send it back)"),
                     on_blur=S.set_comment, rows="2", width="100%", key=m.id,
                     custom_attrs={"aria-label": _("Comment"),
                                   "aria-describedby": "comment-error"}),
        rx.hstack(
            rx.button(rx.icon("check", size=14), _("Approve"), color_scheme="green",
                      on_click=S.decide(m.id, "approved"), loading=S.deciding == m.id),
            rx.button(rx.icon("x", size=14), _("Reject"), color_scheme="red", variant="soft",
                      on_click=S.decide(m.id, "rejected"), loading=S.deciding == m.id),
            rx.cond(~m.delegated, rx.button(
                rx.icon("undo-2", size=14), _("Send back"), color_scheme="amber",
                variant="soft", on_click=S.decide(m.id, "returned"),
                loading=S.deciding == m.id,
                title=_("Return it to the requester to amend (say what in the comment)"))),
            rx.cond(~m.delegated, _hand_buttons(m)),
            rx.cond(m.instance != "", return_button(m.instance, m.circle, m.id, m.subject)),
            spacing="2", wrap="wrap",
        ),
        # below the buttons: the message going away as the comment is written (on blur,
        # i.e. as the pointer goes down on a button) must not move the button under it
        rx.cond(S.comment_error != "", rx.text(S.comment_error, id="comment-error",
                                               color_scheme="red", size="1", role="alert")),
        spacing="2", width="100%",
    )


def _hand_buttons(m: rx.Var[MailView]) -> rx.Component:
    """Transfer (someone else decides) and Delegate (someone answers for you)."""
    return rx.fragment(
        rx.button(rx.icon("forward", size=14), _("Transfer…"), variant="outline",
                  on_click=S.ask_hand(m.id, "transfer"), class_name="hand-transfer",
                  title=_("Hand this approval to another approver, who decides instead")),
        rx.button(rx.icon("user-round-search", size=14), _("Delegate…"), variant="outline",
                  on_click=S.ask_hand(m.id, "delegate"), class_name="hand-delegate",
                  title=_("Ask someone to answer for you; you confirm their answer")))


def _answer(m: rx.Var[MailView]) -> rx.Component:
    """How the mail was handed on; with a delegate's answer, the button confirming it."""
    return rx.cond(m.handed != "", rx.callout(
        rx.vstack(
            rx.text(m.handed, size="2", class_name="mail-handed"),
            rx.cond(m.open & (m.answer != ""), rx.button(
                rx.icon("check-check", size=14), _("Confirm their answer"), size="1",
                on_click=S.decide(m.id, m.answer), loading=S.deciding == m.id,
                class_name="confirm-answer")),
            spacing="2", align="start"),
        icon="users", color_scheme="blue", width="100%"))


def _substitute_lines(m: rx.Var[MailView]) -> rx.Component:
    """On an approval card: whom it is addressed to when the reader stands in for them,
    and who decided it when a substitute did ("By ann for bob")."""
    return rx.fragment(
        rx.cond((m.kind == "approval") & (m.addressee != "")
                & (m.addressee != SessionState.username),
                rx.text(rich(N_("You stand in for %(name)s"), name=lambda: data(m.addressee)),
                        size="2", color_scheme="amber", class_name="mail-for")),
        rx.cond(m.decided_by != "",
                rx.text(rich(N_("By %(name)s"), name=lambda: data(m.decided_by)),
                        size="2", class_name="mail-decided-by")))


def _opened(m: rx.Var[MailView]) -> rx.Component:
    return rx.vstack(
        rx.separator(),
        rx.text(m.body, size="2", class_name="mail-body", custom_attrs=NO),
        rx.cond(m.instance != "", rx.link(_("Open the flow"), href=routes.flow(m.instance),
                                          size="2")),
        rx.cond(m.kind == "approval", _signed(m)),
        rx.cond(m.outcome != "", rx.text(m.outcome, size="2", weight="medium",
                                         class_name="mail-outcome")),
        round_lines(m.round_lines),
        rx.cond(m.kind == "approval", _answer(m)),
        _substitute_lines(m),
        rx.cond(m.open, _decide(m)),
        rx.cond(m.sign, add_button(m.id, m.subject, m.asked)),
        spacing="3", width="100%", align="start",
    )


def _mail(m: rx.Var[MailView]) -> rx.Component:
    """A mail of the list: plain elements in the theme's tokens (assets/styles.css), so a
    page of 25 costs a few elements each to draw; the opened one gets the full box."""
    name = "mail-name-" + m.id.to_string()
    return rx.el.div(
        rx.el.div(
            rx.cond(~m.read, rx.el.span(class_name="mail-dot", aria_label=_("unread"),
                                        role="img")),
            rx.el.div(
                rx.el.p(m.subject, class_name="mail-subject", custom_attrs=NO),
                rx.el.p(rich(N_("From %(sender)s · %(when)s"),
                             sender=lambda: data(m.sender),
                             when=lambda: when(m.created, relative=True)),
                        class_name="mail-meta"),
                class_name="mail-title"),
            rx.cond(m.decision != "", row_badge(m.tone, m.label)),
            rx.cond(~m.signature_ok, row_badge("failure", _("tampered"))),
            rx.cond(m.open, row_badge("pending", _("waiting for you"))),
            rx.cond(S.opened == m.id,
                    named(name, N_("Close %(subject)s"), subject=m.subject),
                    named(name, N_("Open %(subject)s"), subject=m.subject)),
            rx.el.button(rx.cond(S.opened == m.id, _("Close"), _("Open")), type="button",
                         class_name="row-button", on_click=S.toggle(m.id),
                         custom_attrs=by(name)),
            class_name="mail-head",
        ),
        rx.cond(S.opened == m.id, _opened(m)),
        class_name=rx.cond(m.read, "mail", "mail unread"),
        custom_attrs={"data-mail": m.id, "data-kind": m.kind},
    )


def _list() -> rx.Component:
    pager = rx.cond(S.pages > 1, rx.hstack(
        rx.button(_("Newer"), variant="soft", on_click=S.turn(-1), disabled=S.page == 0),
        rx.text(_("Page %(page)s of %(pages)s", page=S.page + 1, pages=S.pages), size="2"),
        rx.button(_("Older"), variant="soft", on_click=S.turn(1),
                  disabled=S.page + 1 >= S.pages),
        justify="end", width="100%", align="center"))
    return rx.cond(
        S.loading,
        rx.center(rx.spinner(size="3"), padding="32px", aria_busy="true"),
        rx.cond(S.mails.length() > 0,
                rx.vstack(rx.foreach(S.mails, _mail), pager, mail_hand_dialog(), spacing="2",
                          width="100%", id="mail-list"),
                rx.box(empty_state("inbox", _("Nothing here"),
                                   _("New mail will appear in this tab.")),
                       id="inbox-empty", width="100%")),
    )


# ------------------------------------------------------------------ the Tasks tab
# A task's buttons: what each shows, while it works, and its name (which holds what it
# shows, and says which task).
BUTTONS = {
    "claim": (N_("Claim"), N_("Claiming…"), N_("Claim %(task)s of %(flow)s")),
    "unclaim": (N_("Unclaim"), N_("Giving back…"), N_("Unclaim %(task)s of %(flow)s")),
    "transfer": (N_("Transfer"), N_("Handing on…"), N_("Transfer %(task)s of %(flow)s")),
    "delegate": (N_("Delegate"), N_("Handing on…"), N_("Delegate %(task)s of %(flow)s"))}
# what the hand-over dialog of a task says, by how it is handed on
HAND_WORDS = {
    "transfer": N_("Hand %(task)s to someone else; it becomes theirs at once."),
    "delegate": N_("Ask someone to answer %(task)s for you; their answer comes back to you"
                   " to confirm or change.")}


def _task_button(which: str, t: rx.Var[TaskView], event: rx.EventHandler,
                 **props) -> rx.Component:
    label, busy, name = BUTTONS[which]
    named_by = f"{which}-name-" + t.instance + "-" + t.uri  # (an id has no spaces)
    return rx.fragment(
        named(named_by, name, task=t.description, flow=t.short),
        rx.el.button(rx.cond(T.acting == t.key, _(busy), _(label)), type="button",
                     class_name="row-button", on_click=event, disabled=T.acting == t.key,
                     custom_attrs=by(named_by), **props))


def _task(t: rx.Var[TaskView], mine: bool) -> rx.Component:
    """A task of a list: plain elements like the mail rows."""
    title = t.flow + " · " + t.short
    about = t.description + " (" + title + ")"
    if mine:
        buttons = [rx.cond(~t.answering, rx.fragment(
            _task_button("unclaim", t, T.unclaim(t.instance, t.uri)),
            _task_button("transfer", t, T.ask_hand(t.instance, t.uri, about, "transfer")),
            _task_button("delegate", t, T.ask_hand(t.instance, t.uri, about, "delegate"))))]
    else:
        buttons = [_task_button("claim", t, T.claim(t.instance, t.uri)),
                   rx.cond(SessionState.is_admin, _task_button(
                       "transfer", t, T.ask_hand(t.instance, t.uri, about, "transfer")))]
    due = rx.cond(t.due != "", rx.cond(
        t.overdue,
        rx.el.span(" · ", rich(N_("was due %(when)s"),
                               when=lambda: when(t.due, relative=True)),
                   class_name="task-due overdue",
                   style={"color": "var(--red-a11)", "fontWeight": "var(--font-weight-bold)"}),
        rx.el.span(" · ", rich(N_("due %(when)s"), when=lambda: when(t.due, relative=True)),
                   class_name="task-due")))
    waits = rx.cond(t.waits_you, _("Waits for you"),
                    rich(N_("Waits for %(who)s"), who=lambda: data(t.waits)))
    return rx.el.div(
        rx.el.div(
            rx.el.div(
                rx.el.p(t.description, class_name="mail-subject", custom_attrs=NO),
                rx.cond(t.summary != "", rx.el.p(t.summary, class_name="mail-meta task-about",
                                                 custom_attrs=NO)),
                # underlined: in a line of text its colour alone does not tell it apart
                rx.el.p(rx.link(title, href=t.href, size="1", class_name="task-flow",
                                underline="always", custom_attrs=NO),
                        " · ", rx.el.span(waits, class_name="task-waits"),
                        class_name="mail-meta"),
                rx.el.p(rich(N_("Ready %(when)s"), when=lambda: when(t.ready, relative=True)),
                        due, class_name="mail-meta"),
                rx.cond(t.handover != "", rx.el.p(t.handover,
                                                  class_name="mail-meta task-handover")),
                class_name="mail-title", min_width="min(100%, 20rem)"),  # phones: buttons below
            rx.cond(t.overdue, row_badge("failure", _("overdue"))),
            *buttons,
            named("open-name-" + t.instance + "-" + t.uri, N_("Open %(flow)s"), flow=title),
            rx.link(_("Open"), href=t.href, size="2",
                    custom_attrs=by("open-name-" + t.instance + "-" + t.uri),
                    class_name="task-open"),
            class_name="mail-head",
        ),
        class_name=rx.cond(t.overdue, "mail task-row overdue", "mail task-row"),
        border_left=rx.cond(t.overdue, "4px solid var(--red-9)", "none"),
        custom_attrs={"data-instance": t.instance, "data-circle": t.uri,
                      "data-overdue": rx.cond(t.overdue, "true", "false")},
    )


def _task_list(which: str, heading: rx.Var, icon: str, empty_title: rx.Var,
               empty_text: rx.Var) -> rx.Component:
    pages = T.task_page_count[which]
    page = T.task_pages[which]
    pager = rx.cond(pages > 1, rx.hstack(
        rx.button(_("Earlier"), variant="soft", size="1", on_click=T.turn_tasks(which, -1),
                  disabled=page == 0),
        rx.text(_("Page %(page)s of %(pages)s", page=page + 1, pages=pages), size="2"),
        rx.button(_("Later"), variant="soft", size="1", on_click=T.turn_tasks(which, 1),
                  disabled=page + 1 >= pages),
        justify="end", width="100%", align="center"))
    return rx.vstack(
        rx.hstack(rx.icon(icon, size=16), rx.heading(heading, size="4", as_="h2"),
                  rx.badge(T.task_totals[which], radius="full", variant="soft",
                           class_name="task-total"),
                  spacing="2", align="center"),
        rx.cond(T.tasks[which].length() > 0,
                rx.vstack(rx.foreach(T.tasks[which], lambda t: _task(t, which == "me")),
                          pager, spacing="2", width="100%"),
                empty_state("circle-check", empty_title, empty_text)),
        spacing="2", width="100%", id=f"tasks-{which}",
    )


def _task_hand_dialog() -> rx.Component:
    return hand_dialog(T, {how: rich(text, task=lambda: data(T.handing_title))
                           for how, text in HAND_WORDS.items()},
                       "", T.handing, T.handing != "")


def _tasks() -> rx.Component:
    return rx.cond(
        T.loading,
        rx.center(rx.spinner(size="3"), padding="32px", aria_busy="true"),
        rx.vstack(
            _task_list("me", _("Mine"), "user-check", _("Nothing assigned to you"),
                       _("Claim a task from My groups below, or wait until someone hands "
                         "you one. Tasks of flows you started that only you can do are "
                         "yours from the start.")),
            _task_list("candidate", _("My groups"), "users",
                       _("Nothing waiting for your groups"),
                       _("Tasks offered to you or to one of your roles appear here as soon "
                         "as a flow reaches them, for whoever claims them first.")),
            _task_hand_dialog(),
            spacing="5", width="100%", id="task-lists",
        ),
    )


def inbox_page() -> rx.Component:
    tabs = [_tab(*TABS[0]),
            _tab(TASKS, N_("Tasks"), "list-todo", T.task_count, "indigo", "task-count"),
            _tab(*TABS[1]), *[_tab(*t) for t in NUDGE_TABS]]
    tabs.append(rx.cond(SessionState.is_admin, _tab(*TABS[2])))
    return rx.vstack(
        page_header(_("Inbox"), _("Approvals and tasks waiting for you, messages, copies, "
                                  "reminders, and notes from guests.")),
        rx.tabs.root(rx.tabs.list(*tabs, aria_label=_("Inbox")),
                     _panel(rx.cond(S.kind == TASKS, _tasks(), _list())),
                     value=S.kind, on_change=[S.show, T.show], width="100%"),
        signers_dialog(),
        return_dialog(),
        spacing="3", width="100%",
    )

