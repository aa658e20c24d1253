"""The designer's properties panel, its parts for a circle's people and timing (SPEC
§16): pickers of the tenant's users and roles, the suggestions under a field that takes
`${...}` names or an expression, the inputs of retry, timeout, due and remind, and the
panel's keys (Alt+Up/Down on a form field, the arrows between suggestions). What they
show and do is `DesignState`'s (`extra`, `pick`, `complete`, `set_timing`)."""

from __future__ import annotations

import reflex as rx

from bpflow_app.catalogs import N_
from bpflow_app.components.names import NO, by, named
from bpflow_app.designhints import Pick
from bpflow_app.i18n import _
from bpflow_app.pages.design_state import DesignState as S

ONE = "minmax(0,1fr)"  # a grid of one column (on a phone, a tablet)


def hints(hints: rx.Var, target: str | rx.Var, id_: str | rx.Var) -> rx.Component:
    """The completions of a field: each a button that puts it in (ArrowDown reaches them
    from the field, the arrows move between them, Escape goes back)."""
    return rx.cond(hints.length() > 0, rx.hstack(
        rx.foreach(hints, lambda h: rx.button(
            h, size="1", variant="soft", color_scheme="gray", on_click=S.complete(target, h),
            class_name="design-hint", custom_attrs=NO)),
        spacing="1", wrap="wrap", width="100%", role="group", id="hints-" + id_,
        custom_attrs={"aria-label": _("Suggestions (Enter puts one in)"),
                      "data-hints-for": id_}))


def _note(control: str) -> rx.Component:
    """What a control cannot take, or what the analysis says of it."""
    note = S.extra.notes[control]
    return rx.cond(note != "", rx.text(note, size="1", color_scheme="red", role="alert",
                                       id="note-" + control.replace(".", "-")))


def _chip(target: str, e: rx.Var[Pick]) -> rx.Component:
    at = "unpick-" + target.replace(".", "-") + "-" + e.name
    return rx.badge(
        rx.el.span(e.name, class_name="design-pick-name", custom_attrs=NO),
        named(at + "-name", N_("Remove %(name)s"), name=e.name),
        rx.icon_button(rx.icon("x", size=10), size="1", variant="ghost",
                       on_click=S.unpick(target, e.name), custom_attrs=by(at + "-name")),
        color_scheme=rx.cond(e.known, "gray", "red"), variant="surface",
        class_name="design-pick", custom_attrs={"data-known": e.known.to_string()})


def picker(target: str, entries: rx.Var, label: str, users: bool) -> rx.Component:
    """The names a circle gives in one of its fields, each removable, and a search among
    the tenant's users (or roles) to add one; a name that is not one is refused."""
    at = "pick-" + target.replace(".", "-")
    return rx.vstack(
        rx.el.label(rx.text(_(label), size="1", weight="medium"), html_for=at),
        rx.cond(entries.length() > 0, rx.hstack(rx.foreach(entries, lambda e: _chip(target, e)),
                                                spacing="1", wrap="wrap")),
        rx.form(rx.hstack(
            rx.input(name="name", id=at, size="1", width="100%",
                     placeholder=_("Type a username or ${field}, Enter adds it") if users
                     else _("Type a role, Enter adds it"),
                     custom_attrs={"list": "people-users" if users else "people-roles",
                                   "autoComplete": "off"}),
            rx.button(_("Add name"), size="1", variant="soft", type="submit"),
            spacing="1", width="100%"), on_submit=lambda data: S.pick(target, data),
            reset_on_submit=True, width="100%", class_name="design-picker",
            custom_attrs={"data-target": target}),
        _note(target), spacing="1", width="100%")


def people() -> rx.Component:
    x = S.extra
    return rx.vstack(
        rx.heading(_("People"), size="2", as_="h3"),
        picker("assign.users", x.assign_users, N_("Who may act on it: users"), users=True),
        picker("assign.roles", x.assign_roles, N_("Who may act on it: roles"), users=False),
        _note("assign"),
        picker("cc.users", x.cc_users, N_("Copy to: users"), users=True),
        picker("cc.roles", x.cc_roles, N_("Copy to: roles"), users=False),
        _choice(N_("Copy when"), "cc_on", x.timing.cc_on, CC_WORDS),
        _note("cc"),
        spacing="2", width="100%", id="circle-people")


def _seconds(label: str, key: str, value: rx.Var, debounce_ms: int) -> rx.Component:
    at = "timing-" + key.replace("_", "-")
    return rx.vstack(
        rx.el.label(rx.text(_(label), size="1", weight="medium"), html_for=at),
        rx.input(value=value, on_change=lambda v: S.set_timing(key, v),
                 debounce_timeout=debounce_ms, id=at, size="1", width="100%",
                 custom_attrs={"inputMode": "decimal"}),
        spacing="1", width="100%")


def _choice(label: str, key: str, value: rx.Var, words: dict[str, str]) -> rx.Component:
    return rx.vstack(
        rx.text(_(label), size="1", weight="medium"),
        rx.select.root(rx.select.trigger(aria_label=_(label),
                                         id="timing-" + key.replace("_", "-")),
                       rx.select.content(*[rx.select.item(_(w), value=k)
                                           for k, w in words.items()]),
                       value=value, on_change=lambda v: S.set_timing(key, v), size="1"),
        spacing="1", width="100%")


