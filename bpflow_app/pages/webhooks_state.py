"""State of the webhooks page (admins, SPEC §11): the tenant's webhooks (URL, event
types, state and why one was disabled, delivery counts), a form to add one (the secret is
shown only while it is typed: it is never read back), deleting one after a confirmation,
and the chosen webhook's latest deliveries (state, attempts, last status and error)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import reflex as rx

from bpflow import admin
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import BpflowError, NotFound
from bpflow.store.public import TYPES
from bpflow.webhooks import SECRET_LENGTH, WebhookInvalid, add_webhook
from bpflow_app.boxview import iso_text
from bpflow_app.session import SessionState

SHOWN_DELIVERIES = 50
DEFAULT_TYPES = ("instance.completed", "instance.failed")


@dataclass
class HookLine:
    id: int
    url: str
    events: str
    state: str  # active, failing, disabled
    reason: str  # why it was disabled
    created: str  # ISO (components/when.py shows it)
    pending: int
    delivered: int
    failed: int


@dataclass
class DeliveryLine:
    id: int
    event: int
    type: str
    state: str
    attempts: int
    status: str  # the last HTTP status, "" when none came
    error: str
    when: str  # ISO: delivered at, or (pending) next attempt at


def hook_line(h: dict[str, Any]) -> HookLine:
    d = h["deliveries"]
    return HookLine(h["id"], h["url"], ", ".join(h["events"]), h["state"],
                    h["disabled_reason"] or "", iso_text(h["created_at"]), d["pending"],
                    d["delivered"], d["failed"])


def delivery_line(d: dict[str, Any]) -> DeliveryLine:
    when = d["delivered_at"] if d["state"] == "delivered" else d["next_at"]
    return DeliveryLine(d["id"], d["event_id"], d["type"] or "", d["state"], d["attempts"],
                        str(d["status_code"] or ""), d["error"] or "", iso_text(when))


def new_secret() -> str:
    return secrets.token_urlsafe(24)


class WebhooksState(SessionState):
    hooks: list[HookLine] = []
    chosen: int = 0  # whose deliveries are shown (0: none)
    deliveries: list[DeliveryLine] = []
    picked: list[str] = list(DEFAULT_TYPES)  # the event types of the form
    secret: str = ""
    errors: dict[str, str] = {}
    deleting: int = 0  # the webhook whose deletion waits for a confirmation

    def _fetch(self, caller: Caller) -> None:
        store = store_for(caller)
        self.hooks = [hook_line(h) for h in store.webhooks()]
        if self.chosen and self.chosen not in {h.id for h in self.hooks}:
            self.chosen = 0
        self.deliveries = [delivery_line(d) for d in store.deliveries(
            self.chosen, SHOWN_DELIVERIES)] if self.chosen else []

    @rx.event
    def load(self):
        if self._visitor() is None:
            return None
        if not self.secret:
            self.secret = new_secret()
        return self._guarded(self._fetch, admin=True)

    @rx.event
    def refresh(self):
        return self._guarded(self._fetch, admin=True)

    @rx.event
    def toggle(self, kind: str, on: bool):
        if kind in TYPES:
            self.picked = [t for t in TYPES if (t == kind and on) or (
                t != kind and t in self.picked)]

    @rx.event
    def set_secret(self, text: str):
        self.secret = text

    @rx.event
    def another_secret(self):
        self.secret = new_secret()

    @rx.event
    def add(self, form_data: dict[str, Any]):
        url = str(form_data.get("url") or "").strip()
        return self._guarded(lambda caller: self._add(caller, url), admin=True)

    def _problems(self, url: str) -> dict[str, str]:
        """What the form lacks, said in the reader's language (`add_webhook` checks all
        of it again, and asks the egress guard about the URL)."""
        problems = {}
        if not url:
            problems["url"] = self.gettext("Enter the URL the events are POSTed to")
        elif any(c <= " " or c == "\x7f" for c in url):
            problems["url"] = self.gettext("A URL has no spaces or control characters")
        elif not url.lower().startswith(("http://", "https://")):
            problems["url"] = self.gettext("Only http and https URLs can be called")
        if not self.picked:
            problems["events"] = self.gettext("Choose at least one event type")
        if not SECRET_LENGTH[0] <= len(self.secret) <= SECRET_LENGTH[1]:
            problems["secret"] = self.gettext("A secret has %(least)s to %(most)s characters",
                                              least=SECRET_LENGTH[0], most=SECRET_LENGTH[1])
        return problems

    def _add(self, caller: Caller, url: str):
        self.errors = self._problems(url)
        if not self.errors:
            try:
                hook = add_webhook(store_for(caller), url, self.picked, self.secret, caller)
            except WebhookInvalid as exc:  # the egress guard's answer (in English)
                why = str(exc).split(": ", 1)[-1]
                self.errors = {exc.field: self.gettext(
                    "bpflow may not call this URL: %(why)s", why=why)
                    if exc.field == "url" else why}
            except BpflowError as exc:  # the most webhooks a tenant may have
                self.errors = {"url": self.explain(exc)}
                return rx.toast.error(self.explain(exc))
        if self.errors:
            return rx.toast.error(self.gettext("Please check the form"))
        self.secret, self.chosen = new_secret(), hook["id"]
        self._fetch(caller)
        return [rx.toast.success(self.gettext("Added the webhook to %(url)s", url=url)),
                rx.set_value("new-url", "")]

    @rx.event
    def choose(self, webhook_id: int):
        self.chosen = webhook_id
        return self._guarded(self._fetch, admin=True)

    @rx.event
    def ask_delete(self, webhook_id: int):
        self.deleting = webhook_id

    @rx.event
    def cancel_delete(self):
        self.deleting = 0

    @rx.event
    def confirm_delete(self):
        webhook_id, self.deleting = self.deleting, 0
        return self._guarded(lambda caller: self._delete(caller, webhook_id), admin=True)

    def _delete(self, caller: Caller, webhook_id: int):
        try:
            hook = admin.delete_webhook(store_for(caller), caller, webhook_id)
        except NotFound:  # deleted meanwhile (or never this tenant's)
            self._fetch(caller)
            return rx.toast.error(self.gettext("There is no webhook %(id)s any more",
                                               id=webhook_id))
        except BpflowError as exc:
            return rx.toast.error(self.explain(exc))
        self._fetch(caller)
        return rx.toast.success(self.gettext("Deleted the webhook to %(url)s",
                                             url=hook["url"]))
