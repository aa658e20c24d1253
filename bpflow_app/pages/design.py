"""The designer (`/design`, `/design/{name}`; admins and designers, SPEC §16): a palette
of box kinds, the canvas, the JSON view beside it, the properties of the template and of
the selected circle (its form built field by field), and the problems the analysis finds,
each selecting the circle it concerns. Every canvas action has a button with a name and
a key."""

from __future__ import annotations

import reflex as rx

from bpflow_app.catalogs import N_
from bpflow_app.components.canvas import design_canvas
from bpflow_app.components.designpanel import (
    hints,
    panel_keys,
    people,
    people_lists,
    picker,
    timing,
)
from bpflow_app.components.names import NO, by, named
from bpflow_app.components.ui import empty_state, page_header
from bpflow_app.designview import FIELD_KINDS, PALETTE, Problem
from bpflow_app.i18n import _, ngettext
from bpflow_app.pages.design_state import (
    KIND_WORDS,
    ChainStep,
    DesignJson,
    DesignNames,
    DesignState,
    FieldRow,
    KeyRow,
    TryField,
)
from bpflow_app.pages.flows import STATUS_WORDS

S = DesignState
KINDS = list(PALETTE)  # the palette's order: Alt+1 … Alt+9, Alt+0
ICONS = {"form": "file-pen-line", "confirm": "circle-check", "http": "globe",
         "approval": "stamp", "mail": "mail", "timer": "timer", "signal": "radio",
         "flow": "workflow", "compute": "calculator", "marker": "circle-dot"}
ONE = "minmax(0,1fr)"  # a grid of one column (on a phone, a tablet)
DEBOUNCE_MS = 100  # typing in a field is analysed this long after the last key
TEMPLATE_WORDS = {"name": N_("Name"), "title": N_("Title"), "description": N_("Description"),
                  "inputs": N_("Inputs (JSON: name → type)"),
                  "starters": N_("Starters (roles, comma separated)"),
                  "stop_at": N_("Stop at (ISO 8601 time)")}
CIRCLE_WORDS = {"enter": N_("On entering (JSON, passed to its events)"),
                "leave": N_("On leaving (JSON, passed to its events)")}


def _key(i: int) -> str:
    return f"Alt+{(i + 1) % 10}"


def canvas_keys() -> dict[str, dict]:
    """The canvas's keys: each palette kind, undo and redo, layout, weak edges."""
    keys = {_key(i): {"kind": "add", "box": k}
            for i, k in enumerate(KINDS)}
    keys.update({"Control+z": {"kind": "undo"}, "Control+Shift+z": {"kind": "redo"},
                 "Control+y": {"kind": "redo"}, "Alt+l": {"kind": "layout"},
                 "Alt+w": {"kind": "weak"}})
    return keys


def canvas_words() -> dict[str, rx.Var]:
    """React Flow's own words (its controls, how to use a node by keys) in the reader's
    language."""
    node = _("Press Enter or Space to select a circle, then the arrow keys to move it, "
             "Delete to remove it, Escape to cancel.")
    return {"node.a11yDescription.default": node, "node.a11yDescription.keyboardDisabled": node,
            "edge.a11yDescription.default": _("Press Enter or Space to select an arrow, "
                                              "then Delete to remove it."),
            "controls.ariaLabel": _("Canvas controls"), "controls.zoomIn.ariaLabel": _("Zoom in"),
            "controls.zoomOut.ariaLabel": _("Zoom out"),
            "controls.fitView.ariaLabel": _("Fit the flow in view"),
            "controls.interactive.ariaLabel": _("Lock or unlock editing"),
            "minimap.ariaLabel": _("Overview"), "handle.ariaLabel": _("Arrow handle"),
            "moved": _("Moved to x {x}, y {y}")}


def _tool(icon: str, label: rx.Var, keys: str, **props) -> rx.Component:
    return rx.tooltip(rx.button(rx.icon(icon, size=14), size="2", variant="soft",
                                aria_label=label, custom_attrs={"aria-keyshortcuts": keys},
                                **props), content=label)