LOGIC_WORDS = {"fixed": N_("the same wait each time"),
               "exponential": N_("the wait doubles each time")}
POLICY_WORDS = {"fail": N_("the circle fails"), "retry": N_("it is tried again"),
                "terminate": N_("the flow is ended"),
                "escalate": N_("it goes to other people (escalate)")}
CC_WORDS = {"done": N_("when it is done"), "ready": N_("when it becomes ready")}


def timing(debounce_ms: int) -> rx.Component:
    """Retries, timeout, due and remind: each typed value sent `debounce_ms` after the
    last key."""
    t = S.extra.timing

    def secs(label: str, key: str, value: rx.Var) -> rx.Component:
        return _seconds(label, key, value, debounce_ms)
    return rx.vstack(
        rx.heading(_("Time limits and retries"), size="2", as_="h3"),
        rx.grid(secs(N_("Retries (how many)"), "retry_count", t.retry_count),
                secs(N_("Wait before a retry (seconds)"), "retry_delay", t.retry_delay),
                _choice(N_("Waits"), "retry_logic", t.retry_logic, LOGIC_WORDS),
                grid_template_columns=[ONE, ONE, "repeat(3, minmax(0,1fr))"], spacing="2",
                width="100%"),
        rx.cond(t.retry_waits != "", rx.text(
            _("Waits now: %(waits)s seconds (changing a value above replaces them)",
              waits=t.retry_waits), size="1", color_scheme="gray")),
        _note("retry"),
        rx.grid(secs(N_("Timeout (seconds)"), "timeout_seconds", t.timeout_seconds),
                _choice(N_("Then"), "timeout_policy", t.timeout_policy, POLICY_WORDS),
                grid_template_columns=[ONE, ONE, "repeat(2, minmax(0,1fr))"], spacing="2",
                width="100%"),
        rx.cond(t.timeout_policy == "escalate", rx.vstack(
            picker("escalate.users", S.extra.escalate_users, N_("Escalate to: users"),
                   users=True),
            picker("escalate.roles", S.extra.escalate_roles, N_("Escalate to: roles"),
                   users=False), spacing="2", width="100%")),
        _note("timeout"),
        secs(N_("Due (seconds after it is ready)"), "due", t.due), _note("due"),
        rx.grid(secs(N_("Remind before due (seconds)"), "before_due", t.before_due),
                secs(N_("Remind every (seconds)"), "every", t.every),
                grid_template_columns=[ONE, ONE, "repeat(2, minmax(0,1fr))"], spacing="2",
                width="100%"),
        _note("remind"),
        spacing="2", width="100%", id="circle-timing")


def people_lists() -> rx.Component:
    """What the pickers search: the tenant's users and roles (the browser's own list
    under a field, by keyboard too)."""
    return rx.fragment(
        rx.el.datalist(rx.foreach(S.people_users, lambda n: rx.el.option(value=n)),
                       id="people-users"),
        rx.el.datalist(rx.foreach(S.people_roles, lambda n: rx.el.option(value=n)),
                       id="people-roles"))


# the panel's keys: Alt+Up/Down moves the form field being edited (its button, so the
# server moves it) and the focus follows it; ArrowDown goes from a field to its
# suggestions, the arrows between them, Escape back to the field, as does putting one in
PANEL_KEYS = r"""
(function () {
  if (window.bpflowPanelKeys) return;
  window.bpflowPanelKeys = true;
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (!(t instanceof HTMLElement)) return;
    var up = e.key === "ArrowUp", down = e.key === "ArrowDown";
    if (e.altKey && (up || down)) {
      var row = t.closest(".form-field-row");
      var button = row && row.querySelector('[data-move="' + (up ? "up" : "down") + '"]');
      if (!button || button.disabled) return;
      e.preventDefault();
      var to = Number(row.dataset.index) + (up ? -1 : 1);
      button.click();
      var next = t.id && document.getElementById(t.id.replace(/-\d+$/, "-" + to));
      if (next) next.focus();
      return;
    }
    var list = t.dataset.hints && document.getElementById(t.dataset.hints);
    if (list && down && !e.altKey) {
      var first = list.querySelector("button");
      if (first) { e.preventDefault(); first.focus(); }
      return;
    }
    var group = t.closest("[data-hints-for]");
    if (!group || !(up || down || e.key === "Escape")) return;
    var items = Array.prototype.slice.call(group.querySelectorAll("button"));
    var i = items.indexOf(t);
    e.preventDefault();
    var go = e.key === "Escape" || (up && i === 0) ? document.getElementById(group.dataset.hintsFor)
      : items[i + (down ? 1 : -1)];
    if (go) go.focus();
  });
  document.addEventListener("click", function (e) {  // a suggestion put in: back to its field
    var group = e.target instanceof Element && e.target.closest("[data-hints-for]");
    var field = group && document.getElementById(group.dataset.hintsFor);
    if (field) field.focus();
  });
})();
"""


def panel_keys() -> rx.Component:
    """The panel's keys (once on the designer's page)."""
    return rx.script(PANEL_KEYS)
