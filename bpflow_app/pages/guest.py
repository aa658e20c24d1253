"""The guest page (`/guest`): anyone leaves a message for the administrators, without an
account. Messages are limited per client; the page says how long to wait.

`/guest` writes to the administrators of the tenant `default`, `/guest/{tenant}` to those
of that tenant (SPEC §12); an unknown tenant's page says so and has no form."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import reflex as rx

from bpflow.backend import get_store
from bpflow.errors import RateLimited
from bpflow.forms import FormError
from bpflow.mailbox import GUEST_LIMITS, Mailbox
from bpflow.store.public import DEFAULT_TENANT, valid_tenant
from bpflow_app.components.frame import public_frame

LABELS = {"name": "Your name", "subject": "Subject", "body": "Message"}
# One toast for the form's outcome: "Message sent" replaces a "Please check the form".
TOAST = "guest-form"
# The message's length as it is typed (characters, as the server counts them), in the
# counter under it: nothing is cut, a message over the limit is refused when sent.
COUNT = rx.Var(
    "((e) => { const out = document.getElementById('guest-body-count'); if (!out) return;"
    " const n = [...e.target.value].length; out.dataset.over = String(n > "
    f"{GUEST_LIMITS['body']}); out.textContent = n.toLocaleString('en') + ' of "
    f"{GUEST_LIMITS['body']:,} characters'; }})")


def friendly(errors: dict[str, str], data: dict[str, str] | None = None) -> dict[str, str]:
    """The mailbox's messages, naming the fields as the form labels them, and how long a
    field over its limit is."""
    out = {}
    for k, m in errors.items():
        text = LABELS[k] + m[len(k):] if k in LABELS and m.startswith(k) else m
        size = len((data or {}).get(k, ""))
        if k in GUEST_LIMITS and size > GUEST_LIMITS[k]:
            text += f" (yours has {size:,}); nothing was sent"
        out[k] = text
    return out


def page_tenant(path: str) -> str:
    """The tenant a guest page writes to: `default` for `/guest`, the last segment of
    `/guest/{tenant}` (behind any frontend path), as given."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[-2] == "guest":
        return unquote(parts[-1])[:100]
    return DEFAULT_TENANT


def known_tenant(name: str) -> str | None:
    """The tenant of that name as stored, or None when there is none."""
    try:
        name = valid_tenant(name)
    except ValueError:
        return None
    return name if get_store().has_tenant(name) else None


class GuestState(rx.State):
    errors: dict[str, str] = {}
    limited: str = ""
    sent: bool = False
    busy: bool = False
    org: str = DEFAULT_TENANT  # the tenant whose administrators the page writes to
    unknown: bool = False  # the page's tenant does not exist

    @rx.event
    def load(self):
        """Which tenant the page is for (its path), the form afresh."""
        name = page_tenant(self.router.url.path)
        found = known_tenant(name)
        self.org, self.unknown = found or name, found is None
        self.sent, self.errors, self.limited = False, {}, ""

    @rx.event
    def send(self, form_data: dict[str, Any]):
        self.busy, self.errors, self.limited = True, {}, ""
        yield
        try:
            yield self._send(form_data)
        finally:
            self.busy = False

    def _send(self, form_data: dict[str, Any]):
        data = {k: str(form_data.get(k) or "") for k in ("name", "subject", "body")}
        client = self.router.session.client_ip or self.router.session.client_token
        tenant = known_tenant(self.org)
        if tenant is None:
            self.unknown = True
            return rx.toast.error("There is no such organisation", id=TOAST)
        try:
            Mailbox(get_store().of(tenant)).guest_message(data["name"], data["subject"],
                                                          data["body"], client)
        except FormError as exc:
            self.errors = friendly(exc.errors, data)
            return rx.toast.error("Please check the form", id=TOAST)
        except RateLimited as exc:
            self.limited = (f"You have sent several messages in a short time. Please try "
                            f"again in {exc.retry_after} seconds.")
            return None
        self.sent = True
        return rx.toast.success("Message sent", id=TOAST)

    @rx.event
    def again(self):
        self.sent = False


def _field(name: str, label: str, control: rx.Component, *notes: rx.Component
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
    most = f"{GUEST_LIMITS['body']:,}"
    return rx.form(
        rx.vstack(
            _field("name", "Your name", rx.input(name="name", id="guest-name", width="100%")),
            _field("subject", "Subject", rx.input(name="subject", id="guest-subject",
                                                  width="100%")),
            _field("body", "Message", rx.text_area(
                name="body", id="guest-body", rows="6", width="100%",
                custom_attrs={"onInput": COUNT, "aria-describedby": "guest-body-count"}),
                rx.text(f"0 of {most} characters", id="guest-body-count", size="1",
                        color_scheme="gray", style={"&[data-over='true']": {
                            "color": "var(--red-11)", "fontWeight": "600"}})),
            rx.cond(GuestState.limited != "",
                    rx.callout(GuestState.limited, icon="timer", color_scheme="amber",
                               role="alert", width="100%", id="rate-limited")),
            rx.button("Send message", type="submit", loading=GuestState.busy, size="3"),
            spacing="4", width="100%", align="start",
        ),
        on_submit=GuestState.send, reset_on_submit=False, aria_label="Message form",
    )


def _done() -> rx.Component:
    return rx.vstack(
        rx.callout("Thank you — your message was delivered to the administrators.",
                   icon="circle-check", color_scheme="green", width="100%", id="guest-sent"),
        rx.button("Send another message", variant="soft", on_click=GuestState.again),
        spacing="3", width="100%",
    )


def _unknown() -> rx.Component:
    return rx.callout(
        rx.text("There is no organisation named \u201c", GuestState.org,
                "\u201d here. Check the address you were given."),
        icon="circle-alert", color_scheme="amber", width="100%", id="guest-unknown",
        role="alert")


def guest_page() -> rx.Component:
    """`/guest` and `/guest/[tenant]` (the same page; its load says which tenant)."""
    return public_frame(
        rx.vstack(
            rx.heading("Leave a message", size="7", as_="h1"),
            rx.cond(GuestState.org != DEFAULT_TENANT,
                    rx.text("To the administrators of ", rx.text.strong(GuestState.org),
                            id="guest-tenant")),
            rx.text("No account needed. The administrators read these in their inbox.",
                    color_scheme="gray"),
            rx.cond(GuestState.unknown, _unknown(),
                    rx.card(rx.cond(GuestState.sent, _done(), _form()), width="100%",
                            size="3")),
            spacing="4", width="100%",
        ),
    )
