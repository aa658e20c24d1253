"""The guest page (`/guest`): anyone leaves a message for the administrators, without an
account. Messages are limited per client; the page says how long to wait.

`/guest` writes to the administrators of the tenant `default`, `/guest/{tenant}` to those
of that tenant (SPEC §12); an unknown tenant's page says so and has no form."""

from __future__ import annotations

import reflex as rx
from reflex.vars.base import VarData

from bpflow.access import DEFAULT_TENANT
from bpflow.mailbox import GUEST_LIMITS
from bpflow_app.catalogs import N_
from bpflow_app.components.frame import public_frame
from bpflow_app.i18n import _, rich
from bpflow_app.pages.guest_state import GuestState

MOST = f"{GUEST_LIMITS['body']:,}"
# What the message's length as it is typed is told with (characters, as the server counts
# them), under it: nothing is cut, a message over the limit is refused when sent.
COUNTED = "%(count)s"


def _counter_text() -> rx.Var:
    return _("%(count)s of %(most)s characters", count=COUNTED, most=MOST)


def _count_js() -> str:
    """The counter's text for the message box's text: a JS function of the box."""
    return ("((box) => { const out = document.getElementById('guest-body-count');"
            " if (!out || !box) return; const n = [...box.value].length;"
            f" out.dataset.over = String(n > {GUEST_LIMITS['body']});"
            f" out.textContent = ({_counter_text()!s}).replace({COUNTED!r},"
            " globalThis.__bpflowFormat?.number('en', n) ?? String(n)); })")


class _Recount(rx.Fragment):
    """Counts the message again when the page's language changes (React has just written
    the counter's text for an empty box)."""

    def add_hooks(self) -> list[str | rx.Var]:
        text = _counter_text()
        return [rx.Var(
            f"useEffect(() => {{ {_count_js()}(document.getElementById('guest-body')); }},"
            f" [{text!s}])",
            _var_data=VarData.merge(text._get_all_var_data(),
                                    VarData(imports={"react": ["useEffect"]})))]


def _field(name: str, label: rx.Var, control: rx.Component, *notes: rx.Component
           ) -> rx.Component:
    """A field of the form. No `maxlength`: a browser would cut a longer text without a
    word; the limit is said instead, and the server refuses what is over it."""
    return rx.vstack(
        rx.el.label(rx.text(label, " *", size="2", weight="medium"), html_for=f"guest-{name}"),
        control,
        *notes,
        rx.cond(GuestState.errors.contains(name),
                rx.text(GuestState.errors[name], color_scheme="red", size="1", role="alert")),
        spacing="1", width="100%",
    )


def _form() -> rx.Component:
    count = rx.Var(f"((e) => {_count_js()}(e.target))",
                   _var_data=VarData.merge(_counter_text()._get_all_var_data()))
    return rx.form(
        _Recount.create(),
        rx.vstack(
            _field("name", _("Your name"), rx.input(name="name", id="guest-name",
                                                    width="100%")),
            _field("subject", _("Subject"), rx.input(name="subject", id="guest-subject",
                                                     width="100%")),
            _field("body", _("Message"), rx.text_area(
                name="body", id="guest-body", rows="6", width="100%",
                custom_attrs={"onInput": count, "aria-describedby": "guest-body-count"}),
                rx.text(_("%(count)s of %(most)s characters", count="0", most=MOST),
                        id="guest-body-count", size="1", color_scheme="gray",
                        style={"&[data-over='true']": {"color": "var(--red-11)",
                                                       "fontWeight": "600"}})),
            rx.cond(GuestState.limited != "",
                    rx.callout(GuestState.limited, icon="timer", color_scheme="amber",
                               role="alert", width="100%", id="rate-limited")),
            rx.button(_("Send message"), type="submit", loading=GuestState.busy, size="3"),
            spacing="4", width="100%", align="start",
        ),
        on_submit=GuestState.send, reset_on_submit=False, aria_label=_("Message form"),
    )


def _done() -> rx.Component:
    return rx.vstack(
        rx.callout(_("Thank you — your message was delivered to the administrators."),
                   icon="circle-check", color_scheme="green", width="100%", id="guest-sent"),
        rx.button(_("Send another message"), variant="soft", on_click=GuestState.again),
        spacing="3", width="100%",
    )


def _unknown() -> rx.Component:
    return rx.callout(
        rx.text(_("There is no organisation named “%(name)s” here. Check the address you "
                  "were given.", name=GuestState.org)),
        icon="circle-alert", color_scheme="amber", width="100%", id="guest-unknown",
        role="alert")


def guest_page() -> rx.Component:
    """`/guest` and `/guest/[tenant]` (the same page; its load says which tenant)."""
    return public_frame(
        rx.vstack(
            rx.heading(_("Leave a message"), size="7", as_="h1"),
            rx.cond(GuestState.org != DEFAULT_TENANT,
                    rx.text(rich(N_("To the administrators of %(name)s"),
                                 name=lambda: rx.text.strong(GuestState.org)),
                            id="guest-tenant")),
            rx.text(_("No account needed. The administrators read these in their inbox."),
                    color_scheme="gray"),
            rx.cond(GuestState.unknown, _unknown(),
                    rx.card(rx.cond(GuestState.sent, _done(), _form()), width="100%",
                            size="3")),
            spacing="4", width="100%",
        ),
    )
