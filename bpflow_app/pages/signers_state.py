"""State of the signers dialog (SPEC §15), on the flow page and in the inbox: the
addressee of a pending approval adds signers (加签: whom, where, why, then a confirmation);
the flow's starter or an admin removes addressees who have not decided (减签). What may be
done is `bpflow.mailbox`'s and `bpflow.access`'s to say; the flow page hears the change by
its push, the inbox reads its page again."""

from __future__ import annotations

import reflex as rx

from bpflow.access import ADMIN, APPROVER, Caller
from bpflow.backend import store_for
from bpflow.forms import FormError
from bpflow.mailbox import Mailbox
from bpflow_app import routes
from bpflow_app.pages.mail_state import MailState
from bpflow_app.session import SessionState
from engine.errors import BpflowError

PLACES = ("before", "after", "with")
PICKER_MOST = 500  # people offered by name; past that, typed names


class SignersState(SessionState):
    mode: str = ""  # "add", "remove", or "" (closed)
    mail: int = 0  # the mail whose round changes
    step: str = ""  # the step's name, for the dialog's title
    people: list[str] = []  # whom the dialog offers
    chosen: list[str] = []
    where: str = "with"
    comment: str = ""
    confirming: bool = False  # the second look before it is sent
    error: str = ""
    busy: bool = False

    @rx.var
    def is_open(self) -> bool:
        return self.mode != ""

    def _reset(self, mode: str, mail_id: int, step: str, people: list[str]) -> None:
        self.mode, self.mail, self.step, self.people = mode, mail_id, step, people
        self.chosen, self.where, self.comment = [], "with", ""
        self.confirming, self.error, self.busy = False, "", False

    @rx.event
    def open_add(self, mail_id: int, step: str, asked: list[str]):
        """Offer the people who may approve and are not asked yet."""
        def load(caller: Caller):
            store = store_for(caller)
            approvers = set(store.usernames(APPROVER)) | set(store.usernames(ADMIN))
            offered = [n for n in sorted(approvers) if n not in asked
                       and n != caller.username][:PICKER_MOST]
            self._reset("add", mail_id, step, offered)
        return self._guarded(load)

    @rx.event
    def open_remove(self, mail_id: int, step: str, removable: list[str]):
        self._reset("remove", mail_id, step, list(removable))

    @rx.event
    def close(self):
        self.mode, self.confirming, self.error = "", False, ""

    @rx.event
    def pick(self, name: str):
        self.chosen = [n for n in self.chosen if n != name] if name in self.chosen else \
            [*self.chosen, name]
        self.error, self.confirming = "", False

    @rx.event
    def set_where(self, value: str):
        if value in PLACES:
            self.where, self.confirming = value, False

    @rx.event
    def set_comment(self, value: str):
        self.comment = value[:2000]

    @rx.event
    def back(self):
        self.confirming = False

    @rx.event
    def submit(self):
        """First a confirmation of what is about to change; then the change."""
        if not self.chosen:
            self.error = self.gettext("Choose at least one person")
            return None
        if not self.confirming:
            self.confirming = True
            return None
        self.busy = True
        try:
            return self._guarded(self._send)
        finally:
            self.busy = False

    def _send(self, caller: Caller):
        mailbox = Mailbox(store_for(caller))
        try:
            if self.mode == "add":
                mailbox.add_signers(self.mail, caller, self.chosen, self.where,
                                    self.comment.strip())
                done = self.gettext("Signers added: %(who)s", who=", ".join(self.chosen))
            else:
                mailbox.remove_signers(self.mail, caller, self.chosen, self.comment.strip())
                done = self.gettext("Signers removed: %(who)s", who=", ".join(self.chosen))
        except FormError as exc:
            self.error, self.confirming = "; ".join(self.say(v) for v in exc.errors.values()), \
                False
            return None
        except BpflowError as exc:
            self.error, self.confirming = self.explain(exc), False
            return None
        self.mode, self.confirming = "", False
        if self.router.url.path.startswith(routes.INBOX):  # the flow page follows by push
            return [rx.toast.success(done), MailState.turn(0)]
        return rx.toast.success(done)