def _toolbar() -> rx.Component:
    return rx.hstack(
        _tool("undo-2", _("Undo (Ctrl+Z)"), "Control+Z", on_click=S.undo,
              disabled=~S.can_undo, id="design-undo"),
        _tool("redo-2", _("Redo (Ctrl+Shift+Z)"), "Control+Shift+Z", on_click=S.redo,
              disabled=~S.can_redo, id="design-redo"),
        _tool("layout-grid", _("Auto layout (Alt+L)"), "Alt+L", on_click=S.auto_layout,
              id="design-layout"),
        _tool("spline", rx.cond(S.show_weak, _("Hide weak edges (Alt+W)"),
                                _("Show weak edges (Alt+W)")), "Alt+W",
              on_click=S.toggle_weak, id="design-weak"),
        _tool("trash-2", _("Delete the selected element (Delete)"), "Delete",
              on_click=S.delete_selected, disabled=S.selected == "", color_scheme="red",
              id="design-delete"),
        rx.button(rx.icon("list-ordered", size=14), _("Approval chain…"), size="2",
                  variant="soft", on_click=S.open_chain, id="design-chain"),
        rx.spacer(),
        rx.cond(S.errors > 0,
                rx.badge(ngettext("%(n)s problem", "%(n)s problems", S.errors),
                         color_scheme="red", id="design-error-count"),
                rx.badge(_("No problems"), color_scheme="green", id="design-error-count")),
        rx.button(rx.icon("play", size=14), rx.cond(S.trying, _("Try again"), _("Try it")),
                  on_click=S.try_it, disabled=(S.errors > 0) | S.loading, variant="soft",
                  color_scheme="green", id="design-try"),
        rx.cond(S.trying, rx.button(rx.icon("square", size=14), _("Stop trying"),
                                    on_click=S.stop_trying, variant="soft",
                                    color_scheme="gray", id="design-stop-trying")),
        rx.button(rx.icon("upload", size=14), _("Publish"), on_click=S.review,
                  disabled=(S.errors > 0) | S.loading, id="design-publish"),
        spacing="2", align="center", width="100%", wrap="wrap")


def _palette() -> rx.Component:
    return rx.vstack(
        rx.heading(_("Add a circle"), size="2", as_="h2"),
        *[rx.button(rx.icon(ICONS[k], size=14), _(KIND_WORDS[k]), size="1", variant="surface",
                    on_click=S.add(k), width="100%", justify="start",
                    custom_attrs={"aria-keyshortcuts": _key(i), "data-kind": k},
                    title=_("%(kind)s (%(key)s)", kind=_(KIND_WORDS[k]), key=_key(i)),
                    class_name="palette-item")
          for i, k in enumerate(KINDS)],
        spacing="1", width="100%", role="toolbar", aria_label=_("Palette"),
        id="design-palette")


def _json_view() -> rx.Component:
    return rx.vstack(
        rx.heading(_("JSON"), size="2", as_="h2"),
        rx.text_area(value=DesignJson.json_text, on_change=S.set_json.debounce(DEBOUNCE_MS),
                     font_family="monospace", font_size="12px", rows="26", width="100%",
                     id="design-json", spell_check=False,
                     custom_attrs={"aria-label": _("The template as JSON"), **NO}),
        rx.cond(S.json_error != "", rx.callout(S.json_error, icon="circle-x", color_scheme="red",
                                               role="alert", width="100%",
                                               id="design-json-error")),
        spacing="2", width="100%")


def _text(label: rx.Var, value: rx.Var, on_change, id_: str | rx.Var,
          suggested: rx.Var | None = None, target: str | rx.Var = "",
          **props) -> rx.Component:
    """A labelled text input; with `suggested`, the completions of what is being typed
    under it (`target`: the field `DesignState.complete` completes)."""
    if suggested is not None:
        props["custom_attrs"] = {"data-hints": "hints-" + id_}
    return rx.vstack(
        rx.el.label(rx.text(label, size="1", weight="medium"), html_for=id_),
        rx.input(value=value, on_change=on_change, debounce_timeout=DEBOUNCE_MS, id=id_,
                 size="1", width="100%", **props),
        hints(suggested, target, id_) if suggested is not None else rx.fragment(),
        spacing="1", width="100%")


