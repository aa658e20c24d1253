"""What the flow page shows of an instance, as plain data: its header, every circle's
state for the drawing and the details panel, the drawing itself and the history.

Steps are named by their circles' descriptions; the history is told in sentences in the
reader's language ("approver approved “The manager approves” — “looks fine”"), each row
keeping the engine's event (kind, uri, details) for the technical view.

Who may see or act on it is `bpflow.access`'s to say (`pages/flow_state.py` asks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bpflow import access
from bpflow.access import Caller
from bpflow.languages import pick
from bpflow.moves import nudging
from bpflow.store import Store
from bpflow_app.boxview import ENGLISH, Words, iso_text, size_words, step_name, who_words
from bpflow_app.catalogs import N_
from bpflow_app.drawing import Drawing, draw
from engine.instance import FAILURE, SKIPPED, SUCCESS, TERMINATED, WAITING, Instance
from engine.moves import instance_moves
from engine.runtime import ACTIVE, READY, SCHEDULED, Engine

FINISHED = (SUCCESS, FAILURE, SKIPPED)


@dataclass
class Header:
    id: str = ""
    template: str = ""
    title: str = ""
    version: int = 0
    status: str = ""
    reason: str = ""
    owner: str = ""
    created: str = ""  # ISO (components/when.py shows it)
    updated: str = ""
    controls: list[str] = field(default_factory=list)  # the engine's moves from its status
    failed: str = ""  # the failed steps, by their names ("“Call the service”")


@dataclass
class CircleInfo:
    id: str = ""
    label: str = ""
    description: str = ""
    name: str = ""  # as people know the step: its description, else its uri
    state: str = "waiting"  # the drawing's: waiting, ready, retrying, success, failure, skipped
    result: str = ""
    reason: str = ""
    attempts: int = 0
    next_attempt: str = ""  # ISO
    resettable: bool = False
    flow: bool = False


@dataclass
class HistoryRow:
    seq: int
    at: str  # ISO
    kind: str  # the engine's event, for the technical view
    actor: str
    circle: str  # the circle's uri (technical view)
    detail: str  # the event's data (technical view)
    text: str = ""  # what happened, in the reader's words
    plain: bool = True  # shown outside the technical view (not engine bookkeeping)


@dataclass
class CommentRow:
    """A comment of the flow page's thread (its text is data: shown as text, never HTML)."""

    seq: int
    at: str  # ISO
    author: str
    step: str  # the step it is about, by its name ("" for the whole flow)
    text: str


@dataclass
class FileRow:
    """A file a form of the flow holds (downloaded as an attachment)."""

    id: str
    name: str
    size: str  # in words: "12 KB"
    type: str
    owner: str
    step: str
    at: str  # ISO


def comment_rows(comments: list[dict[str, Any]], inst: Instance,
                 words: Words = ENGLISH) -> list[CommentRow]:
    """The thread, oldest first."""
    return [CommentRow(seq=c["seq"], at=c["at"], author=c["author"] or "",
                       step=step_name(inst, c["uri"], words) if c["uri"] else "",
                       text=c["text"]) for c in comments]


def file_rows(files: list[dict[str, Any]], inst: Instance,
              words: Words = ENGLISH) -> list[FileRow]:
    return [FileRow(id=f["id"], name=f["name"], size=size_words(f["size"]), type=f["type"],
                    owner=f["owner"], step=step_name(inst, f["uri"], words) if f["uri"]
                    else "", at=f["created_at"]) for f in files]


def header(inst: Instance, words: Words = ENGLISH) -> Header:
    t = inst.template
    failed = [words.gettext("“%(step)s”", step=step_name(inst, cid, words))
              for cid in t.plan.order if inst.circles[cid].state == FAILURE]
    return Header(failed=words.both(failed), id=inst.id, template=t.name,
                  title=pick(t.title, words.lang) or t.name,
                  version=inst.version or 0, status=inst.status, reason=inst.reason or "",
                  owner=str(inst.user.get("username", "")), created=iso_text(inst.created_at),
                  updated=iso_text(inst.updated_at), controls=list(instance_moves(inst.status)))


def visual_states(engine: Engine, inst: Instance) -> dict[str, str]:
    """Each circle's colour key: a waiting circle is ready, retrying or just waiting."""
    statuses = engine.statuses(inst)
    out = {}
    for cid, run in inst.circles.items():
        if run.state != WAITING:
            out[cid] = run.state
        elif statuses.get(cid) == SCHEDULED:
            out[cid] = "retrying"
        elif statuses.get(cid) == READY and run.ready_at is not None and \
                inst.status in ACTIVE:
            out[cid] = "ready"
        else:
            out[cid] = "waiting"
    return out


