"""Templates (`/templates`, admins): versions, upload with the analysis errors by path,
a drawing preview and per-circle statistics (each count opens the instances it counts),
retire and restore (after a confirmation), and migrating running instances from one
version to another (a dry run first)."""

from __future__ import annotations

import reflex as rx

from bpflow_app import routes
from bpflow_app.catalogs import N_
from bpflow_app.components.drawing import flow_drawing
from bpflow_app.components.migrating import migration_request
from bpflow_app.components.names import NO, by, data, named
from bpflow_app.components.ui import empty_state, page_header, state_badge
from bpflow_app.components.when import ago, number
from bpflow_app.i18n import LangState, Rich, _, ngettext, rich
from bpflow_app.pages.migration_state import MigrationState
from bpflow_app.pages.templates_state import TemplatesState
from bpflow_app.session import SessionState
from bpflow_app.templatesview import (
    DraftLine,
    ErrorLine,
    InstanceLink,
    StatLine,
    TemplateLine,
    VersionLine,
)

S = TemplatesState
M = MigrationState
UPLOAD_ID = "template-file"
# the states a circle's per-circle counts are of, and a flow's statuses, in words
CIRCLE_STATES = {"waiting": N_("waiting"), "success": N_("success"),
                 "failure": N_("failure"), "skipped": N_("skipped")}
STATUSES = {"running": N_("running"), "completed": N_("completed"), "failed": N_("failed"),
            "suspended": N_("suspended"), "terminated": N_("terminated")}


def _word(state: rx.Var[str] | str, words: dict[str, str]) -> rx.Var:
    """A state in the reader's words (a state without words as it is)."""
    if isinstance(state, str):
        return _(words[state])
    return rx.match(state, *[(k, _(v)) for k, v in words.items()], state)


def _mine(texts: rx.Var[dict[str, str]]) -> rx.Var[str]:
    """Of a template's text in every language, the reader's."""
    return texts[LangState.lang]


def _status_badge(status: rx.Var[str]) -> rx.Component:
    return state_badge(status, _word(status, STATUSES))


def _version(t: rx.Var[TemplateLine], v: rx.Var[VersionLine]) -> rx.Component:
    """A version's button: "v2" (and a lock), named "v2 of travel" (the visible text
    first, as the accessible name must hold it)."""
    chosen = (S.name == t.name) & (S.version == v.version)
    name = "version-name-" + t.name + "-" + v.version.to_string()
    return rx.fragment(
        rx.cond(v.locked,
                named(name, N_("v%(version)s of %(name)s, locked"), version=v.version,
                      name=t.name),
                named(name, N_("v%(version)s of %(name)s"), version=v.version, name=t.name)),
        rx.button(
            "v", v.version, rx.cond(v.locked, rx.icon("lock", size=12, aria_hidden="true")),
            size="1", variant=rx.cond(chosen, "solid", "surface"),
            on_click=S.choose(t.name, v.version), custom_attrs=by(name)))


def _retirement(t: rx.Var[TemplateLine]) -> rx.Component:
    name = "retirement-name-" + t.name
    return rx.cond(t.retirable | t.retired, rx.cond(
        t.retired,
        rx.fragment(
            named(name, N_("Restore %(name)s"), name=t.name),
            rx.button(rx.icon("archive-restore", size=12), _("Restore"), size="1",
                      variant="soft", on_click=S.ask(t.name, False), custom_attrs=by(name))),
        rx.fragment(
            named(name, N_("Retire %(name)s"), name=t.name),
            rx.button(rx.icon("archive", size=12), _("Retire"), size="1", variant="soft",
                      color_scheme="red", on_click=S.ask(t.name, True),
                      custom_attrs=by(name))),
    ))


