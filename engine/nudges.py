"""Copies and reminders of a circle (SPEC §15): CC (抄送), urge (催办) and `remind`.

A circle's run keeps what was sent about its current attempt in `CircleRun.nudges`
(replaced, never changed in place): `cc` the epoch whose copies went out, `urged_at`
when a person last urged it, `reminded_at` when `remind` last reminded it. The engine
says what is owed and when (`cc_owed`, `next_reminder`, `Engine.wake_at` asks them); the
services send the mail and record it here (`sent_cc`, `urged`, `reminded`), each a
history event.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from engine.definition import Circle
from engine.instance import SUCCESS, TERMINATED, WAITING, CircleRun, Instance, iso, parse_time
from engine.moves import Clock, emit
from engine.phase import Phase, box_phase

URGE_EVERY = timedelta(hours=1)  # a circle is urged by a person at most once an hour


def waits_for_people(circle: Circle, run: CircleRun) -> bool:
    """Whether a ready circle's attempt waits for people: a task not yet answered, or an
    approval whose mail is out (whether it is ready is the engine's `ready`)."""
    phase = box_phase(circle.box, run)
    return (phase is Phase.INPUT and run.task is not None) or phase is Phase.APPROVAL


def _get(run: CircleRun, key: str) -> Any:
    return (run.nudges or {}).get(key)


def _set(run: CircleRun, **values: Any) -> None:
    run.nudges = {**(run.nudges or {}), **values}


def cc_owed(circle: Circle, run: CircleRun) -> bool:
    """Whether the circle's `cc` is due and not sent for this attempt: once it became ready
    (`on` "ready") or succeeded ("done")."""
    cc = circle.cc
    if cc is None or _get(run, "cc") == run.epoch:
        return False
    if cc.on == "done":
        return run.state == SUCCESS
    return run.ready_at is not None and run.state in (WAITING, SUCCESS)


def owed(inst: Instance) -> list[str]:
    """The circles whose copies are owed (the worker sends them): of a running flow, or
    of one that completed (a copy `on` "done" of its last circle); none once terminated."""
    if inst.status == TERMINATED:
        return []
    nodes = inst.template.plan.nodes
    return [cid for cid in inst.template.plan.copying
            if cc_owed(nodes[cid].circle, inst.circles[cid])]


def owed_times(inst: Instance) -> list[datetime]:
    """When each copy owed became due."""
    return [inst.circles[cid].ready_at or inst.updated_at for cid in owed(inst)]


def sent_cc(inst: Instance, clock: Clock, cid: str | None, users: list[str], actor: str | None,
            comment: str | None = None, problem: str | None = None) -> None:
    """Record copies sent: the circle's own `cc` (`cid` a circle: its attempt is done with)
    or an ad hoc one (`cid` None)."""
    if cid is not None:
        run = inst.circles[cid]
        _set(run, cc=run.epoch)
    data: dict[str, Any] = {"users": users}
    if comment:
        data["comment"] = comment
    if problem:
        data["problem"] = problem
    emit(inst, clock, "cc_sent", actor, cid, data=data)


def urge_wait(run: CircleRun, now: datetime) -> float:
    """Seconds until a person may urge the circle again (0: now)."""
    last = parse_time(_get(run, "urged_at"))
    if last is None or now - last >= URGE_EVERY:
        return 0.0
    return (last + URGE_EVERY - now).total_seconds()


def urged(inst: Instance, clock: Clock, cid: str, users: list[str], actor: str | None,
          comment: str | None = None) -> None:
    """A person urged the people circle `cid` waits for."""
    run = inst.circles[cid]
    _set(run, urged_at=iso(clock()))
    data: dict[str, Any] = {"users": users}
    if comment:
        data["comment"] = comment
    emit(inst, clock, "urge_sent", actor, cid, data=data)


def next_reminder(circle: Circle, run: CircleRun) -> datetime | None:
    """When `remind` next reminds a ready circle's people (None: never again this
    attempt): `before_due` once, `every` from when it became ready or was last reminded."""
    remind, ready = circle.remind, run.ready_at
    if remind is None or ready is None or not waits_for_people(circle, run):
        return None
    last = parse_time(_get(run, "reminded_at"))
    if last is not None and last < ready:
        last = None  # a reminder of an earlier attempt
    times = []
    if remind.before_due is not None and circle.due is not None:
        at = ready + timedelta(seconds=max(circle.due - remind.before_due, 0))
        if last is None or last < at:
            times.append(at)
    if remind.every is not None:
        times.append((last or ready) + timedelta(seconds=remind.every))
    return min(times, default=None)


def reminded(inst: Instance, clock: Clock, cid: str, users: list[str],
             actor: str | None = "worker") -> None:
    """`remind` reminded the people circle `cid` waits for."""
    _set(inst.circles[cid], reminded_at=iso(clock()))
    emit(inst, clock, "urge_sent", actor, cid, data={"users": users, "remind": True})