def _template_panel() -> rx.Component:
    fields = S.template_fields
    return rx.vstack(
        rx.heading(_("Template"), size="3", as_="h2"),
        *[_text(_(TEMPLATE_WORDS[k]), fields[k], S.set_template(k), f"template-{k}")
          for k in ("name", "title", "description")],
        rx.text(_("Kind"), size="1", weight="medium"),
        rx.select.root(rx.select.trigger(aria_label=_("Kind"), id="template-kind"),
                       rx.select.content(rx.select.item(_("dag (arrows drawn)"), value="dag"),
                                         rx.select.item(_("linear (one after the other)"),
                                                        value="linear")),
                       value=fields["kind"], on_change=S.set_template("kind"), size="1"),
        *[_text(_(TEMPLATE_WORDS[k]), fields[k], S.set_template(k), f"template-{k}")
          for k in ("inputs", "starters", "stop_at")],
        spacing="2", width="100%", id="template-panel")


def _field(f: rx.Var[FieldRow]) -> rx.Component:
    at = f.index.to_string()
    last = S.panel.fields.length() - 1

    def cell(key: str, label: str, value: rx.Var, **props) -> rx.Component:
        return rx.input(value=value, on_change=lambda v: S.set_field(f.index, key, v),
                        debounce_timeout=DEBOUNCE_MS, size="1", placeholder=_(label),
                        aria_label=_(label), id="field-" + key + "-" + at, **props)

    def move(way: str, by_: int, message: str, keys: str) -> rx.Component:
        name = "field-" + way + "-name-" + at
        return rx.fragment(named(name, message, name=f.name), rx.icon_button(
            rx.icon("arrow-" + way, size=12), size="1", variant="soft",
            on_click=S.move_field(f.index, by_), id="field-" + way + "-" + at,
            disabled=(f.index == 0) if way == "up" else (f.index == last),
            custom_attrs={**by(name), "aria-keyshortcuts": keys, "data-move": way}))
    return rx.card(rx.vstack(
        rx.hstack(
            cell("name", N_("Field name"), f.name),
            rx.select.root(rx.select.trigger(
                               custom_attrs={"aria-label": _("Field type"), **NO}),
                           rx.select.content(*[rx.select.item(t, value=t)
                                               for t in FIELD_KINDS]),
                           value=f.type, on_change=lambda v: S.set_field(f.index, "type", v),
                           size="1"),
            rx.checkbox(_("Required"), checked=f.required, size="1",
                        on_change=lambda v: S.set_field(f.index, "required", v)),
            rx.spacer(),
            move("up", -1, N_("Move %(name)s up (Alt+Up)"), "Alt+ArrowUp"),
            move("down", 1, N_("Move %(name)s down (Alt+Down)"), "Alt+ArrowDown"),
            rx.icon_button(rx.icon("x", size=12), size="1", variant="soft", color_scheme="red",
                           on_click=S.remove_field(f.index), aria_label=_("Remove the field")),
            spacing="1", align="center", width="100%", wrap="wrap"),
        rx.hstack(cell("label", N_("Label"), f.label),
                  cell("default", N_("Default"), f.default,
                       custom_attrs={"data-hints": "hints-field-default-" + at}),
                  spacing="1", width="100%"),
        hints(f.hints, "field:" + at, "field-default-" + at),
        rx.hstack(cell("options", N_("Options (comma separated)"), f.options),
                  cell("accept", N_("Accept (file types)"), f.accept),
                  spacing="1", width="100%"),
        spacing="1", width="100%"), size="1", width="100%", class_name="form-field-row",
        custom_attrs={"data-index": at})


def _form_builder() -> rx.Component:
    p = S.panel
    return rx.vstack(
        rx.hstack(rx.heading(_("Form"), size="2", as_="h3"), rx.spacer(),
                  rx.button(rx.icon("plus", size=12), _("Add a field"), size="1",
                            on_click=S.new_field, id="add-field"),
                  width="100%", align="center"),
        rx.text(_("Alt+Up and Alt+Down move the field you are in."), size="1",
                color_scheme="gray"),
        rx.foreach(p.fields, _field),
        rx.el.div(S.said, role="status", class_name="visually-hidden", id="form-said"),
        spacing="2", width="100%", id="form-builder")


