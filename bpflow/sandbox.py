"""Try it (SPEC §16): a draft run in a sandbox instance before anyone depends on it.

A draft has at most one sandbox (a new start replaces it), started by whoever tries it
from the draft's body as it is then (`Store.start_sandbox`: analysed first, no version
made). No other rule reaches a sandbox (`bpflow.access.same_tenant`): it is in no list,
count, feed, webhook or quota, the worker never runs it, nobody is mailed or asked, and
the worker deletes it a day after it started (`bpflow.expiry`). Who may try a draft is
`bpflow.access.may_try`'s: its author and the admins of its tenant.

The designer drives it here, circle by circle, each move one durable step:

- `fill`: a ready form or confirmation is sent with the values given (checked as a
  person's would be; a form feeding an action stages them for it);
- `decide`: an approval is approved, rejected or sent back by the designer, with a
  comment (the result an approval's mail would give, `bpflow.mailbox.conclude`; a
  return as a real one, `bpflow.mailbox.send_back_step`, to any step
  `return_targets` lists, `bpflow.moves.returns.described_targets`);
- `answer`: an HTTP action gets the status and JSON body the designer gives (what an
  answer received would mean, `bpflow.actions.answered`; nothing is sent), a mail action
  is done without mailing anyone, a signal arrives with the data given;
- `fire`: what waits for the clock happens now (a timer box, a timeout, a retry, a
  reminder): time jumps to that moment for this instance.

`state` answers every circle's state, what may be done with it, and the path taken.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

from bpflow import access, limits
from bpflow.access import Caller
from bpflow.actions import answered
from bpflow.errors import Conflict, NotFound, Refused
from bpflow.interactions import Interactions
from bpflow.mailbox import conclude, send_back_step
from bpflow.moves.returns import described_targets
from bpflow.store import Store
from engine import nudges
from engine.errors import ReturnTargetError, VariableError
from engine.instance import WAITING, Instance
from engine.messages import N_
from engine.phase import Phase, action_extra, approval, box_phase, signal_wait
from engine.runtime import Engine

log = logging.getLogger("bpflow.sandbox")
KEPT = timedelta(days=1)  # a sandbox is deleted this long after it started
MAX_COMMENT = 2000  # characters of a decision's comment
MAX_ANSWER_BYTES = 64 * 1024  # an answer's body (or a signal's data) as compact JSON
DECISIONS = ("approved", "rejected", "returned")
# what the designer may do with a circle now (`state`'s "can")
FILL, DECIDE, ANSWER, FIRE = "fill", "decide", "answer", "fire"
# the history's moves of a circle, as the path draws them
PATH = {"circle_succeeded": "success", "circle_failed": "failure", "circle_skipped": "skipped",
        "circle_reset": "waiting", "circle_retry_scheduled": "waiting"}


# ------------------------------------------------------------------ the sandbox
def start(store: Store, caller: Caller, draft_id: int,
          inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start the draft's body in its sandbox (in place of the one it had), as the caller:
    its state. 422 with the analysis' errors while it has any, or for bad inputs."""
    row = _draft(store, caller, draft_id)
    if inputs is not None:
        limits.check(inputs)
    store.start_sandbox(_key(draft_id), row["body"], inputs, caller.as_user())
    log.info("draft %s tried by %s", draft_id, caller.username)
    return state(store, caller, draft_id)


def state(store: Store, caller: Caller, draft_id: int) -> dict[str, Any]:
    """The sandbox as the canvas draws it: its status, each circle's state and what the
    designer may do with it (`can`; `fires_at` for `fire`), and the path taken (each
    circle leaving or going back to waiting, in order)."""
    inst = _instance(store, caller, draft_id)
    engine = store.engine
    circles = {}
    for cid, shown in engine.view(inst).items():
        can = _can(engine, inst, cid)
        at = fire_at(inst, cid)
        circles[cid] = {"state": shown["state"], "ready": shown["ready"],
                        "blocked": shown["blocked"], "result": shown["result"],
                        "reason": shown["reason"], "attempts": shown["attempts"],
                        "can": can + ([FIRE] if at is not None else []),
                        "fires_at": at.isoformat() if at is not None else None}
    path = [{"uri": e["circle"], "state": PATH[e["kind"]], "at": e["at"]}
            for e in store.history(inst.id, PATH)]
    return {"draft": draft_id, "instance": inst.id, "status": inst.status,
            "reason": inst.reason, "started_at": inst.created_at.isoformat(),
            "expires_at": (inst.created_at + KEPT).isoformat(), "circles": circles,
            "path": path}


