"""What the inbox shows, as plain data: a mail of a list (its decision and whether its
signature holds, said in words) and a task of the Tasks tab (whose it is, when it is due).

The states of the inbox (`pages/mail_state.py`, `pages/tasks_state.py`) read the store
and build these; who may see or do what is `bpflow.access`'s to say.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bpflow import access, moves
from bpflow.access import Caller
from bpflow.store import Store
from bpflow_app import routes
from bpflow_app.boxview import clock_text

PAGE_SIZE = 25  # a page of mail, or of one task list
KINDS = ("approval", "message", "guest")  # the mail tabs
TASKS = "tasks"  # the Tasks tab (not a kind of mail)
DECIDED = {  # decision -> (what the mail's row says, the colour of its badge)
    "approved": ("approved", "approved"), "rejected": ("rejected", "rejected"),
    "returned": ("sent back", "pending"), "withdrawn": ("withdrawn", "terminated")}


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
    label: str = ""  # the decision as its badge says it ("sent back")
    tone: str = ""  # the badge's colour, as a state of `components.ui.COLORS`
    outcome: str = ""  # the decision in a sentence, with its comment


def tamper_notice(problem: str) -> str:
    """What the inbox says of a mail whose signature does not hold: the mailbox's reason
    ("the mail does not match its signature"), said once, and that it cannot be decided."""
    return f"{problem[:1].upper()}{problem[1:]}. It cannot be approved." if problem else ""


def outcome(decision: str, comment: str) -> str:
    """A decided approval in a sentence: who closed it and why."""
    said = f" — {comment}" if comment else ""
    if decision == "withdrawn":
        return "Withdrawn by the requester"
    if decision == "returned":
        return f"Sent back to be amended{said}"
    return f"Decided: {decision}{said}" if decision else ""


def mail_view(m: dict[str, Any], opened: bool = False) -> MailView:
    """A mail for the list; the signed payload only for the opened one (a page of
    payloads would weigh more than the rest of the page)."""
    payload = m.get("payload") if opened else None
    decision, comment = m["decision"] or "", m["comment"] or ""
    label, tone = DECIDED.get(decision, (decision, decision))
    return MailView(
        id=m["id"], kind=m["kind"], sender=m["sender"], subject=m["subject"], body=m["body"],
        created=clock_text(m["created_at"]), read=m["read"], decision=decision,
        comment=comment, instance=m["instance"] or "", circle=m["circle"] or "",
        signature_ok=m["signature_ok"], problem=m["problem"] or "",
        notice=tamper_notice(m["problem"] or ""),
        payload=json.dumps(payload, indent=1, ensure_ascii=False, sort_keys=True)
        if payload else "",
        open=m["kind"] == "approval" and m["decision"] is None and m["signature_ok"],
        label=label, tone=tone, outcome=outcome(decision, comment))


@dataclass
class TaskView:
    key: str = ""  # instance and circle, naming the row
    instance: str = ""
    short: str = ""  # the instance's id as people read it
    href: str = ""  # its flow page
    uri: str = ""
    flow: str = ""  # the template's title
    description: str = ""
    waits: str = ""  # whom it waits for
    ready: str = ""
    due: str = ""  # "" when the task has no due time
    overdue: bool = False


def span(seconds: float) -> str:
    """A length of time as people say it, to the minute ("2 d 3 h", "5 min")."""
    if seconds < 60:
        return "less than a minute"
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 1440)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min"


def due_words(due_at: str | None, now: datetime) -> tuple[str, bool]:
    """(the due time with how far it is, whether it passed)."""
    if not due_at:
        return "", False
    due = datetime.fromisoformat(due_at)
    left = (due - now).total_seconds()
    if left < 0:
        return f"{clock_text(due)} (overdue by {span(-left)})", True
    return f"{clock_text(due)} ({'in ' if left >= 60 else ''}{span(left)})", False


def task_view(store: Store, caller: Caller, row: Any, now: datetime,
              words: dict[tuple[str, int, str], tuple[str, str]] | None = None) -> TaskView:
    """A row of `Store.tasks` for the list (`words`: the circles' titles and descriptions
    looked up so far, kept across the rows of one read)."""
    task = row.task
    words = {} if words is None else words
    key = (row.template, row.version, row.circle)
    if key not in words:
        words[key] = moves.circle_words(store, *key)
    title, description = words[key]
    holder = task["assignee"]
    due, overdue = due_words(task.get("due_at"), now)
    return TaskView(
        key=f"{row.instance_id} {row.circle}", instance=row.instance_id,
        short=row.instance_id[:8], href=routes.flow(row.instance_id), uri=row.circle,
        flow=title or row.template, description=description or row.circle,
        waits="you" if holder == caller.username else holder or access.describe(task),
        ready=clock_text(row.ready_at), due=due, overdue=overdue)
