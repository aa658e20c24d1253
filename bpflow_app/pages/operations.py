"""Operations (`/operations`, admins): what is stuck across the organisation, fixed in
bulk (SPEC §18). Filters over every instance (paged on the server), incidents (failed
circles grouped by template, circle and reason; each opens its instances), instances
chosen one by one or all that match, an action on them with its progress and a result
per instance as it goes, and the tasks past their due time. A filter naming a template
draws where its flows wait (a heat map, the figures on hover) and offers to migrate what
is chosen to another of its versions, a dry run first."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.catalogs import N_
from bpflow_app.components.drawing import flow_drawing
from bpflow_app.components.migrating import migration_request
from bpflow_app.components.names import NO
from bpflow_app.components.ui import empty_state, page_header, state_badge
from bpflow_app.components.when import number, when
from bpflow_app.i18n import _
from bpflow_app.pages.flows import STATUS_WORDS, status_badge
from bpflow_app.pages.operations_state import (
    PAGE,
    STATUSES,
    IncidentLine,
    InstanceLine,
    OperationsState,
    OverdueLine,
    ResultLine,
)
from bpflow_app.session import SessionState

S = OperationsState
ACTION_WORDS = {"retry": N_("Retry the failed circle"), "abort": N_("Abort"),
                "suspend": N_("Suspend"), "resume": N_("Resume")}
RESULT_WORDS = {"pending": N_("pending"), "done": N_("done"), "refused": N_("refused")}
RESULT_COLORS = {"pending": "pending", "done": "completed", "refused": "failed"}


def _field(name: str, label: rx.Var, kind: str = "text") -> rx.Component:
    return rx.vstack(
        rx.el.label(rx.text(label, size="1"), html_for=f"ops-{name}"),
        rx.input(name=name, id=f"ops-{name}", type=kind, size="1",
                 default_value=S.form.get(name, ""), custom_attrs=NO),
        spacing="1", align="start")


def _filters() -> rx.Component:
    status = rx.vstack(
        rx.el.label(rx.text(_("Status"), size="1"), html_for="ops-status"),
        rx.el.select(rx.el.option(_("Any status"), value=""),
                     *[rx.el.option(_(STATUS_WORDS[s]), value=s) for s in STATUSES],
                     name="status", id="ops-status"),
        spacing="1", align="start")
    return rx.card(rx.form(rx.vstack(
        rx.grid(_field("template", _("Template")), _field("version", _("Version"), "number"),
                status, _field("starter", _("Started by")),
                _field("started_after", _("Started on or after"), "date"),
                _field("started_before", _("Started before"), "date"),
                _field("updated_after", _("Changed on or after"), "date"),
                _field("updated_before", _("Changed before"), "date"),
                _field("waiting_hours", _("Waiting on one circle longer than (hours)"),
                       "number"),
                _field("circle", _("Failed circle")), _field("reason", _("Failure reason")),
                columns={"initial": "1", "sm": "2", "md": "4"}, spacing="2", width="100%"),
        rx.button(_("Show"), type="submit", size="1", id="ops-search"),
        spacing="2", width="100%", align="start"),
        on_submit=S.search, reset_on_submit=False, aria_label=_("Filter instances")),
        width="100%")


def _table(headers: list[rx.Var | str], body: rx.Component, label: rx.Var) -> rx.Component:
    return rx.box(rx.table.root(
        rx.table.header(rx.table.row(*[rx.table.column_header_cell(h, white_space="nowrap")
                                       for h in headers])),
        rx.table.body(body), width="100%", min_width="640px", variant="surface",
        size="1", aria_label=label), overflow_x="auto", width="100%")


def _incident(g: rx.Var[IncidentLine]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.text(g.template, size="1")), rx.table.cell(rx.code(g.circle, size="1")),
        rx.table.cell(rx.text(g.reason, size="1", custom_attrs=NO)),
        rx.table.cell(rx.text(number(g.count), size="1")),
        rx.table.cell(rx.button(_("Show its instances"), size="1", variant="soft",
                                on_click=S.open_incident(g.template, g.circle, g.reason))),
        custom_attrs={"data-incident": g.circle})


def _instance(i: rx.Var[InstanceLine]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.checkbox(checked=S.chosen.contains(i.id) | S.everything,
                                  disabled=S.everything, on_change=lambda on: S.choose(i.id, on),
                                  aria_label=i.id)),
        rx.table.cell(rx.link(rx.code(i.id, size="1"), href=routes.flow(i.id))),
        rx.table.cell(rx.text(i.template, " v", i.version, size="1")),
        rx.table.cell(status_badge(i.status)),
        rx.table.cell(rx.text(i.starter, size="1")),
        rx.table.cell(rx.text(when(i.created), size="1")),
        rx.table.cell(rx.text(when(i.updated), size="1")),
        custom_attrs={"data-instance": i.id})


def _actions() -> rx.Component:
    return rx.hstack(
        rx.checkbox(_("All that match (%(n)s)", n=number(S.total)), checked=S.everything,
                    on_change=S.choose_everything, id="ops-everything", size="1"),
        *[rx.button(_(word), size="1", variant="soft", on_click=S.run(action),
                    color_scheme="red" if action == "abort" else "indigo",
                    custom_attrs={"data-action": action})
          for action, word in ACTION_WORDS.items()],
        spacing="2", wrap="wrap", align="center")


def _instances() -> rx.Component:
    pager = rx.hstack(
        rx.button(_("Newer"), size="1", variant="ghost", on_click=S.page(-1),
                  disabled=S.offset == 0),
        rx.text(_("%(first)s–%(last)s of %(total)s", first=number(S.offset + 1),
                  last=number(S.offset + S.rows.length()), total=number(S.total)), size="1"),
        rx.button(_("Older"), size="1", variant="ghost", on_click=S.page(1),
                  disabled=S.offset + PAGE >= S.total),
        spacing="2", align="center")
    return rx.vstack(
        rx.heading(_("Instances"), size="4", as_="h2"), _actions(),
        rx.cond(S.rows.length() > 0, rx.fragment(
            _table(["", _("Instance"), _("Template"), _("Status"), _("Started by"),
                    _("Started"), _("Changed")], rx.foreach(S.rows, _instance),
                   _("Instances")), pager),
            rx.text(_("No instance matches."), size="2", color_scheme="gray")),
        spacing="2", width="100%")


def _result(r: rx.Var[ResultLine]) -> rx.Component:
    word = rx.cond(S.dry_run & (r.state == "done"), _("would be migrated"), rx.match(
        r.state, *[(k, _(v)) for k, v in RESULT_WORDS.items()], r.state))
    return rx.table.row(
        rx.table.cell(rx.link(rx.code(r.instance, size="1"), href=routes.flow(r.instance))),
        rx.table.cell(state_badge(rx.match(r.state, *RESULT_COLORS.items(), "pending"), word)),
        rx.table.cell(rx.text(r.reason, size="1", custom_attrs=NO)),
        class_name="result-line", custom_attrs={"data-instance": r.instance,
                                                "data-state": r.state})


def _progress() -> rx.Component:
    return rx.cond(S.operation != "", rx.card(rx.vstack(
        rx.heading(_("Bulk operation"), size="4", as_="h2"),
        rx.progress(value=rx.cond(S.matched > 0, (S.done + S.refused) * 100 / S.matched, 100),
                    width="100%"),
        rx.text(rx.cond(
            S.dry_run,
            _("Dry run: %(done)s would be migrated, %(refused)s refused of %(matched)s. "
              "Nothing is changed.", done=number(S.done), refused=number(S.refused),
              matched=number(S.matched)),
            _("%(done)s done, %(refused)s refused of %(matched)s",
              done=number(S.done), refused=number(S.refused), matched=number(S.matched))),
                size="2", id="ops-progress"),
        rx.cond(S.finished, rx.badge(_("finished"), color_scheme="green")),
        rx.cond(S.results.length() > 0, _table(
            [_("Instance"), _("Result"), _("Why")], rx.foreach(S.results, _result),
            _("Results"))),
        spacing="2", width="100%"), width="100%"))


def _heat() -> rx.Component:
    """Where the filter's template keeps its flows waiting."""
    return rx.cond(S.template != "", rx.card(rx.vstack(
        rx.heading(_("Where flows of %(template)s v%(version)s wait", template=S.template,
                     version=S.template_version), size="4", as_="h2"),
        flow_drawing(S.heat),
        rx.text(rx.cond(S.waited, _("The longer a step keeps flows waiting (p95), the darker "
                                    "its circle; its figures on hover."),
                        _("No flow of it has waited on a step yet.")),
                size="2", color_scheme="gray"),
        spacing="2", width="100%"), width="100%", id="ops-heat"))