def _template(t: rx.Var[TemplateLine]) -> rx.Component:
    return rx.vstack(
        rx.hstack(rx.text(_mine(t.titles), weight="medium", custom_attrs=NO),
                  rx.code(t.name, size="1"),
                  rx.cond(t.retired, rx.badge(_("retired"), color_scheme="gray",
                                              class_name="retired-badge")),
                  rx.spacer(), _retirement(t),
                  spacing="2", align="center", wrap="wrap", width="100%"),
        rx.flex(rx.foreach(t.versions, lambda v: _version(t, v)), spacing="1", wrap="wrap"),
        spacing="1", width="100%", padding_y="6px", class_name="template-line",
        custom_attrs={"data-template": t.name},
    )


def _count(s: rx.Var[StatLine], state: str, n: rx.Var[int]) -> rx.Component:
    """A count that opens the list of the instances it counts."""
    name = f"count-name-{state}-" + s.circle
    return rx.table.cell(rx.cond(
        n > 0,
        rx.fragment(
            rx.el.span(Rich.ngettext("%(count)s flow at %(circle)s: %(state)s",
                                     "%(count)s flows at %(circle)s: %(state)s", n,
                                     count=lambda: rx.fragment(number(n)),
                                     circle=lambda: data(s.circle),
                                     state=lambda: rx.fragment(_word(state, CIRCLE_STATES))),
                       id=name, hidden=True),
            rx.button(number(n), size="1", variant="ghost", on_click=S.show_at(s.circle, state),
                      custom_attrs=by(name), class_name="circle-count")),
        rx.text(number(n), size="2", color_scheme="gray")))


def _stat(s: rx.Var[StatLine]) -> rx.Component:
    return rx.table.row(rx.table.cell(s.circle, custom_attrs=NO),
                        _count(s, "waiting", s.waiting),
                        _count(s, "success", s.success), _count(s, "failure", s.failure),
                        _count(s, "skipped", s.skipped))


def _instance(i: rx.Var[InstanceLink]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.link(rx.code(i.id[:12]), href=i.href)),
        rx.table.cell("v", i.version), rx.table.cell(_status_badge(i.status)),
        rx.table.cell(i.user, custom_attrs=NO), class_name="instance-line",
        custom_attrs={"data-instance": i.id})


def _headers(*heads: rx.Var) -> rx.Component:
    return rx.table.header(rx.table.row(*[rx.table.column_header_cell(h) for h in heads]))


def _instances(items, label: rx.Var) -> rx.Component:
    return rx.box(rx.table.root(
        _headers(_("Flow"), _("Version"), _("Status"), _("Started by")),
        rx.table.body(rx.foreach(items, _instance)), size="1", variant="surface",
        width="100%", aria_label=label), overflow_x="auto", width="100%")


def _at_circle() -> rx.Component:
    return rx.cond(S.at_circle != "", rx.vstack(
        rx.hstack(rx.heading(rich(N_("At %(circle)s: %(state)s (%(count)s)"),
                                  circle=lambda: rx.code(S.at_circle),
                                  state=lambda: rx.fragment(_word(S.at_state,
                                                                  CIRCLE_STATES)),
                                  count=lambda: rx.fragment(number(S.at_total))),
                             size="3", as_="h3"),
                  rx.spacer(),
                  rx.button(rx.icon("x", size=12), size="1", variant="soft",
                            color_scheme="gray", on_click=S.close_at, aria_label=_("Close")),
                  width="100%", align="center"),
        rx.cond(S.at_items.length() > 0,
                _instances(S.at_items, label=_("Flows at the circle")),
                rx.text(_("None any more."), size="2", color_scheme="gray")),
        rx.cond(S.at_total > S.at_items.length(),
                rx.text(ngettext("The newest %(n)s is listed.", "The newest %(n)s are listed.",
                                 S.at_items.length()), size="1", color_scheme="gray")),
        spacing="2", width="100%", id="circle-instances"))


