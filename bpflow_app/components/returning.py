""""Return to…" on an approval card (SPEC §15): the button, the dialog choosing the
earlier step by its description with a comment and a confirmation (`ReturnState`), and
the note a step sent back shows its people (why, and by whom)."""

from __future__ import annotations

import reflex as rx

from bpflow_app.catalogs import N_
from bpflow_app.components.names import by, data, named
from bpflow_app.i18n import _, rich
from bpflow_app.pages.return_state import ReturnState

R = ReturnState


def return_button(iid: rx.Var, uri: rx.Var, mail: rx.Var, title: rx.Var) -> rx.Component:
    """Open "Return to…" for the work waiting at `uri` (`mail`: the viewer's open
    approval mail of it, 0 for none)."""
    name = "return-name-" + iid + "-" + uri.replace(".", "-")  # (an id has no spaces)
    return rx.fragment(
        named(name, N_("Return to an earlier step: %(step)s"), step=title),
        rx.button(rx.icon("corner-up-left", size=14), _("Return to…"), size="2",
                  variant="soft", color_scheme="orange", class_name="return-to",
                  on_click=R.ask_return(iid, uri, mail, title),
                  loading=R.return_busy & (R.returning == iid + " " + uri),
                  custom_attrs=by(name)))


def returned_note(note: rx.Var[str]) -> rx.Component:
    """Why a step came back to its people, shown where they act."""
    return rx.cond(note != "", rx.callout(note, icon="corner-up-left", color_scheme="orange",
                                          width="100%", class_name="returned-note",
                                          role="note"))


def return_dialog() -> rx.Component:
    return rx.alert_dialog.root(rx.alert_dialog.content(
        rx.alert_dialog.title(_("Return to an earlier step")),
        rx.alert_dialog.description(
            rich(N_("%(step)s goes back to the step you choose; everything after it is "
                    "done again. Its people see your comment and find their answers "
                    "filled in."), step=lambda: data(R.return_title)),
            size="2"),
        rx.form(
            rx.vstack(
                rx.el.label(rx.text(_("Return to"), size="2", weight="medium"),
                            html_for="return-target"),
                rx.el.select(rx.foreach(R.targets, lambda t: rx.el.option(
                    t.label, value=t.step)), value=R.target, on_change=R.set_target,
                    id="return-target", name="target", class_name="return-target",
                    style={"width": "100%", "padding": "6px"}),
                rx.el.label(rx.text(_("What to amend"), size="2", weight="medium"),
                            html_for="return-comment"),
                rx.text_area(id="return-comment", name="comment", rows="3", width="100%",
                             on_change=R.set_return_comment, max_length=2000,
                             placeholder=_("Say what to amend (needed)"),
                             custom_attrs={"aria-describedby": "return-error"}),
                rx.cond(R.return_error != "", rx.text(R.return_error, id="return-error",
                                                      color_scheme="red", size="2",
                                                      role="alert")),
                rx.flex(
                    rx.alert_dialog.cancel(rx.button(
                        _("Cancel"), type="button", variant="soft", color_scheme="gray",
                        on_click=R.cancel_return)),
                    rx.button(_("Return it"), type="submit", loading=R.return_busy,
                              id="confirm-return"),
                    spacing="3", justify="end", width="100%"),
                spacing="2", width="100%", margin_top="12px"),
            on_submit=R.confirm_return, reset_on_submit=False),
    ), open=R.returning != "", on_open_change=lambda _open: R.cancel_return)
