"""People's work on a circle (SPEC §10): candidates, claims, transfer and
delegation, escalation, and
sending work back (withdraw, return).

A circle whose box waits for a person (`Circle.is_task`) gets a task when it becomes
ready: its candidates (`assign`'s users, with `${...}` resolved, and roles; without
`assign`, the starter, who then holds it), its assignee and its due time, kept on the
circle's run as `CircleRun.task`. The task is replaced on every change, never changed in
place, so a store comparing the run before and after sees it. Who may claim, delegate
or withdraw is `bpflow.access`'s question; the moves are here, each one a history event
naming its actor.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

from engine.definition import Assign
from engine.errors import ReturnTargetError, TransitionError, VariableError
from engine.instance import SUCCESS, WAITING, Instance, iso
from engine.messages import N_
from engine.moves import Clock, emit, move_circle, reset_reach
from engine.phase import Phase, box_phase
from engine.plan import Node

MAX_RESOLVED = 1000  # usernames one `assign` may resolve to


class Engine(Protocol):
    """What the moves here need of `engine.runtime.Engine` (which calls them)."""

    clock: Clock

    def ready(self, inst: Instance) -> list[str]: ...

    def render(self, inst: Instance, cid: str, value: Any,
               extra: dict[str, Any] | None = None) -> Any: ...


def task_for(engine: Engine, inst: Instance, node: Node, now: datetime) -> dict[str, Any]:
    """The task of a circle becoming ready (raises VariableError when a placeholder of
    `assign` does not resolve to usernames)."""
    circle = node.circle
    if circle.assign is None:
        starter = inst.user.get("username")
        users, roles = ([starter] if starter else []), []
    else:
        users, roles = resolve(engine, inst, node.id, circle.assign), list(circle.assign.roles)
    due = iso(now + timedelta(seconds=circle.due)) if circle.due is not None else None
    return {"users": users, "roles": roles, "assignee": sole(users, roles), "due_at": due,
            "escalated": False}


def sole(users: list[str], roles: list[str]) -> str | None:
    """A task naming one person and no role is theirs from the start."""
    return users[0] if len(users) == 1 and not roles else None


def resolve(engine: Engine, inst: Instance, cid: str, assign: Assign) -> list[str]:
    """`assign.users` with each `${...}` rendered: a username or a list of them."""
    out: list[str] = []
    for entry in assign.users:
        value = engine.render(inst, cid, entry) if "${" in entry else entry
        names = value if isinstance(value, list) else [value]
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise VariableError(entry, f"circle '{cid}': {entry} must name a user (a"
                                           f" username or a list of them), got {name!r:.60}")
            out.append(name.strip())
    if len(out) > MAX_RESOLVED:
        raise VariableError(assign.users[0], f"circle '{cid}': assign resolves to more than"
                                             f" {MAX_RESOLVED} users")
    return list(dict.fromkeys(out))


def open_task(engine: Engine, inst: Instance, cid: str) -> dict[str, Any]:
    """The task of a ready circle that still waits for its person (TransitionError
    otherwise: 409)."""
    node = inst.template.plan.nodes.get(cid)
    if node is None:
        raise TransitionError(N_("instance has no circle '%(uri)s'", uri=cid),
                              instance=inst.id, circle=cid)
    run = inst.circles[cid]
    if run.task is None or cid not in engine.ready(inst) or \
            box_phase(node.circle.box, run) is not Phase.INPUT:
        raise TransitionError(N_("circle '%(uri)s' is not waiting for a person", uri=cid),
                              instance=inst.id,
                              circle=cid, state=run.state)
    return run.task


def claim(engine: Engine, inst: Instance, cid: str, username: str, actor: str | None) -> bool:
    """`username` holds the task (nothing changes when they already do). False when
    someone else holds it."""
    task = open_task(engine, inst, cid)
    if task["assignee"] == username:
        return True
    if task["assignee"] is not None:
        return False
    _change(engine.clock, inst, cid, task, "task_claimed", actor, {"assignee": username})
    return True


def unclaim(engine: Engine, inst: Instance, cid: str, actor: str | None) -> None:
    """Give the task back to its candidates."""
    task = open_task(engine, inst, cid)
    if task["assignee"] is None:
        raise TransitionError(N_("nobody holds the task of circle '%(uri)s'", uri=cid),
                              instance=inst.id,
                              circle=cid)
    _change(engine.clock, inst, cid, task, "task_unclaimed", actor, {"assignee": None},
            {"from": task["assignee"]})


def transfer(engine: Engine, inst: Instance, cid: str, to: str, actor: str | None,
             comment: str | None = None) -> None:
    """Transfer (转办): hand the task to `to`, who then holds it (a delegate of the one
    who held it is asked no more)."""
    task = open_task(engine, inst, cid)
    _change(engine.clock, inst, cid, task, "task_transferred", actor,
            {"assignee": to, **({"delegate": None} if task.get("delegate") else {})},
            {"from": task["assignee"], "to": to, **({"comment": comment} if comment else {})})


def delegate(engine: Engine, inst: Instance, cid: str, to: str, actor: str | None,
             comment: str | None = None) -> None:
    """Delegate (委派): the assignee asks `to` to answer the task for them; the answer
    comes back to the assignee, who confirms it or answers differently (`answer`)."""
    task = open_task(engine, inst, cid)
    if task.get("delegate"):
        raise TransitionError(N_("circle '%(uri)s' waits for %(user)s's answer", uri=cid,
                                 user=task["delegate"]["to"]), instance=inst.id, circle=cid)
    note = {"from": task["assignee"], "to": to, **({"comment": comment} if comment else {})}
    _change(engine.clock, inst, cid, task, "task_delegated", actor,
            {"delegate": {**note, "answer": None}}, note)


def answer(engine: Engine, inst: Instance, cid: str, values: dict[str, Any],
           actor: str | None) -> None:
    """The delegate's answer (the form's values, or the confirmation), kept on the task
    for its assignee to confirm; the delegate is asked no more."""
    task = open_task(engine, inst, cid)
    delegate = task.get("delegate")
    if not delegate or delegate.get("answer") is not None:
        raise TransitionError(N_("nobody was asked to answer circle '%(uri)s'", uri=cid),
                              instance=inst.id, circle=cid)
    _change(engine.clock, inst, cid, task, "task_answered", actor,
            {"delegate": {**delegate, "answer": values, "answered_at": iso(
                engine.clock())}},
            {"by": delegate["to"], "for": delegate["from"]})


def escalate(engine: Engine, inst: Instance, node: Node, actor: str | None) -> bool:
    """The escalate timeout passed: the escalation's people replace the candidates (once).
    False when there is nothing (left) to escalate."""
    task, timeout = inst.circles[node.id].task, node.circle.timeout
    if task is None or task.get("escalated") or timeout is None or timeout.to is None:
        return False
    why: str | None = None
    try:
        users = resolve(engine, inst, node.id, timeout.to)
    except VariableError as exc:
        users, why = [], str(exc)
    roles = list(timeout.to.roles)
    before = {"users": task["users"], "roles": task["roles"], "assignee": task["assignee"]}
    _change(engine.clock, inst, node.id, task, "task_escalated", actor,
            {"users": users, "roles": roles, "assignee": sole(users, roles), "escalated": True},
            {"from": before, "to": {"users": users, "roles": roles},
             "after_seconds": timeout.seconds, **({"problem": why} if why else {})})
    return True


START = "@start"  # a return to the flow's first circles (SPEC §15)


def sendable(engine: Engine, inst: Instance, cid: str) -> Node:
    """The node of `cid` if its work may be sent back now: withdrawn (the starter) while an
    approval or a task waits, returned (an approver, or whoever may act on a task) too."""
    node = inst.template.plan.nodes.get(cid)
    if node is None:
        raise TransitionError(N_("instance has no circle '%(uri)s'", uri=cid),
                              instance=inst.id, circle=cid)
    run = inst.circles[cid]
    phase = box_phase(node.circle.box, run)
    if cid not in engine.ready(inst) or phase not in (Phase.APPROVAL, Phase.INPUT) or (
            phase is Phase.INPUT and run.task is None):
        raise TransitionError(N_("circle '%(uri)s' is not %(what)s", uri=cid,
                                 what=N_("a pending approval or task")),
                              instance=inst.id, circle=cid, state=run.state)
    return node


def upstream(inst: Instance, cid: str) -> list[str]:
    """Every circle `cid` depends on, directly or not (in its own flow and, for a nested
    circle, those its enclosing flow circles depend on), in flow order."""
    plan = inst.template.plan
    seen: set[str] = set()
    cur: str | None = cid
    while cur is not None:
        todo = [d for g in plan.nodes[cur].deps for d in g]
        while todo:
            up = todo.pop()
            if up not in seen:
                seen.add(up)
                todo.extend(d for g in plan.nodes[up].deps for d in g)
        cur = plan.nodes[cur].parent
    return [n for n in plan.order if n in seen]


def first_circles(inst: Instance) -> list[str]:
    """The flow's first circles: its top-level circles without dependencies."""
    plan = inst.template.plan
    return [n for n in plan.order if plan.nodes[n].parent is None and not plan.nodes[n].deps]