def _text(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, indent=1) if isinstance(
        value, (dict, list)) else str(value)


def circle_infos(inst: Instance, states: dict[str, str], words: Words = ENGLISH
                 ) -> list[CircleInfo]:
    nodes = inst.template.plan.nodes
    return [CircleInfo(id=cid, label=cid.rsplit(".", 1)[-1],
                       description=pick(nodes[cid].circle.description, words.lang),
                       name=step_name(inst, cid, words),
                       state=states[cid], result=_text(run.result), reason=run.reason or "",
                       attempts=run.attempts, next_attempt=iso_text(run.next_attempt_at),
                       resettable=run.state in FINISHED and inst.status != TERMINATED,
                       flow=bool(nodes[cid].children))
            for cid in inst.template.plan.order for run in (inst.circles[cid],)]


def default_expanded(inst: Instance) -> set[str]:
    """Nested flows that have started are open; the others stay closed."""
    nodes = inst.template.plan.nodes
    return {cid for cid, node in nodes.items()
            if node.children and inst.circles[cid].ready_at is not None}


# a circle's state in the drawing, as the legend and a circle's accessible name say it
STATE_WORDS = {"waiting": N_("not yet"), "ready": N_("waiting for someone"),
               "retrying": N_("will try again"), "success": N_("done"),
               "failure": N_("failed"), "skipped": N_("not needed")}


def drawing(inst: Instance, states: dict[str, str], expanded: set[str],
            intervention: bool, words: Words = ENGLISH) -> Drawing:
    """The drawing; `intervention` (the technical view) names circles by their uris and
    draws the weak edges a reset may follow, else circles are named by their steps."""
    nodes = inst.template.plan.nodes
    weak = {cid: node.weak for cid, node in nodes.items() if node.weak} if intervention else None
    tips = {cid: pick(node.circle.description, words.lang)
            for cid, node in nodes.items()}
    names = None if intervention else {cid: step_name(inst, cid, words) for cid in nodes}
    return draw(inst.template.analysis, states, expanded=expanded, weak=weak, tips=tips,
                names=names, aria=lambda name, state: words.gettext(
                    "%(step)s: %(state)s", step=name,
                    state=words.gettext(STATE_WORDS.get(state, state))))


def _detail(event: dict[str, Any]) -> str:
    data = event.get("data") or {}
    after = event.get("after") or {}
    parts = []
    for key in ("reason", "why", "scope", "origin", "levels", "attempt", "template",
                "comment", "assignee", "to"):
        if data.get(key) not in (None, ""):
            parts.append(f"{key}: {data[key]}")
    if isinstance(after, dict) and after.get("reason"):
        parts.append(f"reason: {after['reason']}")
    return "; ".join(str(p) for p in parts)


SYSTEM = (None, "", "worker", "system", "scheduler")  # not a person