def delete(store: Store, caller: Caller, draft_id: int) -> None:
    """Delete the draft's sandbox (NotFound when it has none)."""
    _draft(store, caller, draft_id)
    if not store.delete_sandbox(_key(draft_id)):
        raise NotFound(N_("draft %(id)s is not being tried", id=draft_id))


# ------------------------------------------------------------------ driving it
def fill(store: Store, caller: Caller, draft_id: int, uri: str,
         values: dict[str, Any]) -> dict[str, Any]:
    """Send a ready form or confirmation with `values` (422 with each field's problem)."""
    inst = _instance(store, caller, draft_id)
    limits.check(values)
    interactions = Interactions(store)

    def op(engine: Engine, now: Instance) -> None:
        _needs(engine, now, uri, FILL, N_("circle '%(uri)s' waits for no form now"))
        interactions.step(uri, engine.bookmark(now, uri), values, caller.username)(engine, now)
    store.apply(inst.id, op)
    return state(store, caller, draft_id)


def decide(store: Store, caller: Caller, draft_id: int, uri: str, decision: str,
           comment: str = "", to: str | None = None) -> dict[str, Any]:
    """Approve, reject or send back (`returned`: to `to`, any step `return_targets`
    lists, else the step before) a ready approval, with a comment, as its approvers
    would: nobody is asked or mailed."""
    if decision not in DECISIONS:
        raise Refused(N_("decision must be 'approved', 'rejected' or 'returned'"))
    if len(comment) > MAX_COMMENT:
        raise Refused(N_("a comment has at most %(n)s characters", n=MAX_COMMENT))
    if to is not None and decision != "returned":
        raise ReturnTargetError(N_("'to' goes with the decision 'returned' only"))
    inst = _instance(store, caller, draft_id)
    actor = caller.username

    def deciding(now: Instance) -> None:
        _needs(store.engine, now, uri, DECIDE, N_("circle '%(uri)s' waits for no approval now"))
        if decision == "returned":
            _asked(store.engine, now, uri, actor)
    if decision == "returned":  # as a real return, in the same step as `deciding`
        send_back_step(store, inst.id, uri, caller, comment, to, deciding)
        return state(store, caller, draft_id)

    def op(engine: Engine, now: Instance) -> None:
        deciding(now)
        conclude(engine, now, uri, decision, [{"approver": actor, "decision": decision,
                                               "comment": comment}], actor)
    store.apply(inst.id, op)
    return state(store, caller, draft_id)


def return_targets(store: Store, caller: Caller, draft_id: int, uri: str,
                   lang: str | None = None) -> list[dict[str, str]]:
    """Where a ready approval of the sandbox may be sent back to (`decide`'s `to`), as
    for a real flow (`bpflow.moves.returns.described_targets`): each succeeded step
    upstream, then `@start`, described in `lang`."""
    inst = _instance(store, caller, draft_id)
    _needs(store.engine, inst, uri, DECIDE, N_("circle '%(uri)s' waits for no approval now"))
    _asked(store.engine, inst, uri, caller.username)  # on this copy only: nothing is kept
    return described_targets(store.engine, inst, uri, lang)


def answer(store: Store, caller: Caller, draft_id: int, uri: str, status: int | None = None,
           body: Any = None) -> dict[str, Any]:
    """The outside world's answer to a ready circle, given by the designer (nothing is
    sent anywhere): an HTTP action's `status` (200 unless given) and JSON `body`; a
    signal's data (`body`); a mail action is done (its recipients named, none mailed)."""
    limits.check(body)
    limits.small(body, N_("an answer"), MAX_ANSWER_BYTES)
    inst = _instance(store, caller, draft_id)
    actor = caller.username

    def op(engine: Engine, now: Instance) -> None:
        _needs(engine, now, uri, ANSWER, N_("circle '%(uri)s' waits for no answer now"))
        run, mark = now.circles[uri], engine.bookmark(now, uri)
        action = now.template.plan.nodes[uri].circle.box.action or {}
        if action.get("type") == "signal":
            engine.complete(now, uri, mark, body, actor)
            return
        try:
            rendered = engine.render(now, uri, action, action_extra(run))
        except VariableError as exc:  # as the worker would: the circle fails, saying why
            engine.fail(now, uri, mark, str(exc), actor)
            return
        if rendered["type"] == "mail":
            to = rendered.get("to")
            engine.complete(now, uri, mark, {"sent_to": [to] if isinstance(to, str)
                                             else list(to or []), "mails": []}, actor)
            return
        method = str(rendered.get("method", "GET")).upper()
        outcome = answered(method, str(rendered.get("url", "")), 200 if status is None
                           else status, body, "" if body is None else _text(body))
        if outcome.ok:
            engine.complete(now, uri, mark, outcome.result, actor)
        else:
            engine.fail(now, uri, mark, outcome.reason, actor)
    store.apply(inst.id, op)
    return state(store, caller, draft_id)