def return_targets(engine: Engine, inst: Instance, cid: str) -> list[str]:
    """Where the work waiting at `cid` may be returned to (SPEC §15): every succeeded
    circle upstream of it, in flow order, then `@start` (the flow's first circles) when
    one of them is upstream and finished (TransitionError when nothing waits at `cid`)."""
    sendable(engine, inst, cid)
    ups = upstream(inst, cid)
    out = [n for n in ups if inst.circles[n].state == SUCCESS]
    if any(n in ups and not inst.circles[n].pristine and inst.circles[n].state != WAITING
           for n in first_circles(inst)):
        out.append(START)
    return out


def back_to(engine: Engine, inst: Instance, cid: str, to: str | None) -> list[str]:
    """The circles a send-back from `cid` resets: `to` (a succeeded circle upstream),
    the first circles for `@start`, or by default the succeeded circles right before
    `cid` (ReturnTargetError for a target that is not allowed)."""
    node = inst.template.plan.nodes[cid]
    if to is None:
        before = [m for group in node.deps for m in group if inst.circles[m].state == SUCCESS]
        if not before:
            raise TransitionError(N_("nothing comes before circle '%(uri)s' to send it back"
                                     " to", uri=cid),
                                  instance=inst.id, circle=cid, state=inst.circles[cid].state)
        return before
    allowed = return_targets(engine, inst, cid)
    if to not in allowed:
        raise ReturnTargetError(
            N_("'%(to)s' is not a step circle '%(uri)s' can be returned to (allowed:"
               " %(allowed)s)", to=str(to)[:100], uri=cid,
               allowed=", ".join(allowed) or N_("none")))
    if to == START:
        return [n for n in first_circles(inst) if not inst.circles[n].pristine]
    return [to]