def _decisions(event: dict[str, Any]) -> list[dict[str, Any]]:
    result = (event.get("after") or {}).get("result")
    found = result.get("decisions") if isinstance(result, dict) else None
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def sentence(event: dict[str, Any], inst: Instance, words: Words = ENGLISH
             ) -> tuple[str, bool]:
    """What an event of the instance's history says, in the reader's words, and whether
    a user reads it (False: engine bookkeeping, for the technical view only)."""
    gettext = words.gettext
    kind, data = event["kind"], event.get("data") or {}
    cid = event.get("circle") or ""
    step = step_name(inst, cid, words) if cid else ""
    actor = event.get("actor") or ""
    person = actor not in SYSTEM
    after = event.get("after") or {}
    reason = str(after.get("reason") or data.get("reason") or data.get("why") or "")
    comment = str(data.get("comment") or "")
    node = inst.template.plan.nodes.get(cid)
    box = node.circle.box if node is not None else None
    if kind == "instance_started":
        return gettext("%(who)s started the flow", who=actor), True
    if kind == "instance_suspended":
        return gettext("%(who)s suspended the flow", who=actor), True
    if kind == "instance_resumed":
        return gettext("%(who)s resumed the flow", who=actor), True
    if kind == "instance_terminated":
        if reason:
            return gettext("%(who)s aborted the flow: “%(reason)s”", who=actor,
                           reason=reason), True
        return gettext("%(who)s aborted the flow", who=actor), True
    if kind == "instance_migrated":
        return gettext("The flow was moved to a newer version of its template"), True
    if kind == "circle_ready":
        task = data.get("task")
        if not isinstance(task, dict):
            return gettext("“%(step)s” began", step=step), False
        who = task.get("assignee") or who_words(task, words)
        return gettext("“%(step)s” waits for %(who)s", step=step, who=who), True
    if kind == "circle_pending":
        info = data.get("approval")
        if isinstance(info, dict) and info.get("approvers"):
            names = [str(a) for a in info["approvers"]]
            who = words.both(names) if info.get("quorum", "all") == "all" else \
                words.either(names)
            return gettext("Approval of “%(step)s” asked of %(who)s", step=step,
                           who=who), True
        if person:
            return gettext("%(who)s sent “%(step)s”", who=actor, step=step), True
        return gettext("“%(step)s” is under way", step=step), False
    decisions = _decisions(event)
    if kind in ("circle_succeeded", "circle_failed") and decisions:
        return gettext("; ").join(_decision(d, step, words) for d in decisions), True
    if kind == "circle_succeeded":
        if box is not None and box.confirm is not None:
            return gettext("%(who)s accepted “%(step)s”", who=actor, step=step), True
        if box is not None and box.form and person:
            return gettext("%(who)s sent “%(step)s”", who=actor, step=step), True
        return gettext("“%(step)s” is done", step=step), True
    if kind == "circle_failed":
        if box is not None and box.confirm is not None and reason.startswith("declined"):
            why = reason.partition(":")[2].strip()
            if why:
                return gettext("%(who)s declined “%(step)s” — “%(why)s”", who=actor,
                               step=step, why=why), True
            return gettext("%(who)s declined “%(step)s”", who=actor, step=step), True
        return gettext("“%(step)s” failed", step=step), True
    if kind == "circle_skipped":
        return gettext("“%(step)s” was not needed", step=step), True
    if kind == "circle_retry_scheduled":
        return gettext("“%(step)s” failed and will be tried again", step=step), True
    if kind == "circle_reset":
        if data.get("scope") in ("withdrawn", "returned"):
            return gettext("The step “%(step)s” was sent back", step=step), True
        return gettext("%(who)s reset the step “%(step)s”", who=actor, step=step), True
    if kind == "circle_withdrawn":
        if comment:
            return gettext("%(who)s took back “%(step)s” — “%(comment)s”", who=actor,
                           step=step, comment=comment), True
        return gettext("%(who)s took back “%(step)s”", who=actor, step=step), True
    if kind == "circle_returned" and data.get("to"):
        return _returned_to(data, actor, step, comment, inst, words), True
    if kind == "circle_returned":
        if comment:
            return gettext("%(who)s sent “%(step)s” back — “%(comment)s”", who=actor,
                           step=step, comment=comment), True
        return gettext("%(who)s sent “%(step)s” back", who=actor, step=step), True
    if kind == "task_claimed":
        return gettext("%(who)s took on “%(step)s”", who=actor, step=step), True
    if kind == "task_unclaimed":
        return gettext("%(who)s gave “%(step)s” back to its candidates", who=actor,
                       step=step), True
    if kind in HANDOVERS:
        return _handover(kind, data, actor, step, comment, words), True
    if kind == "task_escalated":
        return gettext("“%(step)s” is overdue and was passed on", step=step), True
    if kind in ("approval_signers_added", "approval_signers_removed"):
        return signers_sentence(kind, data, actor, step, words), True
    if kind == "comment":
        text = str(data.get("text") or "")
        if step:
            return gettext("%(who)s commented on “%(step)s”: “%(text)s”", who=actor,
                           step=step, text=text), True
        return gettext("%(who)s commented: “%(text)s”", who=actor, text=text), True
    if kind == "approval_refused":
        return gettext("A decision on “%(step)s” was not accepted", step=step), False
    if kind in ("cc_sent", "urge_sent"):
        return nudge_sentence(kind, data, actor if person else "", step, words), True
    return kind.replace("_", " "), False


