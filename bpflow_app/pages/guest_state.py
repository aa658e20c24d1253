"""State of the guest page: which tenant's administrators it writes to (its path), and
sending a message without an account, limited per client (the page says how long to
wait)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import reflex as rx

from bpflow.access import DEFAULT_TENANT
from bpflow.backend import get_store
from bpflow.errors import RateLimited
from bpflow.forms import FormError
from bpflow.mailbox import GUEST_LIMITS, Mailbox
from bpflow.store.public import valid_tenant
from bpflow_app.catalogs import N_
from bpflow_app.i18n import LangState

LABELS = {"name": N_("Your name"), "subject": N_("Subject"), "body": N_("Message")}
# One toast for the form's outcome: "Message sent" replaces a "Please check the form".
TOAST = "guest-form"


def friendly(state: LangState, errors: dict[str, str], data: dict[str, str]
             ) -> dict[str, str]:
    """What the mailbox refused, in the page's language, naming the fields as the form
    labels them: a field missing, or over its limit (and by how much)."""
    out = {}
    for k, m in errors.items():
        label = state.gettext(LABELS.get(k, k))
        size = len(data.get(k, ""))
        if k in GUEST_LIMITS and size > GUEST_LIMITS[k]:
            out[k] = state.gettext(
                "%(field)s must be at most %(most)s characters (yours has %(size)s); "
                "nothing was sent", field=label, most=GUEST_LIMITS[k], size=format(size, ","))
        elif not data.get(k, "").strip():
            out[k] = state.gettext("%(field)s is required", field=label)
        else:
            out[k] = m
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


class GuestState(LangState):
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
            return rx.toast.error(self.gettext("There is no such organisation"), id=TOAST)
        try:
            Mailbox(get_store().of(tenant)).guest_message(data["name"], data["subject"],
                                                          data["body"], client)
        except FormError as exc:
            self.errors = friendly(self, exc.errors, data)
            return rx.toast.error(self.gettext("Please check the form"), id=TOAST)
        except RateLimited as exc:
            self.limited = self.ngettext(
                "You have sent several messages in a short time. Please try again in "
                "%(n)s second.",
                "You have sent several messages in a short time. Please try again in "
                "%(n)s seconds.", exc.retry_after)
            return None
        self.sent = True
        return rx.toast.success(self.gettext("Message sent"), id=TOAST)

    @rx.event
    def again(self):
        self.sent = False