def _action_row(row: rx.Var[KeyRow]) -> rx.Component:
    return rx.vstack(
        rx.text(row.key, size="1", weight="medium", id="action-name-" + row.key,
                custom_attrs=NO),  # the DSL's key, as written
        rx.input(value=row.text, on_change=lambda v: S.set_action(row.key, v),
                 debounce_timeout=DEBOUNCE_MS, size="1", width="100%",
                 id="action-" + row.key, custom_attrs={**by("action-name-" + row.key),
                                                       "data-hints": "hints-action-" + row.key}),
        hints(row.hints, "action:" + row.key, "action-" + row.key),
        spacing="1", width="100%")


def _more_row(row: rx.Var[KeyRow]) -> rx.Component:
    label = rx.match(row.key, *[(k, _(v)) for k, v in CIRCLE_WORDS.items()], row.key)
    return rx.vstack(
        rx.text(label, size="1", weight="medium"),
        rx.input(value=row.text, on_change=lambda v: S.set_circle(row.key, v),
                 debounce_timeout=DEBOUNCE_MS, size="1", width="100%",
                 id="circle-" + row.key, aria_label=label),
        spacing="1", width="100%")


def _circle_panel() -> rx.Component:
    p = S.panel
    return rx.vstack(
        rx.heading(_("Circle"), size="3", as_="h2"),
        _try_moves(),
        rx.foreach(p.errors, lambda e: rx.callout(e, icon="circle-x", color_scheme="red",
                                                   size="1", width="100%")),
        rx.vstack(rx.el.label(rx.text(_("Name (uri)"), size="1", weight="medium"),
                              html_for="circle-uri"),
                  rx.input(default_value=p.uri, key=p.uri, on_blur=S.set_uri, size="1",
                           width="100%", id="circle-uri"),
                  spacing="1", width="100%"),
        rx.text(_("Kind"), size="1", weight="medium"),
        rx.select.root(rx.select.trigger(aria_label=_("Kind of box"), id="circle-kind"),
                       rx.select.content(*[rx.select.item(_(KIND_WORDS[k]), value=k)
                                           for k in KINDS]),
                       value=p.kind, on_change=S.set_kind, size="1"),
        _text(_("Description"), p.description, S.set_circle("description"),
              "circle-description"),
        _text(_("When (expression)"), p.when, S.set_circle("when"), "circle-when",
              p.when_hints, "when"),
        rx.text(_("Type ${ for the values this circle may read, a letter for a function."),
                size="1", color_scheme="gray"),
        rx.cond(p.kind == "confirm", _text(_("Confirmation text"), p.confirm,
                                           S.set_circle("confirm"), "circle-confirm",
                                           p.confirm_hints, "confirm")),
        rx.cond(p.action.length() > 0, rx.vstack(
            rx.heading(_("Action"), size="2", as_="h3"),
            rx.cond(S.extra.has_to, picker("to", S.extra.recipients,
                                           N_("Approvers or recipients (to)"), users=True)),
            rx.foreach(p.action, _action_row),
            spacing="1", width="100%")),
        rx.cond(p.has_form | (p.kind == "form"), _form_builder()),
        rx.text(_("Depends on: %(deps)s", deps=p.depends), size="1", color_scheme="gray"),
        rx.select(DesignNames.uris, placeholder=_("Add an arrow from…"),
                  on_change=S.depend_on,
                  size="1", value="", id="circle-depend",
                  custom_attrs={"aria-label": _("Add an arrow from…")}),
        people(), timing(DEBOUNCE_MS),
        rx.foreach(p.more, _more_row),
        spacing="2", width="100%", id="circle-panel")


def _try_input(f: rx.Var[TryField]) -> rx.Component:
    at = "try-field-" + f.name
    return rx.vstack(
        rx.el.label(rx.text(f.label, rx.cond(f.required, " *", ""), size="1",
                            weight="medium"), html_for=at),
        rx.cond(f.options.length() > 0,
                rx.el.select(rx.el.option("", value=""),
                             rx.foreach(f.options, lambda o, i: rx.el.option(
                                 f.option_labels[i], value=o)),
                             name=f.name, id=at, default_value=f.default,
                             class_name="rt-reset try-select"),
                rx.cond(f.type == "boolean",
                        rx.el.select(rx.el.option("", value=""),
                                     rx.el.option(_("yes"), value="true"),
                                     rx.el.option(_("no"), value="false"),
                                     name=f.name, id=at, class_name="rt-reset try-select"),
                        rx.input(name=f.name, id=at, default_value=f.default, size="1",
                                 width="100%"))),
        spacing="1", width="100%")


