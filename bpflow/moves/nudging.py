"""Copies and urges (SPEC §15): CC (抄送), urge (催办) and a circle's `remind`, for the
REST API (`api/routes/instances.py`), the flow page and the worker alike.

- `copy`: an ad hoc copy, by the starter, an assignee or an admin: one mail of kind `cc`
  per person, instance and circle (idempotent), then the `cc_sent` event.
- `urge`: by the starter or an admin: a mail of kind `urge` to whoever each open circle
  waits for (its assignee, else its candidates, by name and by role; an approval's
  undecided approvers), at most once an hour per circle (RateLimited, 429 with the
  wait). The step records `urge_sent` and moves the circle's hour on before the mail
  goes, so two urges at once send one.
- For the worker (`owed_work` inside its step, `send_owed` after the batch's): a circle's `cc`
  once it is ready or done, and its `remind` reminders, the same urge mail sent by
  bpflow. A copy is recorded sent after its mail went (a worker dying between sends it
  again: one copy per person all the same); a reminder before (one dying then loses
  that reminder, never sends two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from bpflow import access
from bpflow.access import Caller
from bpflow.catalogs import translate
from bpflow.errors import Conflict, Forbidden, NotFound, RateLimited
from bpflow.forms import FormError
from bpflow.languages import LANGUAGES, pick
from bpflow.mailbox import Mailbox
from bpflow.moves.steps import returning, visible
from bpflow.store import Store
from engine import nudges
from engine.instance import Instance
from engine.messages import N_
from engine.phase import Phase, box_phase
from engine.runtime import Engine

MAX_COPIED = 50  # people one ad hoc copy names
MAX_COMMENT = 2000  # characters of a copy's or an urge's comment
MAX_AWAITED = 200  # people one urge or reminder of a circle goes to


@dataclass
class Owed:
    """What the worker's step found owed on an instance: copies to send (circle → the
    people), reminders recorded (the mails to send: `Mailbox.send_batch`'s)."""

    tenant: str
    instance: str
    copies: dict[str, list[str]] = field(default_factory=dict)
    reminders: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.copies or self.reminders)


# ------------------------------------------------------------------ whom
def existing(store: Store, names: list[str]) -> list[str]:
    """`names` that are enabled users of the store's tenant, in order, once each."""
    return [n for n in dict.fromkeys(names) if store.user(n) is not None]


def people(store: Store, users: list[str], roles: list[str] | tuple[str, ...]) -> list[str]:
    """The users named and those having one of `roles`, at most MAX_AWAITED."""
    names = list(users)
    for role in roles:
        names += store.usernames(role)
    return existing(store, names[:MAX_AWAITED * 2])[:MAX_AWAITED]


def awaited(store: Store, inst: Instance, cid: str) -> list[str]:
    """Whom a ready circle waits for: an approval's undecided approvers; a task's
    assignee, else its candidates."""
    circle, run = inst.template.plan.nodes[cid].circle, inst.circles[cid]
    if box_phase(circle.box, run) is Phase.APPROVAL:
        return existing(store, [r.payload["approver"] for r in store.attempt_approvals(
            inst.id, cid, run.epoch) if r.decision is None])
    task = run.task or {"users": [], "roles": [], "assignee": None}
    if task["assignee"]:
        return existing(store, [task["assignee"]])
    return people(store, task["users"], task["roles"])


def waiting(engine: Engine, inst: Instance) -> list[str]:
    """The ready circles of an instance that wait for people."""
    nodes = inst.template.plan.nodes
    return [cid for cid in engine.ready(inst)
            if nodes[cid].circle.box.action_type != "auth"
            and nudges.waits_for_people(nodes[cid].circle, inst.circles[cid])]


