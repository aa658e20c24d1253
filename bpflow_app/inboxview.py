"""What the inbox shows, as plain data: a mail of a list (its decision and whether its
signature holds, said in words) and a task of the Tasks tab (whose it is, when it is due);
and which tab the inbox opens on (the one with work waiting).

The states of the inbox (`pages/mail_state.py`, `pages/tasks_state.py`) read the store
and build these, in the reader's language (their `gettext`); times are ISO
(`boxview.iso_text`), shown in the reader's language and zone by the page. Who may see
or do what is `bpflow.access`'s to say.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bpflow import moves
from bpflow.access import Caller
from bpflow.languages import pick
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow_app import routes
from bpflow_app.boxview import delegation, iso_text, round_lines
from bpflow_app.catalogs import N_
from bpflow_app.flowsview import WAITS_MOST
from engine.instance import parse_time

PAGE_SIZE = 25  # a page of mail, or of one task list
KINDS = ("approval", "message", "cc", "urge", "guest")  # the mail tabs (store's MAIL_KINDS)
TASKS = "tasks"  # the Tasks tab (not a kind of mail)
DECIDED = {  # decision -> (what the mail's row says, the colour of its badge)
    "approved": (N_("approved"), "approved"), "rejected": (N_("rejected"), "rejected"),
    "returned": (N_("sent back"), "pending"), "withdrawn": (N_("withdrawn"), "terminated"),
    "removed": (N_("removed"), "terminated"),
    "transferred": (N_("transferred"), "terminated")}
# What the mailbox finds wrong with a mail (`Mailbox.check`), as the inbox says it.
PROBLEMS = {
    "the mail does not match its signature":
        N_("The mail does not match its signature. It cannot be approved."),
    "the mail was altered after it was signed":
        N_("The mail was altered after it was signed. It cannot be approved."),
    "the decision does not match its signature":
        N_("The decision does not match its signature. It cannot be approved.")}
Say = Callable[..., str]  # a state's `gettext`: a message and its values → the text


def english(message: str, **values: Any) -> str:
    """`Say` without a language: the message as written."""
    return message % values if values else message


@dataclass
class MailView:
    id: int = 0
    kind: str = ""
    sender: str = ""
    subject: str = ""
    body: str = ""
    created: str = ""  # ISO
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
    round_lines: list[str] = field(default_factory=list)  # the opened approval's round
    sign: bool = False  # its reader is asked now: they may add signers
    asked: list[str] = field(default_factory=list)  # everyone its round asks
    handed: str = ""  # how it was handed on (transfer, delegate), in a sentence
    answer: str = ""  # the delegate's answer (approved, rejected) its addressee confirms
    delegated: bool = False  # a delegate's mail: they answer, they do not hand it on
    addressee: str = ""  # an approval's approver (the reader, or whom they stand in for)
    decided_by: str = ""  # "ann for bob" when a substitute decided it, else ""


def substituted(m: dict[str, Any]) -> tuple[str, str]:
    """(the approval's addressee, who decided it when that was not the addressee: their
    substitute, "ann for bob"; else "")."""
    approver = str((m.get("payload") or {}).get("approver") or "")
    by = m.get("decided_by") or ""
    return approver, by if by and by != approver else ""


def tamper_notice(problem: str, say: Say = english) -> str:
    """What the inbox says of a mail whose signature does not hold: the mailbox's reason
    ("the mail does not match its signature"), said once, and that it cannot be decided."""
    if not problem:
        return ""
    if problem in PROBLEMS:
        return say(PROBLEMS[problem])
    return say(N_("%(problem)s. It cannot be approved."),
               problem=problem[:1].upper() + problem[1:])


def outcome(decision: str, comment: str, say: Say = english) -> str:
    """A decided approval in a sentence: who closed it and why."""
    if decision == "withdrawn":
        return say(N_("Withdrawn by the requester"))
    if decision == "removed":
        return (say(N_("Removed from the approval — %(comment)s"), comment=comment)
                if comment else say(N_("Removed from the approval")))
    if decision == "transferred":
        return (say(N_("Transferred to someone else — %(comment)s"), comment=comment)
                if comment else say(N_("Transferred to someone else")))
    if decision == "returned":
        return (say(N_("Sent back to be amended — %(comment)s"), comment=comment)
                if comment else say(N_("Sent back to be amended")))
    if decision in ("approved", "rejected"):
        word = say(DECIDED[decision][0])
        return (say(N_("Decided: %(decision)s — %(comment)s"), decision=word,
                    comment=comment)
                if comment else say(N_("Decided: %(decision)s"), decision=word))
    return say(N_("Decided: %(decision)s"), decision=decision) if decision else ""


def mail_view(m: dict[str, Any], opened: bool = False, say: Say = english) -> MailView:
    """A mail for the list, its words said with `say`; the signed payload only for the
    opened one (a page of payloads would weigh more than the rest of the page)."""
    payload = m.get("payload") if opened else None
    decision, comment = m["decision"] or "", m["comment"] or ""
    label, tone = DECIDED.get(decision, (decision, decision))
    return MailView(
        id=m["id"], kind=m["kind"], sender=m["sender"], subject=m["subject"], body=m["body"],
        created=iso_text(m["created_at"]), read=m["read"], decision=decision,
        comment=comment, instance=m["instance"] or "", circle=m["circle"] or "",
        signature_ok=m["signature_ok"], problem=m["problem"] or "",
        notice=tamper_notice(m["problem"] or "", say),
        payload=json.dumps(payload, indent=1, ensure_ascii=False, sort_keys=True)
        if payload else "",
        open=m["kind"] == "approval" and m["decision"] is None and m["signature_ok"],
        label=say(label) if decision in DECIDED else label, tone=tone,
        outcome=outcome(decision, comment, say), handed=handed(m, say),
        **dict(zip(("addressee", "decided_by"), substituted(m), strict=True)),
        answer=str((m.get("answer") or {}).get("decision") or ""),
        delegated=bool((m.get("payload") or {}).get("delegated_by")) if m["kind"] ==
        "approval" else False)


def handed(m: dict[str, Any], say: Say = english) -> str:
    """How an approval mail was handed on (SPEC §15), in a sentence: transferred to the
    reader, delegated to them, or delegated by them and what the delegate answered."""
    payload, answer = m.get("payload") or {}, m.get("answer") or {}
    note = str(payload.get("note") or "")
    if payload.get("delegated_by"):
        text = say(N_("%(name)s asked you to answer this for them; your answer goes back to"
                      " them to confirm"), name=payload["delegated_by"])
    elif answer.get("decision"):
        word = say(DECIDED[answer["decision"]][0])
        text = say(N_("%(name)s answered: %(decision)s"), name=answer["by"], decision=word)
        note = str(answer.get("comment") or "")
    elif answer:
        text = say(N_("You asked %(name)s to answer; waiting for their answer"),
                   name=answer["by"])
        note = ""
    elif payload.get("transferred_from"):
        text = say(N_("%(name)s transferred this approval to you"),
                   name=payload["transferred_from"])
    else:
        return ""
    return say(N_("%(said)s — “%(comment)s”"), said=text, comment=note) if note else text


def with_round(view: MailView, store: Store, caller: Caller, say: Say = english) -> MailView:
    """The opened approval mail with its round (SPEC §15): who decided, who is next, what
    is still needed (`boxview.round_lines`), and whether its reader may add signers."""
    row = store.mail(view.id) if view.kind == "approval" and view.instance else None
    if row is None or row.epoch is None:
        return view
    info = Mailbox(store).round_of(row.instance_id, row.circle, row.epoch)
    if info is not None:
        view.round_lines, view.asked = round_lines(info, say), info["approvers"]
        # whose seat the mail is: its addressee's (the reader, or whom they stand in for);
        # a delegate answers for the one who delegated
        payload = row.payload or {}
        seat = payload.get("delegated_by") or payload.get("approver") or caller.username
        asked_now = seat in info["waiting"]
        view.sign = view.open and info["verdict"] is None and asked_now and \
            not payload.get("delegated_by")
        if view.open and info["verdict"] is None and not asked_now:  # signers before them
            view.open = False
            view.outcome = say(N_("Others decide first: %(who)s"),
                               who=", ".join(info["waiting"]))
    return view


@dataclass
class TaskView:
    key: str = ""  # instance and circle, naming the row
    instance: str = ""
    short: str = ""  # the instance's id as people read it
    href: str = ""  # its flow page
    uri: str = ""
    flow: str = ""  # the template's title, in the reader's language
    description: str = ""
    waits: str = ""  # whom it waits for, by name and role ("fred", "finance")
    waits_you: bool = False  # the reader holds it
    summary: str = ""  # what the flow is about (`flowsview.summary`)
    ready: str = ""  # ISO
    due: str = ""  # ISO; "" when the task has no due time
    overdue: bool = False
    handover: str = ""  # its delegation in a sentence (委派: who answers, who confirms)
    answering: bool = False  # the reader answers it for its holder


def task_view(store: Store, caller: Caller, row: Any, now: datetime,
              words: dict[tuple[str, int, str], tuple[Any, Any]] | None = None,
              lang: str = "en", about: str = "", say: Say = english) -> TaskView:
    """A row of `Store.tasks` for the list (`words`: the circles' titles and descriptions
    looked up so far, kept across the rows of one read), in `lang`; `about`: the flow's
    summary."""
    task = row.task
    words = {} if words is None else words
    key = (row.template, row.version, row.circle)
    if key not in words:
        words[key] = moves.circle_words(store, *key)
    title, description = (pick(w, lang) for w in words[key])
    holder = task["assignee"]
    who = [holder] if holder else [*task["users"], *task["roles"]]
    due = parse_time(task.get("due_at"))
    return TaskView(
        key=f"{row.instance_id} {row.circle}", instance=row.instance_id,
        short=row.instance_id[:8], href=routes.flow(row.instance_id), uri=row.circle,
        flow=title or row.template, description=description or row.circle,
        waits=", ".join(who[:WAITS_MOST]) + (", …" if len(who) > WAITS_MOST else ""),
        waits_you=holder == caller.username, summary=about, ready=iso_text(row.ready_at),
        due=iso_text(due), overdue=due is not None and due <= now,
        handover=delegation(task, caller, say),
        answering=(task.get("delegate") or {}).get("to") == caller.username)


def opening_tab(store: Store, caller: Caller, counts: dict[str, dict[str, int]]) -> str:
    """The tab the inbox opens on: the one with work waiting (approvals to decide, else
    tasks, else unread messages, else, for admins, unread guest messages); Approvals when
    nothing waits. `counts`: the caller's `Store.mail_counts`."""
    if counts["approval"]["pending"]:
        return "approval"
    if store.tasks(caller, "all", None, 1, 0)[1]:
        return TASKS
    if counts["message"]["unread"]:
        return "message"
    if caller.is_admin and counts["guest"]["unread"]:
        return "guest"
    return "approval"