def _try_moves() -> rx.Component:
    """The selected circle of a tried draft: its state and what can be done with it."""
    t = S.try_panel
    return rx.cond(t.uri != "", rx.callout.root(rx.vstack(
        rx.text(_("Tried: %(state)s", state=t.words), weight="medium", size="2",
                id="try-state", custom_attrs={"data-state": t.state}),
        rx.cond(t.reason != "", rx.text(t.reason, size="1", color_scheme="red")),
        rx.cond(t.result != "", rx.code(t.result, size="1", custom_attrs=NO)),
        rx.cond(t.confirm,
                rx.hstack(rx.button(_("Accept"), size="1", on_click=S.try_confirm(True),
                                    id="try-accept"),
                          rx.button(_("Decline"), size="1", color_scheme="red",
                                    variant="soft", on_click=S.try_confirm(False),
                                    id="try-decline"), spacing="2"),
                rx.cond(t.fill, rx.form(rx.vstack(
                    rx.foreach(t.fields, _try_input),
                    rx.button(_("Send the form"), size="1", type="submit", id="try-fill"),
                    spacing="2", width="100%"), on_submit=S.try_fill, reset_on_submit=False,
                    width="100%", id="try-form"))),
        rx.cond(t.decide, rx.vstack(
            rx.text_area(value=S.try_comment, on_change=S.set_try_comment,
                         debounce_timeout=DEBOUNCE_MS,
                         placeholder=_("Comment (optional; needed to send it back)"),
                         rows="2", aria_label=_("Comment"), id="try-comment", width="100%"),
            rx.hstack(
                rx.button(_("Approve"), size="1", color_scheme="green",
                          on_click=S.try_decide("approved"), id="try-approve"),
                rx.button(_("Reject"), size="1", color_scheme="red",
                          on_click=S.try_decide("rejected"), id="try-reject"),
                rx.button(_("Send back"), size="1", variant="soft", color_scheme="amber",
                          on_click=S.try_decide("returned"), id="try-return"),
                rx.button(_("Return to…"), size="1", variant="soft", color_scheme="amber",
                          on_click=S.try_ask_return, id="try-return-to"),
                spacing="2", wrap="wrap"),
            rx.cond(t.returning, rx.hstack(
                rx.el.select(rx.foreach(S.try_targets, lambda g: rx.el.option(
                    g.label, value=g.step)), value=S.try_target, on_change=S.set_try_target,
                    id="try-return-target", class_name="rt-reset try-select",
                    custom_attrs={"aria-label": _("Return to")}),
                rx.button(_("Return it"), size="1", color_scheme="amber",
                          on_click=S.try_return, id="try-return-it"),
                spacing="2", align="center", width="100%")),
            spacing="2", width="100%")),
        rx.cond(t.answer, rx.form(rx.vstack(
            rx.input(name="status", placeholder=_("HTTP status (200)"), size="1",
                     aria_label=_("HTTP status (200)"), id="try-status", width="100%"),
            rx.text_area(name="body", placeholder=_("The answer's body (JSON)"), rows="3",
                         aria_label=_("The answer's body (JSON)"), id="try-body",
                         font_family="monospace", width="100%"),
            rx.button(_("Give this answer"), size="1", type="submit", id="try-answer"),
            spacing="2", width="100%"), on_submit=S.try_answer, reset_on_submit=False,
            width="100%")),
        rx.cond(t.fire, rx.button(rx.icon("timer", size=12), _("Fire the timer now"),
                                  size="1", on_click=S.try_fire, id="try-fire")),
        spacing="2", width="100%"), color_scheme="green", size="1", width="100%",
        id="try-moves"))