# ------------------------------------------------------------------ the mail's words
def _texts(kind: str, inst: Instance, cid: str | None, by: str | None,
           comment: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(subject, body) of a copy or an urge, in every language."""
    title = inst.template.title or inst.template.name
    node = inst.template.plan.nodes.get(cid) if cid else None
    step = (node.circle.description or cid) if node else ""
    subject, body = {}, {}
    for code in LANGUAGES:
        values: dict[str, Any] = {"title": pick(title, code), "user": by or "bpflow",
                                  "step": pick(step, code) if step else ""}
        if kind == "cc":
            subject[code] = translate(code, N_("Copy: %(title)s"), **values)
            text = translate(code, N_("%(user)s copied you on %(title)s (%(step)s).") if step
                             else N_("%(user)s copied you on %(title)s."), **values)
        else:
            subject[code] = translate(code, N_("Reminder: %(title)s waits for you"), **values)
            text = translate(code, N_("%(user)s urges you to act on %(step)s of %(title)s.")
                             if by else
                             N_("%(step)s of %(title)s still waits for you."), **values)
        body[code] = text + (f"\n\n{comment}" if comment else "")
    return subject, body


def _sender(caller: Caller | None) -> dict[str, Any]:
    return {"id": caller.id, "username": caller.username} if caller else {}


def _comment(comment: Any) -> str | None:
    if comment is None:
        return None
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT:
        raise FormError({"comment": N_("%(field)s must be at most %(n)s characters",
                                       field="comment", n=MAX_COMMENT)})
    return comment.strip() or None


# ------------------------------------------------------------------ CC
def copy(store: Store, caller: Caller, iid: str, users: Any,
         comment: Any = None) -> list[str]:
    """An ad hoc copy: each of `users` (existing users of the caller's tenant) gets one
    mail of kind `cc` about the instance, unless they have one; the names newly copied."""
    comment = _comment(comment)
    if not isinstance(users, list) or not users or len(users) > MAX_COPIED or not all(
            isinstance(u, str) and 0 < len(u) <= 100 for u in users):
        raise FormError({"users": N_("users must be a list of 1 to %(n)s usernames",
                                     n=MAX_COPIED)})
    inst = visible(store, caller, iid)
    if not access.may_copy(caller, inst):
        raise Forbidden(N_("only the flow's starter, one of its assignees or an admin may"
                           " copy people on it"))
    names = list(dict.fromkeys(u.strip() for u in users))
    unknown = [n for n in names if store.user(n) is None]
    if unknown:
        raise FormError({"users": N_("no user named %(name)s", name=", ".join(unknown[:5]))})
    subject, body = _texts("cc", inst, None, caller.username, comment)
    sent = Mailbox(store).copy(_sender(caller), names, subject, body, instance=iid,
                               payload_extra={"comment": comment} if comment else None)
    if sent:
        store.apply(iid, lambda e, i: nudges.sent_cc(i, e.clock, None, sent, caller.username,
                                                     comment))
    return sent


def copies(store: Store, iid: str) -> list[dict[str, Any]]:
    """Who was copied on an instance and whether they read it (the caller must see it:
    the route and the page ask first)."""
    return store.copies(iid)


def read_copies(store: Store, caller: Caller, iid: str,
                shown: list[dict[str, Any]] | None = None) -> bool:
    """The caller opened the instance: their copies of it are read. `shown`: the copies
    already read (`copies`), to write only when one of the caller's is unread."""
    rows = shown if shown is not None else store.copies(iid)
    if not any(r["user"] == caller.username and r["read_at"] is None for r in rows):
        return False
    store.read_copies(iid, caller.id)
    return True


# ------------------------------------------------------------------ urge
def urge(store: Store, caller: Caller, iid: str, comment: Any = None) -> dict[str, Any]:
    """Urge whoever each open circle waits for: {"circles": {uri: [people]}}; RateLimited
    when every open circle was urged less than an hour ago, Conflict when nothing waits
    for anyone."""
    comment = _comment(comment)
    visible(store, caller, iid)
    sent: dict[str, list[str]] = {}

    def op(engine: Engine, inst: Instance) -> None:
        sent.clear()  # a step lost to another runs again
        if not access.may_urge(caller, inst):
            raise Forbidden(N_("only the flow's starter (or an admin) may urge it"))
        now, waits = engine.clock(), []
        for cid in waiting(engine, inst):
            wait = nudges.urge_wait(inst.circles[cid], now)
            if wait:
                waits.append(wait)
                continue
            who = [n for n in awaited(store, inst, cid) if n != caller.username]
            if who:
                nudges.urged(inst, engine.clock, cid, who, caller.username, comment)
                sent[cid] = who
        if sent:
            return
        if waits:
            seconds = math.ceil(min(waits))
            raise RateLimited(N_("this flow was urged less than an hour ago; try again in"
                                 " %(n)s minutes", n=math.ceil(seconds / 60)), seconds)
        raise Conflict(N_("nothing in this flow waits for anyone to urge"))

    inst = store.apply(iid, returning(op))
    for cid, who in sent.items():
        _send_urge(store, inst, cid, who, caller, comment)
    return {"circles": sent}


def _send_urge(store: Store, inst: Instance, cid: str, who: list[str],
               by: Caller | None, comment: str | None) -> None:
    subject, body = _texts("urge", inst, cid, by.username if by else None, comment)
    Mailbox(store).send("urge", _sender(by), who, subject, body, instance=inst.id, circle=cid,
                        payload_extra={"comment": comment} if comment else None)


def urgeable(store: Store, engine: Engine, inst: Instance, caller: Caller) -> bool:
    """Whether an open step waits for someone besides the caller (an urge would reach
    someone)."""
    return any(n != caller.username for cid in waiting(engine, inst)
               for n in awaited(store, inst, cid))


def urge_wait(engine: Engine, inst: Instance) -> int:
    """Seconds until the starter may urge the flow again (0: now; also when nothing waits:
    the page shows its button by `waiting`)."""
    now = engine.clock()
    waits = [nudges.urge_wait(inst.circles[cid], now) for cid in waiting(engine, inst)]
    return 0 if not waits or 0 in waits else math.ceil(min(waits))


# ------------------------------------------------------------------ the worker's
def owed_work(store: Store, engine: Engine, inst: Instance) -> Owed:
    """Inside the worker's step (after time passed): the copies owed (their people
    resolved) and the reminders due, recorded now. `store`: the instance's tenant's."""
    owed, plan = Owed(inst.tenant, inst.id), inst.template.plan
    for cid in nudges.owed(inst) if plan.copying else ():
        cc = plan.nodes[cid].circle.cc
        assert cc is not None
        users: list[str] = []
        for entry in cc.users:
            value = engine.render(inst, cid, entry) if "${" in entry else entry
            users += [v for v in (value if isinstance(value, list) else [value])
                      if isinstance(v, str)]
        owed.copies[cid] = people(store, [u.strip() for u in users], cc.roles)
    if not plan.reminding:
        return owed
    now = engine.clock()
    for cid in plan.reminding:
        circle, run = plan.nodes[cid].circle, inst.circles[cid]
        at = nudges.next_reminder(circle, run)
        if at is None or at > now or cid not in engine.ready(inst):
            continue
        who = awaited(store, inst, cid)
        nudges.reminded(inst, engine.clock, cid, who)
        if who:
            subject, body = _texts("urge", inst, cid, None, None)
            owed.reminders.append({"to": who, "subject": subject, "body": body,
                                   "instance": inst.id, "circle": cid})
    return owed


def send_owed(store: Store, owed: list[Owed]) -> None:
    """After the worker's step on a batch: the reminders' mail, of every instance at once
    (one transaction per tenant), then each instance's copies, each recorded sent (for its
    circle's attempt) once its mail went."""
    tenants: dict[str, list[dict[str, Any]]] = {}
    for o in owed:
        tenants.setdefault(o.tenant, []).extend(o.reminders)
    for tenant, sends in tenants.items():
        if sends:
            Mailbox(store.of(tenant)).send_batch("urge", {}, sends)
    for o in owed:
        if o.copies:
            _send_copies(store.of(o.tenant), o)


def _send_copies(store: Store, owed: Owed) -> None:
    iid = owed.instance
    inst = store.get(iid)
    for cid, who in owed.copies.items():
        subject, body = _texts("cc", inst, cid, None, None)
        sent = Mailbox(store).copy({}, who, subject, body, instance=iid,
                                   circle=cid) if who else []

        def record(engine: Engine, inst: Instance, cid: str = cid, sent: list[str] = sent,
                   nobody: bool = not who) -> None:
            if cid in nudges.owed(inst):
                nudges.sent_cc(inst, engine.clock, cid, sent, "worker",
                               problem=N_("nobody to copy") if nobody else None)
        try:
            store.apply(iid, record)
        except NotFound:
            return
