"""State of "Return to…" (SPEC §15, 驳回/退回): the dialog in which a pending approver (on
the approval card of the flow page or of the inbox) chooses the earlier step the request
goes back to, from those `bpflow.moves.returns` lists by their step descriptions, and says
why. Confirming returns it: by the approver's mail (`Mailbox.decide`, "returned", with
`to`) when one is open, else as a return of the circle (`moves.returns.return_work`);
who may is asked inside. The pages follow the change by push (the flow page its
instance, the inbox its mail), so nothing else is re-read here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import reflex as rx

from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.mailbox import Mailbox
from bpflow.moves import returns
from bpflow_app.session import SessionState
from engine.errors import BpflowError
from engine.tasks import START

MAX_COMMENT = 2000


@dataclass
class TargetView:
    step: str = ""  # a circle's uri, or "@start"
    label: str = ""  # the step as its people know it, in the reader's language


def target_views(found: list[dict[str, str]], gettext: Callable[..., str]
                 ) -> tuple[list[TargetView], str]:
    """The steps `bpflow.moves.returns` lists (a real flow's or a tried draft's) as the
    dialog offers them, and the one chosen at first: the step that asked, the nearest,
    comes first in the people's mind."""
    views = [TargetView(t["to"], gettext("The beginning (%(step)s)", step=t["description"])
                        if t["to"] == START else t["description"]) for t in found]
    nearest = found[-2]["to"] if len(found) > 1 and found[-1]["to"] == START \
        else found[-1]["to"] if found else ""
    return views, nearest


class ReturnState(SessionState):
    returning: str = ""  # the card whose dialog is open ("" closed): instance and circle
    return_title: str = ""  # the step returned, by its description
    targets: list[TargetView] = []
    target: str = ""
    return_comment: str = ""
    return_error: str = ""
    return_busy: bool = False
    _where: tuple[str, str, int] = ("", "", 0)  # instance, circle, the approver's mail

    @rx.event
    def ask_return(self, iid: str, uri: str, mail: int, title: str):
        """Open the dialog for the work waiting at `uri`, listing where it may go back."""
        def offer(caller: Caller):
            try:
                found = returns.return_targets(store_for(caller), caller, iid, uri,
                                               self._language())
            except BpflowError as exc:
                return rx.toast.warning(self.explain(exc))
            if not found:
                return rx.toast.info(self.gettext("There is no earlier step to return it to"))
            self.targets, self.target = target_views(found, self.gettext)
            self._where, self.returning, self.return_title = (iid, uri, int(mail or 0)), \
                f"{iid} {uri}", title
            self.return_comment, self.return_error = "", ""
            return None
        return self._guarded(offer)

    @rx.event
    def set_target(self, value: str):
        self.target = value

    @rx.event
    def set_return_comment(self, value: str):
        self.return_comment = value
        if value.strip():
            self.return_error = ""

    @rx.event
    def cancel_return(self):
        self.returning, self._where, self.return_error = "", ("", "", 0), ""

    @rx.event
    def confirm_return(self, form_data: dict[str, Any] | None = None):
        comment = str((form_data or {}).get("comment", self.return_comment) or "").strip()
        if not comment:
            self.return_error = self.gettext("Say what to amend: returning needs a comment")
            return
        if len(comment) > MAX_COMMENT:
            self.return_error = self.gettext(
                "A comment has at most %(most)s characters (this one has %(count)s)",
                most=MAX_COMMENT, count=len(comment))
            return
        if not any(t.step == self.target for t in self.targets):
            self.return_error = self.gettext("Choose the step to return it to")
            return
        self.return_busy, self.return_error = True, ""
        yield
        try:
            yield self._guarded(lambda caller: self._return(caller, comment))
        finally:
            self.return_busy = False

    def _return(self, caller: Caller, comment: str):
        iid, uri, mail = self._where
        target = self.target
        name = next((t.label for t in self.targets if t.step == target), target)
        store = store_for(caller)
        try:
            if mail:
                Mailbox(store).decide(mail, caller, "returned", comment, target)
            else:
                returns.return_work(store, caller, iid, uri, target, comment)
        except BpflowError as exc:
            self.returning = ""
            return rx.toast.warning(self.explain(exc))
        self.returning, self._where = "", ("", "", 0)
        return rx.toast.success(self.gettext("Returned to “%(step)s”", step=name))