def send_back(engine: Engine, inst: Instance, cid: str, kind: str, actor: str | None,
              comment: str | None = None, to: str | None = None
              ) -> tuple[list[str], dict[str, Any]]:
    """Withdraw (the starter) or return (an approver, or who may act on a task) the work
    waiting at `cid`: the circles before it (or those `to` names: a succeeded circle
    upstream, or `@start`) are reset, so it goes back to their people, and everything
    after them with them, `cid` included (a new attempt: its mail and bookmarks no longer
    count). Returns the circles reset and, by circle, the answer each held and who gave
    it, for `returned_tasks` to offer again."""
    sendable(engine, inst, cid)
    run = inst.circles[cid]
    targets = back_to(engine, inst, cid, to)
    reach: set[str] = set()
    for m in targets:
        reach.update(reset_reach(inst, m, "self"))
    changed = [n for n in inst.template.plan.order if n in reach]
    answers = {n: {"answer": inst.circles[n].result,
                   "answered_by": (inst.circles[n].task or {}).get("assignee")}
               for n in changed if inst.circles[n].state == SUCCESS}
    emit(inst, engine.clock, f"circle_{kind}", actor, cid,
         data={"epoch": run.epoch, "back_to": targets, "reset": changed,
               **({"to": to} if to else {}), **({"comment": comment} if comment else {})})
    for nid in changed:
        move_circle(inst, engine.clock, nid, "reset", actor, data={"origin": cid, "scope": kind})
    return changed, answers


def returned_tasks(engine: Engine, inst: Instance, cid: str, kind: str, actor: str | None,
                   comment: str | None, changed: list[str],
                   answers: dict[str, Any]) -> list[str]:
    """After a send-back has settled: each task it sent back that is ready again keeps
    why (`task["returned"]`: kind, by, comment, `step` it was sent back from, at,
    `answered_by`) and the answers its form held (`answer`, else None), so its people see
    the reason and find the form filled in. Returns those circles."""
    ready = set(engine.ready(inst))
    out = []
    for n in changed:
        run = inst.circles[n]
        if n == cid or n not in ready or run.task is None:
            continue
        note: dict[str, Any] = {"kind": kind, "by": actor, "comment": comment or "",
                                "step": cid, "at": iso(engine.clock())}
        before = answers.get(n) or {}
        answer = before.get("answer")
        note["answered_by"] = before.get("answered_by")
        note["answer"] = answer if isinstance(answer, dict) and \
            inst.template.plan.nodes[n].circle.box.form else None
        run.task = {**run.task, "returned": note}
        out.append(n)
    return out


def returned_people(inst: Instance, circles: list[str]) -> list[str]:
    """Whom the tasks sent back are for, by name: their holders, else who answered them
    last time, else their candidates named (a role is not written to)."""
    out: list[str] = []
    for n in circles:
        task = inst.circles[n].task or {}
        last = (task.get("returned") or {}).get("answered_by")
        out.extend([task["assignee"]] if task.get("assignee") else [last] if last else
                   task.get("users", []))
    return list(dict.fromkeys(out))


def _change(clock: Clock, inst: Instance, cid: str, task: dict[str, Any], kind: str,
            actor: str | None, changes: dict[str, Any],
            data: dict[str, Any] | None = None) -> None:
    """Replace the circle's `task` (a new dict: the stored copy still holds the old)."""
    inst.circles[cid].task = {**task, **changes}
    emit(inst, clock, kind, actor, cid, data=data if data is not None else changes)
