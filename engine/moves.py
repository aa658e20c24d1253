"""Allowed moves as data (SPEC §4), applied and recorded in one place.

Like Prefect's orchestration rules, each move names the states it may start from, the state
it leads to and the history event it writes. The functions here are the only code that
changes a circle's state or an instance's status, so a forbidden move always fails the same
way (a `TransitionError` naming instance, circle and state) and every change leaves an event
with its before and after. They decide nothing about *when* to move: that is the engine's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from engine.errors import TransitionError
from engine.instance import (
    FAILED,
    FAILURE,
    RUNNING,
    SKIPPED,
    SUCCESS,
    SUSPENDED,
    TERMINATED,
    WAITING,
    CircleRun,
    Event,
    Instance,
)
from engine.messages import N_, word
from engine.phase import staged_form

Clock = Callable[[], datetime]

# move -> (states it may start from, state it leads to, history event)
CIRCLE_MOVES: dict[str, tuple[frozenset[str], str, str]] = {
    "succeed": (frozenset({WAITING}), SUCCESS, "circle_succeeded"),
    "fail": (frozenset({WAITING}), FAILURE, "circle_failed"),
    "retry": (frozenset({WAITING}), WAITING, "circle_retry_scheduled"),
    "skip": (frozenset({WAITING}), SKIPPED, "circle_skipped"),
    "reset": (frozenset({WAITING, SUCCESS, FAILURE, SKIPPED}), WAITING, "circle_reset"),
}
INSTANCE_MOVES: dict[str, tuple[frozenset[str], str, str]] = {
    "suspend": (frozenset({RUNNING, FAILED}), SUSPENDED, "instance_suspended"),
    "resume": (frozenset({SUSPENDED}), RUNNING, "instance_resumed"),
    "abort": (frozenset({RUNNING, FAILED, SUSPENDED}), TERMINATED, "instance_terminated"),
}
ACTIVE = frozenset({RUNNING, FAILED})  # statuses in which circles can move


def instance_moves(status: str) -> tuple[str, ...]:
    """The instance moves allowed from `status`, in the table's order (what a page offers)."""
    return tuple(move for move, (allowed, _, _) in INSTANCE_MOVES.items() if status in allowed)


def emit(inst: Instance, clock: Clock, kind: str, actor: str | None,
         circle: str | None = None, before: dict | None = None, after: dict | None = None,
         data: dict | None = None) -> None:
    """Append one history event; every change to an instance goes through here."""
    inst.seq += 1
    inst.updated_at = clock()
    inst.events.append(Event(inst.seq, inst.updated_at, kind, actor, circle, before, after,
                             data or {}))


def move_circle(inst: Instance, clock: Clock, cid: str, move: str, actor: str | None,
                data: dict | None = None, **changes: Any) -> None:
    """Apply one circle move from CIRCLE_MOVES and record it."""
    allowed, target, event = CIRCLE_MOVES[move]
    run = inst.circles[cid]
    if run.state not in allowed:
        raise TransitionError(N_("circle '%(uri)s' cannot %(move)s from %(state)s", uri=cid,
                                 move=word(move), state=word(run.state)),
                              instance=inst.id, circle=cid, state=run.state)
    before = run.snapshot()
    if move == "reset":
        inst.circles[cid] = run = CircleRun(epoch=run.epoch + 1)
    else:
        if move == "retry":  # a new attempt: new bookmark, the staged form stays
            run.epoch += 1
            run.ready_at = run.due_at = None
            run.task = None  # the next attempt's candidates are resolved when it is ready
            form = staged_form(run)
            run.pending = None if form is None else {"form": form}
        for key, value in changes.items():
            setattr(run, key, value)
    run.state = target
    if target != WAITING:  # the circle leaves waiting: its `leave` goes with the event
        leave = inst.template.plan.nodes[cid].circle.leave
        if leave is not None:
            data = {**(data or {}), "leave": leave}
    emit(inst, clock, event, actor, cid, before, run.snapshot(), data)


def move_instance(inst: Instance, clock: Clock, move: str, actor: str | None,
                  reason: str | None = None) -> None:
    """Apply one instance move from INSTANCE_MOVES (suspend, resume, abort) and record it."""
    allowed, target, event = INSTANCE_MOVES[move]
    if inst.status not in allowed:
        raise TransitionError(N_("cannot %(move)s an instance that is %(status)s",
                                 move=word(move), status=word(inst.status)),
                              instance=inst.id, state=inst.status)
    before = {"status": inst.status}
    inst.status = target
    if reason is not None:
        inst.reason = reason
    emit(inst, clock, event, actor, before=before, after={"status": target},
         data={"reason": reason} if reason else None)


def set_status(inst: Instance, clock: Clock, status: str, reason: str | None,
               actor: str | None) -> None:
    """Set the status the terminal (or a reset) calls for; recorded only when it changes."""
    if inst.status != status:
        before = {"status": inst.status}
        inst.status, inst.reason = status, reason
        emit(inst, clock, f"instance_{status}", actor, before=before,
             after={"status": status}, data={"reason": reason} if reason else None)


def fail_circle(inst: Instance, clock: Clock, cid: str, reason: str, actor: str | None,
                retry: bool = True) -> None:
    """A failed attempt: retry after the next wait of the circle's list (its nested circles
    start over), or fail for good once the list is used up or `retry` is off."""
    plan = inst.template.plan
    run = inst.circles[cid]
    waits = plan.nodes[cid].circle.retry
    if retry and run.attempts < len(waits):
        at = clock() + timedelta(seconds=waits[run.attempts])
        move_circle(inst, clock, cid, "retry", actor, data={"reason": reason},
                    attempts=run.attempts + 1, next_attempt_at=at, reason=reason)
        for child in plan.descendants(cid):
            if not inst.circles[child].pristine:
                move_circle(inst, clock, child, "reset", actor,
                            data={"origin": cid, "scope": "retry"})
    else:
        move_circle(inst, clock, cid, "fail", actor, attempts=run.attempts + 1, reason=reason,
                    next_attempt_at=None)


def skip_circle(inst: Instance, clock: Clock, cid: str, actor: str | None, why: str) -> None:
    """Skip a circle and, for a flow circle, every nested circle still waiting."""
    move_circle(inst, clock, cid, "skip", actor, data={"why": why})
    for child in inst.template.plan.descendants(cid):
        if inst.circles[child].state == WAITING:
            move_circle(inst, clock, child, "skip", actor, data={"why": f"'{cid}' was skipped"})


def reset_reach(inst: Instance, cid: str, scope: str, levels: int | None = None) -> list[str]:
    """The circles a reset from `cid` sends back to waiting, in flow order: the scope's
    targets (the circle, its ancestors up to `levels`, or all) and everything downstream
    of them that has been touched."""
    plan = inst.template.plan
    if scope == "self":
        targets = {cid}
    elif scope == "levels":
        if isinstance(levels, bool) or not isinstance(levels, int) or levels < 0:
            raise ValueError("levels must be an integer of 0 or more")
        targets = plan.ancestors(cid, levels)
    elif scope == "all":
        targets = set(plan.nodes)
    else:
        raise ValueError(f"unknown reset scope {scope!r} (expected self, levels or all)")
    closure = plan.downstream(targets)
    return [n for n in plan.order if n in closure and not inst.circles[n].pristine]