def _draft(d: rx.Var[DraftLine]) -> rx.Component:
    return rx.hstack(
        rx.link(rx.cond(d.name != "", d.name, _("(no name yet)")),
                href="/design?draft=" + d.id.to_string(), custom_attrs=NO),
        rx.text(d.author, size="1", color_scheme="gray", custom_attrs=NO),
        rx.text(ago(d.updated), size="1", color_scheme="gray"),
        spacing="2", align="center", class_name="draft-line",
        custom_attrs={"data-draft": d.id})


def _drafts() -> rx.Component:
    return rx.vstack(
        rx.hstack(rx.heading(_("Drafts"), size="3", as_="h3"), rx.spacer(),
                  rx.link(rx.icon("pen-tool", size=14), _("Design a new template"),
                          href=routes.DESIGN, size="2", id="design-new"),
                  width="100%", align="center"),
        rx.cond(S.drafts.length() > 0, rx.foreach(S.drafts, _draft),
                rx.text(_("No drafts."), size="2", color_scheme="gray")),
        spacing="2", width="100%", id="drafts")


def _preview() -> rx.Component:
    stats = rx.box(rx.table.root(
        _headers(_("Circle"), _("Waiting"), _("Success"), _("Failure"), _("Skipped")),
        rx.table.body(rx.foreach(S.stats, _stat)), size="1", variant="surface", width="100%"),
        overflow_x="auto", width="100%")
    return rx.card(rx.vstack(
        rx.hstack(rx.heading(_mine(S.titles), size="4", as_="h2", custom_attrs=NO),
                  rx.code(S.name, " v", S.version, size="2"), rx.spacer(),
                  rx.link(rx.icon("pen-tool", size=14), _("Open in the designer"),
                          href=routes.design(S.name), size="2", id="open-designer"),
                  spacing="2", align="center", wrap="wrap", width="100%"),
        rx.cond(_mine(S.descriptions) != "", rx.text(_mine(S.descriptions), size="2",
                                                     color_scheme="gray", custom_attrs=NO)),
        rx.cond(S.heat, flow_drawing(S.waits), flow_drawing(S.preview)),
        rx.cond(S.waited, rx.hstack(
            rx.switch(checked=S.heat, on_change=S.show_heat, id="heat-switch",
                      aria_label=_("Show where flows wait")),
            rx.text(_("Show where flows wait: the longer a step keeps flows waiting (p95), the "
                      "darker its circle; its figures on hover."), size="2",
                    color_scheme="gray"),
            spacing="2", align="center")),
        rx.heading(_("Flows (all versions)"), size="3", as_="h3"),
        rx.flex(rx.foreach(S.statuses, lambda kv: state_badge(
                    kv[0], _("%(status)s: %(count)s", status=_word(kv[0], STATUSES),
                             count=number(kv[1])))),
                spacing="2", wrap="wrap"),
        rx.heading(_("Per circle (all versions)"), size="3", as_="h3"),
        rx.cond(S.stats.length() > 0, stats,
                rx.text(_("No flows yet."), size="2", color_scheme="gray")),
        _at_circle(),
        spacing="3", width="100%"), width="100%", id="template-preview")


def _refused(i: rx.Var[InstanceLink]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.link(rx.code(i.id[:12]), href=i.href)),
        rx.table.cell(_status_badge(i.status)), rx.table.cell(i.reasons),
        class_name="refused-line", custom_attrs={"data-instance": i.id})


