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
from bpflow_app.components.ui import empty_state, page_header, row_badge
from bpflow_app.components.when import when
from bpflow_app.i18n import _, rich
from bpflow_app.inboxview import TASKS, MailView, TaskView
from bpflow_app.pages.mail_state import MailState
from bpflow_app.pages.tasks_state import TasksState
from bpflow_app.session import SessionState

S = MailState
T = TasksState
TABS = (("approval", N_("Approvals"), "stamp"), ("message", N_("Messages"), "message-square"),
        ("guest", N_("Guest messages"), "user-round"))


def _tab(kind: str, label: str, icon: str, count: rx.Var[int] | None = None,
         color: str = "red", badge_class: str = "unread") -> rx.Component:
    """A tab (its panel: the one content, of the tab shown)."""
    count = S.unread[kind] if count is None else count
    return rx.tabs.trigger(
        rx.hstack(rx.icon(icon, size=14), _(label),
                  rx.cond(count > 0, rx.badge(count, color_scheme=color, radius="full",
                                              variant="solid", class_name=badge_class)),
                  spacing="2", align="center"),
        value=kind,
    )


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
        rx.cond(S.comment_error != "", rx.text(S.comment_error, id="comment-error",
                                               color_scheme="red", size="1", role="alert")),
        rx.hstack(
            rx.button(rx.icon("check", size=14), _("Approve"), color_scheme="green",
                      on_click=S.decide(m.id, "approved"), loading=S.deciding == m.id),
            rx.button(rx.icon("x", size=14), _("Reject"), color_scheme="red", variant="soft",
                      on_click=S.decide(m.id, "rejected"), loading=S.deciding == m.id),
            rx.button(rx.icon("undo-2", size=14), _("Send back"), color_scheme="amber",
                      variant="soft", on_click=S.decide(m.id, "returned"),
                      loading=S.deciding == m.id,
                      title=_("Return it to the requester to amend (say what in the "
                              "comment)")),
            rx.cond(m.instance != "", return_button(m.instance, m.circle, m.id, m.subject)),
            spacing="2", wrap="wrap",
        ),
        spacing="2", width="100%",
    )


def _opened(m: rx.Var[MailView]) -> rx.Component:
    return rx.vstack(
        rx.separator(),
        rx.text(m.body, size="2", class_name="mail-body", custom_attrs=NO),
        rx.cond(m.instance != "", rx.link(_("Open the flow"), href=routes.flow(m.instance),
                                          size="2")),
        rx.cond(m.kind == "approval", _signed(m)),
        rx.cond(m.outcome != "", rx.text(m.outcome, size="2", weight="medium",
                                         class_name="mail-outcome")),
        rx.cond(m.open, _decide(m)),
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
                rx.vstack(rx.foreach(S.mails, _mail), pager, spacing="2", width="100%",
                          id="mail-list"),
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
    "delegate": (N_("Delegate"), N_("Handing on…"), N_("Delegate %(task)s of %(flow)s"))}


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
    if mine:
        buttons = [_task_button("unclaim", t, T.unclaim(t.instance, t.uri)),
                   _task_button("delegate", t, T.ask_delegate(
                       t.instance, t.uri, t.description + " (" + title + ")"))]
    else:
        buttons = [_task_button("claim", t, T.claim(t.instance, t.uri)),
                   rx.cond(SessionState.is_admin, _task_button(
                       "delegate", t, T.ask_delegate(
                           t.instance, t.uri, t.description + " (" + title + ")")))]
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
                rx.el.p(rx.link(title, href=t.href, size="1", class_name="task-flow",
                                custom_attrs=NO),
                        " · ", rx.el.span(waits, class_name="task-waits"),
                        class_name="mail-meta"),
                rx.el.p(rich(N_("Ready %(when)s"), when=lambda: when(t.ready, relative=True)),
                        due, class_name="mail-meta"),
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


def _delegate_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title(_("Delegate")),
        rx.alert_dialog.description(
            rich(N_("Hand %(task)s to someone else; it becomes theirs at once."),
                 task=lambda: data(T.handing_title)),
            size="2"),
        rx.el.label(rx.text(_("To"), size="2", weight="medium"), html_for="delegate-to"),
        rx.select(T.delegates, value=T.delegate_to, on_change=T.set_delegate_to,
                  placeholder=_("Choose a person…"), width="100%", id="delegate-to",
                  custom_attrs={"aria-label": _("Delegate to")}),
        rx.flex(
            rx.alert_dialog.cancel(rx.button(_("Cancel"), variant="soft", color_scheme="gray",
                                             on_click=T.cancel_delegate)),
            rx.button(_("Delegate"), on_click=T.delegate, id="confirm-delegate",
                      disabled=T.delegate_to == ""),
            spacing="3", justify="end", margin_top="12px"),
    ), open=T.handing != "")


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
            _delegate_dialog(),
            spacing="5", width="100%", id="task-lists",
        ),
    )


def inbox_page() -> rx.Component:
    tabs = [_tab(*TABS[0]),
            _tab(TASKS, N_("Tasks"), "list-todo", T.task_count, "indigo", "task-count"),
            _tab(*TABS[1])]
    tabs.append(rx.cond(SessionState.is_admin, _tab(*TABS[2])))
    return rx.vstack(
        page_header(_("Inbox"), _("Approvals and tasks waiting for you, messages, and notes "
                                  "from guests.")),
        rx.tabs.root(rx.tabs.list(*tabs, aria_label=_("Inbox")),
                     rx.tabs.content(rx.cond(S.kind == TASKS, _tasks(), _list()),
                                     value=S.kind, width="100%", padding_top="12px"),
                     value=S.kind, on_change=[S.show, T.show], width="100%"),
        return_dialog(),
        spacing="3", width="100%",
    )