def _migration() -> rx.Component:
    """Migrating what is chosen to another version of the filter's template."""
    return rx.cond(S.versions.length() > 1, rx.card(rx.vstack(
        rx.heading(_("Migrate flows of v%(source)s to v%(target)s", source=S.mig_from,
                     target=S.mig_to), size="4", as_="h2"),
        rx.text(_("What is chosen (or all that match) moves to the other version; a dry run "
                  "shows first what would happen, flow by flow, and changes nothing."),
                size="2", color_scheme="gray"),
        migration_request(S.versions, S.mig_from, S.mig_to, S.mig_map, S.set_mig_from,
                          S.set_mig_to, S.set_mig_map, "ops-migrate", rows="2"),
        rx.hstack(
            rx.button(rx.icon("eye", size=14), _("Dry run"), on_click=S.migrate(True),
                      size="1", variant="soft", id="ops-migrate-dry-run"),
            rx.button(rx.icon("git-branch", size=14), _("Migrate"), on_click=S.migrate(False),
                      size="1", disabled=~S.can_migrate, id="ops-migrate-run"),
            spacing="2"),
        spacing="2", width="100%"), width="100%", id="ops-migration"))


def _overdue(o: rx.Var[OverdueLine]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.link(rx.code(o.instance, size="1"), href=routes.flow(o.instance))),
        rx.table.cell(rx.text(o.template, size="1")), rx.table.cell(rx.code(o.circle, size="1")),
        rx.table.cell(rx.text(o.assignee, size="1")),
        rx.table.cell(rx.text(when(o.due), size="1")))


def operations_page() -> rx.Component:
    body = rx.vstack(
        _filters(), _progress(),
        rx.heading(_("Incidents"), size="4", as_="h2"),
        rx.cond(S.incidents.length() > 0,
                _table([_("Template"), _("Circle"), _("Reason"), _("Instances"), ""],
                       rx.foreach(S.incidents, _incident), _("Incidents")),
                rx.text(_("No failed circles."), size="2", color_scheme="gray")),
        _heat(), _migration(), _instances(),
        rx.heading(_("Overdue tasks (%(n)s)", n=number(S.overdue_total)), size="4", as_="h2"),
        rx.cond(S.overdue.length() > 0,
                _table([_("Instance"), _("Template"), _("Circle"), _("Assignee"), _("Due")],
                       rx.foreach(S.overdue, _overdue), _("Overdue tasks")),
                rx.text(_("No task is past its due time."), size="2", color_scheme="gray")),
        spacing="3", width="100%")
    return rx.vstack(
        page_header(_("Operations"),
                    _("What is stuck across the organisation, and fixing it in bulk.")),
        rx.cond(SessionState.is_admin, body, empty_state("lock", _("Administrators only"))),
        spacing="3", width="100%")
