"""What each waiting circle is right now (SPEC §4): ready, pending, scheduled, blocked or dead.

The engine's `graphlib`-style question, answered as a pure function of an instance and the
time. Circles are visited in flow order, so each verdict can lean on the verdicts of the
circles above it; the answer is memoised on the instance until it changes or a retry
falls due.
"""

from __future__ import annotations

from datetime import UTC, datetime

from engine.instance import FAILURE, SKIPPED, SUCCESS, WAITING, Instance
from engine.plan import Node

# What a waiting circle is right now:
READY, PENDING, SCHEDULED, BLOCKED, DEAD = "ready", "pending", "scheduled", "blocked", "dead"


def statuses(inst: Instance, now: datetime) -> dict[str, str]:
    """What each waiting circle is: ready, pending, scheduled, blocked or dead."""
    memo = inst.memo
    if memo is not None and memo[0] == inst.seq and memo[1] <= now < memo[2]:
        return memo[3]  # nothing changed and no retry fell due since
    plan = inst.template.plan
    out: dict[str, str] = {}
    for nid in plan.order:
        run = inst.circles[nid]
        if run.state == WAITING:
            out[nid] = _status(plan.nodes[nid], inst, out, now)
    until = min((at for c, st in out.items() if st == SCHEDULED
                 and (at := inst.circles[c].next_attempt_at) is not None),
                default=datetime.max.replace(tzinfo=UTC))
    inst.memo = (inst.seq, now, until, out)
    return out


def _status(node: Node, inst: Instance, known: dict[str, str], now: datetime) -> str:
    if node.parent is not None:
        parent = inst.circles[node.parent]
        if parent.state != WAITING or parent.ready_at is None:
            return PENDING
    verdicts = [_group(g, inst, known) for g in node.deps]
    if BLOCKED in verdicts:  # one hopeless AND-group is enough
        return BLOCKED
    if PENDING in verdicts:  # a dead path is only skipped once nothing above waits
        return PENDING
    if DEAD in verdicts:
        return DEAD
    run = inst.circles[node.id]
    if run.next_attempt_at is not None and run.next_attempt_at > now:
        return SCHEDULED
    return READY


def _group(group: tuple[str, ...], inst: Instance, known: dict[str, str]) -> str:
    """An OR-group: satisfied by any success; dead when all skipped; blocked when
    nothing in it can still succeed; pending otherwise."""
    seen = []
    for member in group:
        state = inst.circles[member].state
        if state == SUCCESS:
            return READY
        if state == WAITING:
            state = {DEAD: SKIPPED, BLOCKED: FAILURE}.get(known.get(member, PENDING), WAITING)
        seen.append(state)
    if WAITING in seen:
        return PENDING
    return DEAD if all(s == SKIPPED for s in seen) else BLOCKED