def _migration_result() -> rx.Component:
    refused = rx.box(rx.table.root(
        _headers(_("Flow"), _("Status"), _("Why not")),
        rx.table.body(rx.foreach(M.mig_refused, _refused)), size="1", variant="surface",
        width="100%", aria_label=_("Refused flows")), overflow_x="auto", width="100%")
    moved, kept = M.mig_migrated.length(), M.mig_refused.length()
    # two callouts, each with its own icon: an icon chosen by the state would be lucide's
    # dynamic icon, whose map of every icon is 1,600 more files in the build
    return rx.vstack(
        rx.cond(
            M.mig_dry,
            rx.callout(rx.text(ngettext(
                "Dry run: %(n)s flow would be migrated, %(refused)s refused. "
                "Nothing was changed.",
                "Dry run: %(n)s flows would be migrated, %(refused)s refused. "
                "Nothing was changed.", moved, refused=kept)),
                icon="info", color_scheme="blue", width="100%", id="migration-outcome"),
            rx.callout(rx.text(ngettext("Migrated %(n)s flow; %(refused)s refused.",
                                        "Migrated %(n)s flows; %(refused)s refused.", moved,
                                        refused=kept)),
                       icon="circle-check", color_scheme="green", width="100%",
                       id="migration-outcome")),
        rx.cond(moved > 0, rx.vstack(
            rx.text(rx.cond(M.mig_dry, _("To be migrated"), _("Migrated")), weight="medium",
                    size="2"),
            _instances(M.mig_migrated, label=rx.cond(M.mig_dry, _("Flows to be migrated"),
                                                     _("Migrated flows"))),
            width="100%", id="migration-migrated")),
        rx.cond(kept > 0, rx.vstack(
            rx.text(_("Refused"), weight="medium", size="2"), refused, width="100%",
            id="migration-refused")),
        spacing="2", width="100%")


def _migration() -> rx.Component:
    return rx.card(rx.vstack(
        rx.heading(_("Migrate flows of v%(source)s to v%(target)s", source=M.mig_from,
                     target=M.mig_to), size="4", as_="h2"),
        rx.text(_("Running, failed and suspended flows move to the other version: circles "
                  "match by uri (or by the map), finished ones keep their results, new ones "
                  "start waiting. A flow that cannot move is refused and stays as it is. A "
                  "dry run shows what would happen first."), size="2", color_scheme="gray"),
        migration_request(M.versions, M.mig_from, M.mig_to, M.mig_map, M.set_mig_from,
                          M.set_mig_to, M.set_mig_map, "migrate"),
        rx.hstack(
            rx.button(rx.icon("eye", size=14), _("Dry run"), on_click=M.dry_run,
                      variant="soft", id="migrate-dry-run"),
            # a migration changes the per-circle counts: the template's are read anew
            rx.button(rx.icon("git-branch", size=14), _("Migrate"),
                      on_click=[M.migrate, S.choose(S.name, S.version)],
                      disabled=~M.can_migrate, id="migrate-run"),
            spacing="2"),
        rx.cond(M.mig_error != "", rx.callout(M.mig_error, icon="circle-x",
                                              color_scheme="red", width="100%",
                                              role="alert", id="migration-error")),
        rx.cond(M.mig_shown, _migration_result()),
        spacing="3", width="100%"), width="100%", id="migration")


def _error(e: rx.Var[ErrorLine]) -> rx.Component:
    return rx.table.row(rx.table.cell(rx.code(e.path)),
                        rx.table.cell(rx.badge(e.code, custom_attrs=NO)),
                        rx.table.cell(e.message), class_name="upload-error")