def _try_card() -> rx.Component:
    """While the draft is tried: the run's status and the path taken."""
    return rx.cond(S.trying, rx.card(rx.vstack(
        rx.hstack(rx.heading(_("Trying the draft"), size="3", as_="h2"),
                  rx.badge(rx.match(S.trial_status,
                                    *[(k, _(v)) for k, v in STATUS_WORDS.items()],
                                    S.trial_status), id="try-status-badge"),
                  spacing="2", align="center"),
        rx.text(_("Select a circle to fill its form, decide it, answer it or fire its "
                  "timer. Nothing is sent anywhere; the run is deleted after a day."),
                size="1", color_scheme="gray"),
        rx.text(_("Path taken"), size="2", weight="medium"),
        rx.el.ol(rx.foreach(S.trial_path, lambda m: rx.el.li(m, custom_attrs=NO)),
                 padding_left="20px", margin="0", id="try-path"),
        spacing="2", width="100%"), width="100%", id="design-trying"))


def _arrow_panel() -> rx.Component:
    return rx.vstack(
        rx.heading(_("Arrow"), size="3", as_="h2"),
        rx.text(_("An OR-arrow is satisfied when any one of its sources succeeds."), size="1",
                color_scheme="gray"),
        rx.select(DesignNames.uris, placeholder=_("Join into an OR-arrow with…"),
                  on_change=S.join,
                  size="1", value="", id="arrow-join",
                  custom_attrs={"aria-label": _("Join into an OR-arrow with…")}),
        spacing="2", width="100%", id="arrow-panel")


def _problem(p: rx.Var[Problem]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.button(rx.code(rx.cond(p.pointer != "", p.pointer, "/")), size="1",
                                variant="ghost", on_click=S.select_problem(p.pointer))),
        rx.table.cell(rx.badge(p.code, color_scheme=rx.cond(p.warning, "amber", "red"),
                               custom_attrs=NO)),
        rx.table.cell(p.message), class_name="design-problem",
        custom_attrs={"data-element": p.element})


def _problems() -> rx.Component:
    return rx.vstack(
        rx.heading(_("Problems"), size="3", as_="h2"),
        rx.cond(S.problems.length() > 0,
                rx.box(rx.table.root(
                    rx.table.header(rx.table.row(rx.table.column_header_cell(_("Path")),
                                                 rx.table.column_header_cell(_("Code")),
                                                 rx.table.column_header_cell(_("Problem")))),
                    rx.table.body(rx.foreach(S.problems, _problem)), size="1",
                    variant="surface", width="100%"), overflow_x="auto", width="100%"),
                rx.text(_("The analysis finds no problem."), size="2", color_scheme="gray")),
        spacing="2", width="100%", id="design-problems")


def _listed(title: rx.Var, items: rx.Var[list[str]], id_: str) -> rx.Component:
    return rx.cond(items.length() > 0, rx.vstack(
        rx.text(title, size="2", weight="medium"),
        rx.el.ul(rx.foreach(items, lambda i: rx.el.li(rx.code(i), custom_attrs=NO)),
                 padding_left="20px", margin="0"),
        spacing="1", width="100%", id=id_))


def _publish_dialog() -> rx.Component:
    c = S.changes
    nothing = (c.added.length() + c.removed.length() + c.changed.length()
               + c.template.length() + c.moved.length()) == 0
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title(_("Publish %(name)s?", name=S.template_fields["name"])),
        rx.alert_dialog.description(rx.cond(
            c.new, _("It becomes the first version of a new template."),
            rx.cond(nothing, _("Nothing differs from the latest version."),
                    _("Against the latest version:"))), size="2"),
        rx.vstack(_listed(_("Circles added"), c.added, "changes-added"),
                  _listed(_("Circles removed"), c.removed, "changes-removed"),
                  _listed(_("Circles changed"), c.changed, "changes-changed"),
                  _listed(_("Template fields changed"), c.template, "changes-template"),
                  _listed(_("Circles moved"), c.moved, "changes-moved"),
                  spacing="2", width="100%", padding_y="8px"),
        rx.flex(rx.alert_dialog.cancel(rx.button(_("Cancel"), variant="soft", color_scheme="gray",
                                                 on_click=S.cancel)),
                rx.button(_("Publish"), on_click=S.publish, id="confirm-publish"),
                spacing="3", justify="end")),
        open=S.asked, on_open_change=S.show_review)


CHAIN_KINDS = {"field": N_("the user chosen in the form's field"), "users": N_("users"),
               "roles": N_("anyone of the roles")}