SIGNERS_SAID = {  # (kind, where) -> the sentence without and with a comment
    ("approval_signers_added", "before"): (
        N_("%(who)s asked %(users)s to decide on “%(step)s” before them"),
        N_("%(who)s asked %(users)s to decide on “%(step)s” before them — “%(comment)s”")),
    ("approval_signers_added", "after"): (
        N_("%(who)s approved “%(step)s” and asked %(users)s to approve after them"),
        N_("%(who)s approved “%(step)s” and asked %(users)s to approve after them —"
           " “%(comment)s”")),
    ("approval_signers_added", "with"): (
        N_("%(who)s asked %(users)s to decide on “%(step)s” too"),
        N_("%(who)s asked %(users)s to decide on “%(step)s” too — “%(comment)s”")),
    ("approval_signers_removed", None): (
        N_("%(who)s no longer asks %(users)s about “%(step)s”"),
        N_("%(who)s no longer asks %(users)s about “%(step)s” — “%(comment)s”")),
}


def signers_sentence(kind: str, data: dict[str, Any], actor: str, step: str,
                     words: Words) -> str:
    """Signers added (before, after or with the addressee) or removed, in a sentence."""
    where = data.get("where") if kind == "approval_signers_added" else None
    plain, with_comment = SIGNERS_SAID.get((kind, where), SIGNERS_SAID[
        ("approval_signers_added", "with")])
    users = words.both([str(u) for u in data.get("users") or []])
    comment = str(data.get("comment") or "")
    return words.gettext(with_comment, who=actor, users=users, step=step, comment=comment) \
        if comment else words.gettext(plain, who=actor, users=users, step=step)


HANDOVERS = ("task_transferred", "task_delegated", "task_answered", "task_confirmed",
             "approval_transferred", "approval_delegated", "approval_answered",
             "approval_confirmed")  # transfer and delegate (SPEC §15)


def _handover(kind: str, data: dict[str, Any], actor: str, step: str, comment: str,
              words: Words) -> str:
    """The history sentence of a transfer or a delegation, of a task or an approval."""
    to = str(data.get("to") or "")
    said = {
        "task_transferred": (N_("%(who)s handed “%(step)s” to %(to)s"),
                             N_("%(who)s handed “%(step)s” to %(to)s — “%(comment)s”")),
        "approval_transferred": (
            N_("%(who)s transferred the approval of “%(step)s” to %(to)s"),
            N_("%(who)s transferred the approval of “%(step)s” to %(to)s — “%(comment)s”")),
        "task_delegated": (N_("%(who)s asked %(to)s to answer “%(step)s” for them"),
                           N_("%(who)s asked %(to)s to answer “%(step)s” for them —"
                              " “%(comment)s”")),
        "approval_delegated": (
            N_("%(who)s asked %(to)s to answer the approval of “%(step)s” for them"),
            N_("%(who)s asked %(to)s to answer the approval of “%(step)s” for them —"
               " “%(comment)s”")),
    }
    if kind in said:
        plain, with_comment = said[kind]
        return words.gettext(with_comment, who=actor, step=step, to=to, comment=comment) \
            if comment else words.gettext(plain, who=actor, step=step, to=to)
    if kind == "task_answered":
        return words.gettext("%(who)s answered “%(step)s” for %(owner)s", who=actor,
                             step=step, owner=str(data.get("for") or ""))
    if kind == "approval_answered":
        answer = {"approved": N_("%(who)s suggested approving “%(step)s” for %(owner)s"),
                  "rejected": N_("%(who)s suggested rejecting “%(step)s” for %(owner)s")}
        text = words.gettext(answer.get(str(data.get("decision")), answer["approved"]),
                             who=actor, step=step, owner=str(data.get("for") or ""))
        return words.gettext("%(said)s — “%(comment)s”", said=text, comment=comment) \
            if comment else text
    delegate = str(data.get("delegate") or "")
    if data.get("confirmed"):
        return words.gettext("%(who)s confirmed %(delegate)s's answer on “%(step)s”",
                             who=actor, delegate=delegate, step=step)
    return words.gettext("%(who)s answered “%(step)s” differently from %(delegate)s",
                         who=actor, delegate=delegate, step=step)


def nudge_sentence(kind: str, data: dict[str, Any], who: str, step: str,
                   words: Words = ENGLISH) -> str:
    """A copy or an urge in the history (SPEC §15): who copied or urged whom, about which
    step, with the comment; `who` "" when bpflow sent it (a circle's `cc`, `remind`)."""
    gettext = words.gettext
    users = data.get("users")
    whom = words.both([str(u) for u in users]) if isinstance(users, list) and users else \
        gettext("nobody")
    comment = str(data.get("comment") or "")
    if kind == "cc_sent":
        said = (gettext("%(who)s copied %(whom)s", who=who, whom=whom) if who else
                gettext("“%(step)s” was copied to %(whom)s", step=step, whom=whom))
    elif who:
        said = gettext("%(who)s urged %(whom)s to act on “%(step)s”", who=who, whom=whom,
                       step=step)
    else:
        said = gettext("%(whom)s got a reminder of “%(step)s”", whom=whom, step=step)
    return gettext("%(said)s — “%(comment)s”", said=said, comment=comment) if comment \
        else said