def _upload() -> rx.Component:
    paste = rx.form(rx.vstack(
        rx.text_area(name="body", rows="10", width="100%", placeholder='{"name": "…", '
                     '"circles": […]}',  # it holds JSON
                     custom_attrs={"aria-label": _("Template JSON"), **NO},
                     font_family="monospace"),
        rx.button(rx.icon("upload", size=14), _("Upload"), type="submit", loading=S.busy),
        spacing="2", width="100%", align="start"), on_submit=S.paste, reset_on_submit=False,
        aria_label=_("Paste JSON"))
    drop = rx.upload(
        rx.vstack(rx.cond(S.busy, rx.spinner(size="3"), rx.icon("file-json", size=28)),
                  rx.text(_("Drop a .json file here, or click to choose one"), size="2"),
                  align="center", spacing="2"),
        id=UPLOAD_ID, multiple=False, max_files=1, on_drop=S.upload,
        border=f"1px dashed {rx.color('gray', 7)}", border_radius="12px", padding="24px",
        width="100%", cursor="pointer",
    )
    return rx.card(rx.vstack(
        rx.heading(_("Upload a version"), size="4", as_="h2"),
        rx.text(_("An upload that differs from the latest version becomes the next version; "
                  "an identical one stores nothing."), size="2", color_scheme="gray"),
        rx.tabs.root(rx.tabs.list(rx.tabs.trigger(_("Paste JSON"), value="paste"),
                                  rx.tabs.trigger(_("File"), value="file")),
                     rx.tabs.content(paste, value="paste", padding_top="12px"),
                     rx.tabs.content(drop, value="file", padding_top="12px"),
                     default_value="paste", width="100%"),
        rx.cond(S.outcome != "", rx.callout(S.outcome, icon="circle-check",
                                            color_scheme="green", width="100%",
                                            id="upload-outcome")),
        rx.cond(S.errors.length() > 0, rx.vstack(
            rx.callout(ngettext("The template was not stored: %(n)s problem.",
                                "The template was not stored: %(n)s problems.",
                                S.errors.length()),
                       icon="circle-x", color_scheme="red", width="100%", role="alert"),
            rx.box(rx.table.root(
                _headers(_("Path"), _("Code"), _("Problem")),
                rx.table.body(rx.foreach(S.errors, _error)), size="1", width="100%",
                variant="surface"), overflow_x="auto", width="100%", id="upload-errors"),
            width="100%")),
        spacing="3", width="100%"), width="100%")


def _retire_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title(rx.cond(
                S.asked_retire,
                rich(N_("Retire %(name)s?"), name=lambda: data(S.asked)),
                rich(N_("Restore %(name)s?"), name=lambda: data(S.asked)))),
            rx.alert_dialog.description(rx.cond(
                S.asked_retire,
                _("Nobody can start it any more, and My flows no longer offers it. Flows "
                  "already running go on. You can restore it later."),
                _("It can be started again, by those its starters allow.")), size="2"),
            rx.flex(
                rx.alert_dialog.cancel(rx.button(_("Cancel"), variant="soft",
                                                 color_scheme="gray", on_click=S.cancel)),
                rx.button(rx.cond(S.asked_retire, _("Retire"), _("Restore")),
                          on_click=S.confirm,
                          color_scheme=rx.cond(S.asked_retire, "red", "green"),
                          id="confirm-retirement"),
                spacing="3", justify="end", margin_top="12px",
            ),
        ),
        open=S.asked != "",
    )


def templates_page() -> rx.Component:
    listing = rx.card(rx.vstack(
        rx.heading(_("Templates"), size="4", as_="h2"),
        rx.hstack(rx.icon("lock", size=12, aria_hidden="true"),
                  rx.text(_("locked: a version with flows"), size="1", color_scheme="gray"),
                  spacing="1", align="center"),
        rx.foreach(S.items, _template), _drafts(), spacing="2", width="100%"), width="100%")
    body = rx.cond(S.loading, rx.center(rx.spinner(size="3"), padding="32px"), rx.vstack(
        rx.grid(
            listing,
            rx.cond(S.name != "", _preview(), empty_state("files", _("No templates yet"))),
            spacing="4", width="100%", align_items="start",
            grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                   "minmax(0,2fr) minmax(0,3fr)"],
        ),
        rx.cond(M.versions.length() > 1, _migration()),
        _upload(), _retire_dialog(), spacing="4", width="100%"))
    return rx.vstack(
        page_header(_("Templates"),
                    _("Versions, uploads, previews and what happened per circle.")),
        rx.cond(SessionState.is_admin, body,
                empty_state("lock", _("Administrators only"),
                            _("Ask an administrator to upload or change templates."))),
        spacing="3", width="100%",
    )