QUORUM_WORDS = {"all": N_("all must approve"), "any": N_("any one is enough"),
                "sequence": N_("each in turn")}


def _chain_step(c: rx.Var[ChainStep]) -> rx.Component:
    at = c.index.to_string()
    return rx.hstack(
        rx.text(c.index + 1, size="2", weight="medium"),
        rx.select.root(rx.select.trigger(aria_label=_("Who approves")),
                       rx.select.content(*[rx.select.item(_(v), value=k)
                                           for k, v in CHAIN_KINDS.items()]),
                       value=c.kind, on_change=lambda v: S.set_step(c.index, "kind", v),
                       size="1"),
        rx.input(value=c.who, on_change=lambda v: S.set_step(c.index, "who", v),
                 debounce_timeout=DEBOUNCE_MS, size="1", id="chain-who-" + at,
                 placeholder=_("names, separated by commas"),
                 aria_label=_("Users, roles or the field")),
        rx.select.root(rx.select.trigger(aria_label=_("Quorum")),
                       rx.select.content(*[rx.select.item(_(v), value=k)
                                           for k, v in QUORUM_WORDS.items()]),
                       value=c.quorum, on_change=lambda v: S.set_step(c.index, "quorum", v),
                       size="1", disabled=c.kind == "roles"),
        rx.icon_button(rx.icon("x", size=12), size="1", variant="soft", color_scheme="red",
                       on_click=S.remove_step(c.index), aria_label=_("Remove the step")),
        spacing="2", align="center", wrap="wrap", class_name="chain-step")


def _chain_dialog() -> rx.Component:
    return rx.dialog.root(rx.dialog.content(
        rx.dialog.title(_("Approval chain")),
        rx.dialog.description(_("A request form, then the approvers in order. The flow it "
                                "makes replaces the canvas's (undo takes it back); refine "
                                "it there."), size="2"),
        rx.vstack(rx.foreach(S.chain, _chain_step),
                  rx.button(rx.icon("plus", size=12), _("Add a step"), size="1",
                            variant="soft", on_click=S.add_step, id="chain-add"),
                  rx.cond(S.chain_error != "", rx.callout(S.chain_error, icon="circle-x",
                                                          color_scheme="red", role="alert",
                                                          size="1", width="100%")),
                  spacing="2", width="100%", padding_y="8px"),
        rx.flex(rx.button(_("Cancel"), variant="soft", color_scheme="gray",
                          on_click=S.close_chain),
                rx.button(_("Make the flow"), on_click=S.make_chain, id="chain-make"),
                spacing="3", justify="end")),
        open=S.chain_open, on_open_change=S.show_chain)


def _designer() -> rx.Component:
    canvas = design_canvas(picture=S.graph, keys=canvas_keys(),
                           words=canvas_words(), label=_("Canvas of the flow"),
                           on_edit=S.edit, id="design-canvas")
    side = rx.cond(S.panel.uri != "", _circle_panel(),
                   rx.cond(S.arrow_selected, _arrow_panel(), _template_panel()))
    return rx.vstack(
        _toolbar(),
        _try_card(),
        rx.grid(rx.card(_palette()), canvas, rx.card(_json_view()),
                grid_template_columns=[ONE, ONE, "150px minmax(0,3fr) minmax(0,2fr)"],
                spacing="3", width="100%", align_items="start"),
        rx.grid(rx.card(side, id="design-properties"), rx.card(_problems()),
                grid_template_columns=[ONE, ONE, "minmax(0,2fr) minmax(0,3fr)"],
                spacing="3", width="100%", align_items="start"),
        _publish_dialog(), _chain_dialog(), people_lists(), panel_keys(),
        spacing="3", width="100%")


def design_page() -> rx.Component:
    return rx.vstack(
        page_header(_("Design a flow"),
                    _("Draw circles and arrows; the analysis checks every change.")),
        rx.cond(S.allowed,
                rx.cond(S.loading, rx.center(rx.spinner(size="3"), padding="32px"),
                        _designer()),
                rx.cond(S.loading, rx.center(rx.spinner(size="3"), padding="32px"),
                        empty_state("lock", _("Administrators and designers only"),
                                    _("Ask an administrator for the designer role.")))),
        spacing="3", width="100%", max_width="1600px")
