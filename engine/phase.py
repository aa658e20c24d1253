"""The stage a circle's box is in during its current attempt, decoded in one place.

A box is a form layer (a form or a confirmation) and/or an action layer. While the circle
waits, `CircleRun.pending` records the action layer's progress: `{"form": values}` once
the form that feeds an action was sent (staged for the action), `{"approval": ...}` once
approval mail is out. Everything that asks "whose turn is it?" (the worker, the API's
rule of who may complete a circle by hand, the mailbox, the pages) asks `box_phase`.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from engine.definition import Box
from engine.instance import WAITING, CircleRun


class Phase(Enum):
    IDLE = "idle"  # not waiting (finished), or a marker with nothing to run
    INPUT = "input"  # waits for a person: a form or a confirmation not yet sent
    DUE = "due"  # the action may run now: it needs no form, or its form was sent
    APPROVAL = "approval"  # approval mail is out; waits for the approvers' decisions
    STARTED = "started"  # another action has started and waits for the outside world


def box_phase(box: Box, run: CircleRun) -> Phase:
    """Where the box of a circle is in its current attempt (whether the circle is ready is
    the engine's other question: `Engine.ready`)."""
    if run.state != WAITING:
        return Phase.IDLE
    pending = run.pending
    if pending is None:
        if box.form or box.confirm is not None:
            return Phase.INPUT
        return Phase.DUE if box.action is not None else Phase.IDLE
    if "approval" in pending:
        return Phase.APPROVAL
    if "form" in pending and len(pending) == 1:
        return Phase.DUE
    return Phase.STARTED


def action_started(run: CircleRun) -> bool:
    """Whether the action layer has begun in this attempt (its form was sent, or the
    action runs or waits); a finished attempt keeps the answer it ended with."""
    return run.pending is not None


def staged_form(run: CircleRun) -> dict[str, Any] | None:
    """The form values staged for the circle's action (None before the form is sent)."""
    pending = run.pending
    return pending["form"] if pending and "form" in pending else None


def action_extra(run: CircleRun) -> dict[str, Any] | None:
    """The extra placeholder scope an action is rendered with (`${form.x}`)."""
    form = staged_form(run)
    return None if form is None else {"form": form}


def work_recorded(run: CircleRun) -> bool:
    """Whether the action layer recorded anything it waits on (an action may start and
    record nothing)."""
    return bool(run.pending)


def signal_wait(run: CircleRun) -> dict[str, Any] | None:
    """The signal (`{"name", "key"}`) a signal action's circle waits for, if any."""
    pending = run.pending
    return pending.get("signal") if pending else None


def wait_for_signal(run: CircleRun, name: str, key: str) -> dict[str, Any]:
    """Record that the circle's action waits for a signal from now on; returns the wait."""
    wait = {"name": name, "key": key}
    run.pending = {"signal": wait}
    return wait


def approval(run: CircleRun) -> dict[str, Any] | None:
    """The approval in progress (approvers, quorum, mails), if any."""
    pending = run.pending
    return pending.get("approval") if pending else None


def public_pending(run: CircleRun) -> dict[str, Any] | None:
    """What the action layer is waiting on, as the API shows it (the staged form stays
    private)."""
    pending = run.pending
    if not pending or run.state != WAITING:
        return None
    return {k: v for k, v in pending.items() if k != "form"} or {"form_submitted": True}
