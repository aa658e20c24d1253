"""State of the inbox: the user's approval mail, in-site messages and (admins) guest
messages, a page at a time with unread counts; approve or reject with a comment.

A mail whose signature does not match is shown as such and cannot be decided: the
mailbox refuses it and records the refusal in the flow's history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import reflex as rx

from bpflow.access import Caller
from bpflow.backend import get_store
from bpflow.errors import Tampered
from bpflow.mailbox import Mailbox
from bpflow_app.boxview import clock_text
from bpflow_app.frame_state import FrameState
from bpflow_app.session import SessionState
from engine.errors import BpflowError

PAGE_SIZE = 25
KINDS = ("approval", "message", "guest")


@dataclass
class MailView:
    id: int = 0
    kind: str = ""
    sender: str = ""
    subject: str = ""
    body: str = ""
    created: str = ""
    read: bool = False
    decision: str = ""
    comment: str = ""
    instance: str = ""
    circle: str = ""
    signature_ok: bool = True
    problem: str = ""
    notice: str = ""  # what the page says of a mail that cannot be trusted
    payload: str = ""
    open: bool = False  # an approval still waiting for this user's decision


def tamper_notice(problem: str) -> str:
    """What the inbox says of a mail whose signature does not hold: the mailbox's reason
    ("the mail does not match its signature"), said once, and that it cannot be decided."""
    return f"{problem[:1].upper()}{problem[1:]}. It cannot be approved." if problem else ""


def mail_view(m: dict[str, Any], opened: bool = False) -> MailView:
    """A mail for the list; the signed payload only for the opened one (a page of
    payloads would weigh more than the rest of the page)."""
    payload = m.get("payload") if opened else None
    return MailView(
        id=m["id"], kind=m["kind"], sender=m["sender"], subject=m["subject"], body=m["body"],
        created=clock_text(m["created_at"]), read=m["read"], decision=m["decision"] or "",
        comment=m["comment"] or "", instance=m["instance"] or "", circle=m["circle"] or "",
        signature_ok=m["signature_ok"], problem=m["problem"] or "",
        notice=tamper_notice(m["problem"] or ""),
        payload=json.dumps(payload, indent=1, ensure_ascii=False, sort_keys=True)
        if payload else "",
        open=m["kind"] == "approval" and m["decision"] is None and m["signature_ok"])


class InboxState(SessionState):
    kind: str = "approval"
    mails: list[MailView] = []
    unread: dict[str, int] = {k: 0 for k in KINDS}
    total: int = 0
    page: int = 0
    opened: int = 0
    comment: str = ""
    deciding: int = 0
    loading: bool = True

    @rx.var
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))

    def _fetch(self, caller: Caller) -> None:
        store = get_store()
        counts = store.mail_counts(caller)
        self.unread = {k: counts[k]["unread"] for k in KINDS}
        self.total = counts[self.kind]["total"]
        self.page = min(self.page, self.pages - 1)
        rows = Mailbox(store).inbox(caller, kind=self.kind, limit=PAGE_SIZE,
                                    offset=self.page * PAGE_SIZE)
        self.mails = [mail_view(m, m["id"] == self.opened) for m in rows]
        self.loading = False

    @rx.event
    def load(self):
        caller = self._visitor()
        if caller is not None:
            self._fetch(caller)

    @rx.event
    def show(self, kind: str):
        if kind in KINDS:
            self.kind, self.page, self.opened, self.loading = kind, 0, 0, True
            yield
            yield self._guarded(self._fetch)

    @rx.event
    def turn(self, delta: int):
        self.page = min(max(0, self.page + delta), self.pages - 1)
        return self._guarded(self._fetch)

    @rx.event
    def toggle(self, mail_id: int):
        """Open a mail (marking it read) or close it."""
        if self.opened == mail_id:
            self.opened = 0
            return None
        self.opened, self.comment = mail_id, ""

        def read(caller: Caller):
            Mailbox(get_store()).mark_read(mail_id, caller)
            self._fetch(caller)
            return FrameState.load
        try:
            return self._guarded(read)
        except BpflowError as exc:
            return rx.toast.error(str(exc))

    @rx.event
    def set_comment(self, value: str):
        self.comment = value

    @rx.event
    def decide(self, mail_id: int, decision: str):
        self.deciding = mail_id
        yield
        try:
            yield self._guarded(lambda caller: self._decide(caller, mail_id, decision))
        finally:
            self.deciding = 0

    def _decide(self, caller: Caller, mail_id: int, decision: str):
        try:
            Mailbox(get_store()).decide(mail_id, caller, decision, self.comment.strip())
            toast = rx.toast.success(f"{decision.capitalize()}; the flow continues")
            self.comment = ""
        except Tampered as exc:
            toast = rx.toast.error(f"Refused: {exc}")
        except BpflowError as exc:
            toast = rx.toast.warning(str(exc))
        self._fetch(caller)
        return [toast, FrameState.load]
