"""The substitute page (`/substitute`, "My substitute" in the user menu; an admin's for
someone from the users page, `?user=NAME`): who stands in while one is away, from when
until when, for which templates, whether it is active now; set it or clear it. Its state
is `substitute_state.py`; times are shown with `components/when.py` and entered in the
browser's own time zone."""

from __future__ import annotations

import reflex as rx

from bpflow_app.components.names import NO, data
from bpflow_app.components.ui import page_header, section
from bpflow_app.components.when import when
from bpflow_app.i18n import _, rich
from bpflow_app.pages.substitute_state import SubstituteState as S
from engine.messages import N_

# the browser's offset from UTC in minutes (`Date.getTimezoneOffset`), sent with the form
BROWSER_OFFSET = rx.Var("String(new Date().getTimezoneOffset())", _var_type=str)


def _error(name: str, control_id: str) -> rx.Component:
    return rx.cond(S.errors.contains(name),
                   rx.text(S.errors[name], color_scheme="red", size="1", role="alert",
                           id=f"{control_id}-error"))


def _labelled(label: rx.Var, control_id: str, control: rx.Component,
              name: str = "", hint: rx.Component | None = None) -> rx.Component:
    return rx.vstack(
        rx.el.label(rx.text(label, size="2", weight="medium"), html_for=control_id),
        control, hint or rx.fragment(), _error(name, control_id) if name else rx.fragment(),
        spacing="1", width="100%")


def _status() -> rx.Component:
    badge = rx.match(
        S.status,
        ("active", rx.badge(_("Active now"), color_scheme="green", id="substitute-status")),
        ("upcoming", rx.badge(_("Not active yet"), color_scheme="amber",
                              id="substitute-status")),
        ("ended", rx.badge(_("Ended"), color_scheme="gray", id="substitute-status")),
        rx.fragment())
    return rx.cond(
        S.status == "none",
        rx.text(rx.cond(S.mine, _("You have no substitute."),
                        _("%(name)s has no substitute.", name=S.whose)),
                id="substitute-none"),
        rx.vstack(
            rx.hstack(
                rx.text(rich(N_("%(name)s stands in from %(from)s until %(until)s"),
                             name=lambda: rx.text.strong(data(S.to)),
                             **{"from": lambda: when(S.starts),
                                "until": lambda: when(S.until)}),
                        id="substitute-current"),
                badge, spacing="2", align="center", wrap="wrap"),
            rx.cond(S.templates.length() > 0,
                    rx.text(rich(N_("For the templates %(names)s"),
                                 names=lambda: data(S.templates.join(", "))), size="2"),
                    rx.text(_("For every template"), size="2")),
            rx.text(rich(N_("Set by %(name)s"), name=lambda: data(S.set_by)), size="1",
                    color_scheme="gray"),
            rx.button(_("Clear the substitute"), on_click=S.clear, variant="soft",
                      color_scheme="red", id="clear-substitute"),
            spacing="2", align="start"))


def _form() -> rx.Component:
    return rx.form(
        rx.vstack(
            # the people (data) are in the picker and in the form's own hidden <select>
            _labelled(_("Substitute"), "substitute-to", rx.box(rx.select.root(
                rx.select.trigger(placeholder=_("Choose…"), id="substitute-to", width="100%"),
                rx.select.content(rx.foreach(S.people, lambda n: rx.select.item(
                    n, value=n, custom_attrs=NO))),
                name="to"), width="100%", custom_attrs=NO), "to"),
            _labelled(_("From"), "substitute-from",
                      rx.input(type="datetime-local", name="from", id="substitute-from",
                               width="100%"), "from"),
            _labelled(_("Until"), "substitute-until",
                      rx.input(type="datetime-local", name="until", id="substitute-until",
                               width="100%"), "until"),
            _labelled(_("Templates (optional)"), "substitute-templates",
                      rx.input(name="templates", id="substitute-templates", width="100%",
                               custom_attrs=NO),
                      hint=rx.text(_("Names separated by commas; empty for every template."),
                                   size="1", color_scheme="gray")),
            rx.el.input(type="hidden", name="tz", value=BROWSER_OFFSET),
            rx.text(_("While it is active, the work addressed to you by name is also offered "
                      "to your substitute, who decides your approvals for you."),
                    size="1", color_scheme="gray"),
            rx.button(_("Save the substitute"), type="submit", loading=S.busy,
                      id="save-substitute"),
            spacing="3", width="100%", align="start", max_width="420px"),
        on_submit=S.save, reset_on_submit=False, aria_label=_("Set a substitute"))


def substitute_page() -> rx.Component:
    return rx.vstack(
        page_header(rx.cond(S.mine, _("My substitute"),
                            _("Substitute of %(name)s", name=S.whose))),
        rx.grid(section(_("Now"), _status()),
                section(_("Set a substitute"), _form()),
                spacing="4", width="100%", align_items="start",
                grid_template_columns=["minmax(0,1fr)", "minmax(0,1fr)",
                                       "minmax(0,2fr) minmax(0,3fr)"]),
        spacing="3", width="100%")