def fire(store: Store, caller: Caller, draft_id: int, uri: str) -> dict[str, Any]:
    """What circle `uri` waits for the clock for happens now: time jumps, for this
    instance, to the moment its timer fires, its timeout passes, its retry is due or its
    reminder goes (recorded; nobody is mailed), and everything due by then happens."""
    inst = _instance(store, caller, draft_id)
    actor = caller.username

    def op(engine: Engine, now: Instance) -> None:
        if uri not in now.circles:
            raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
        at = fire_at(now, uri)
        if at is None:
            raise Conflict(N_("circle '%(uri)s' waits for no timer now", uri=uri))
        moment = max(at, engine.clock())
        later = Engine(engine.key, lambda: moment)
        circle, run = now.template.plan.nodes[uri].circle, now.circles[uri]
        if nudges.next_reminder(circle, run) == at:
            task = run.task or {}
            nudges.reminded(now, later.clock, uri, [task["assignee"]] if task.get("assignee")
                            else list(task.get("users", [])), actor)
        later.tick(now, actor)
    store.apply(inst.id, op)
    return state(store, caller, draft_id)


def fire_at(inst: Instance, cid: str) -> datetime | None:
    """When what circle `cid` waits for the clock for happens: its timer, its timeout
    (unless escalated already), its retry, its next reminder; None: nothing."""
    run, circle = inst.circles[cid], inst.template.plan.nodes[cid].circle
    if run.state != WAITING or inst.status not in ("running",):
        return None
    times = [t for t in (run.next_attempt_at, run.due_at) if t is not None]
    if run.ready_at is not None:
        if circle.timeout is not None and not (run.task or {}).get("escalated"):
            times.append(run.ready_at + timedelta(seconds=circle.timeout.seconds))
        reminder = nudges.next_reminder(circle, run)
        if reminder is not None:
            times.append(reminder)
    return min(times, default=None)


# ------------------------------------------------------------------ helpers
def _key(draft_id: int) -> str:
    return str(draft_id)


def _draft(store: Store, caller: Caller, draft_id: int) -> dict[str, Any]:
    """The draft's row if the caller may try it (NotFound otherwise, whether or not it
    exists; Forbidden for who may design nothing)."""
    access.require_designer(caller)
    row = store.draft(draft_id)
    if row is None or not access.may_try(caller, row["tenant"], row["author_id"]):
        raise NotFound(N_("no draft %(id)s", id=draft_id))
    return row


def _instance(store: Store, caller: Caller, draft_id: int) -> Instance:
    _draft(store, caller, draft_id)
    iid = store.sandbox(_key(draft_id))
    if iid is None:
        raise NotFound(N_("draft %(id)s is not being tried", id=draft_id))
    return store.get(iid)


def _can(engine: Engine, inst: Instance, cid: str) -> list[str]:
    """What the designer may do with circle `cid` now besides firing it (`fill`,
    `decide`, `answer`)."""
    if cid not in engine.ready(inst):
        return []
    run = inst.circles[cid]
    box = inst.template.plan.nodes[cid].circle.box
    phase, kind = box_phase(box, run), box.action_type
    if phase is Phase.INPUT:
        return [FILL]
    if phase is Phase.DUE:
        return [DECIDE] if kind == "approval" else [ANSWER] if kind in ("http", "mail") \
            else []
    if kind == "signal" and signal_wait(run) is not None:
        return [ANSWER]
    return []


def _asked(engine: Engine, inst: Instance, uri: str, actor: str) -> None:
    """A ready approval as the worker leaves it once its mail is out (its approvers
    asked; here nobody is mailed), which is where a return starts from
    (`engine.tasks.sendable`)."""
    run = inst.circles[uri]
    if approval(run) is not None:
        return
    action = inst.template.plan.nodes[uri].circle.box.action or {}
    try:
        to = engine.render(inst, uri, action.get("to"), action_extra(run))
    except VariableError:
        to = None
    approvers = [to] if isinstance(to, str) else [str(n) for n in to] \
        if isinstance(to, list) else []
    engine.mark_pending(inst, uri, engine.bookmark(inst, uri), {"approval": {
        "approvers": approvers, "quorum": action.get("quorum", "all"), "mails": []}}, actor)


def _needs(engine: Engine, inst: Instance, uri: str, move: str, why: str) -> None:
    """NotFound for a circle the draft has not, Conflict unless `move` may be made on it
    now (`why`, with its uri)."""
    if uri not in inst.circles:
        raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
    if move not in _can(engine, inst, uri):
        raise Conflict(N_(why, uri=uri))


def _text(body: Any) -> str:
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