@dataclass
class CopyView:
    """Someone copied on the flow (SPEC §15) and whether they read it."""

    user: str = ""
    step: str = ""  # the step whose `cc` copied them; "" for an ad hoc copy
    sent: str = ""  # ISO
    read: str = ""  # ISO; "" until they open the flow or the mail


def copy_views(rows: list[dict[str, Any]], inst: Instance, words: Words = ENGLISH
               ) -> list[CopyView]:
    """`Store.copies` for the flow page, each person once per step."""
    return [CopyView(user=r["user"],
                     step=step_name(inst, r["circle"], words)
                     if r["circle"] in inst.circles else "",
                     sent=iso_text(r["sent_at"]), read=iso_text(r["read_at"]))
            for r in rows]


def nudge_fields(store: Store, caller: Caller, inst: Instance, words: Words = ENGLISH
                 ) -> dict[str, Any]:
    """The flow page's copies and urge (SPEC §15), as `FlowState` keeps them: who was
    copied and who read it (the caller's own copies read now: they opened the flow),
    whether the caller may urge and copy, and when they may urge again ("" now)."""
    rows = nudging.copies(store, inst.id)
    if nudging.read_copies(store, caller, inst.id, rows):
        rows = nudging.copies(store, inst.id)
    engine = store.engine
    may_urge = inst.status in ACTIVE and access.may_urge(caller, inst) and \
        nudging.urgeable(store, engine, inst, caller)
    wait = nudging.urge_wait(engine, inst) if may_urge else 0
    return {"copies": copy_views(rows, inst, words), "can_urge": may_urge,
            "urge_at": iso_text(engine.clock() + timedelta(seconds=wait)) if wait else "",
            "can_copy": access.may_copy(caller, inst)}


def _returned_to(data: dict[str, Any], actor: str, step: str, comment: str, inst: Instance,
                 words: Words) -> str:
    """A return to a chosen step (SPEC §15) in a sentence: "ann returned “The manager
    approves” to “Fill in the claim” — “please attach the receipt”"."""
    to = str(data.get("to"))
    target = words.gettext("the beginning") if to == "@start" else \
        words.gettext("“%(step)s”", step=step_name(inst, to, words))
    if comment:
        return words.gettext("%(who)s returned “%(step)s” to %(target)s — “%(comment)s”",
                             who=actor, step=step, target=target, comment=comment)
    return words.gettext("%(who)s returned “%(step)s” to %(target)s", who=actor, step=step,
                         target=target)


def _decision(d: dict[str, Any], step: str, words: Words) -> str:
    who, comment = str(d.get("approver") or ""), str(d.get("comment") or "")
    said = {"approved": (N_("%(who)s approved “%(step)s”"),
                         N_("%(who)s approved “%(step)s” — “%(comment)s”")),
            "rejected": (N_("%(who)s rejected “%(step)s”"),
                         N_("%(who)s rejected “%(step)s” — “%(comment)s”")),
            "returned": (N_("%(who)s sent “%(step)s” back"),
                         N_("%(who)s sent “%(step)s” back — “%(comment)s”"))}
    plain, with_comment = said.get(str(d.get("decision")), said["approved"])
    return words.gettext(with_comment, who=who, step=step, comment=comment) if comment else \
        words.gettext(plain, who=who, step=step)


def history_rows(events: list[dict[str, Any]], inst: Instance | None = None,
                 words: Words = ENGLISH, limit: int = 300) -> list[HistoryRow]:
    """Newest first, at most `limit`; each told in `words` when the instance is given."""
    rows = []
    for e in reversed(events[-limit:]):
        text, plain = sentence(e, inst, words) if inst is not None else ("", True)
        rows.append(HistoryRow(seq=e["seq"], at=iso_text(e["at"]),
                               kind=e["kind"].replace("_", " "), actor=e.get("actor") or "",
                               circle=e.get("circle") or "", detail=_detail(e), text=text,
                               plain=plain))
    return rows
