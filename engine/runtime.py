"""The runtime (SPEC §4): operations on an instance, with time and keys passed in.

Readiness reads like graphlib's protocol: `statuses()` says what each waiting
circle is (ready, pending, scheduled for a retry, blocked or dead), operations
apply one move and then `settle` the instance: dead paths are skipped, markers,
`compute` boxes and due timers run, timeouts apply and the status follows the
terminal. Allowed moves are the two tables below, checked in one place.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter

from engine import bookmarks
from engine.errors import (
    BookmarkError,
    BpflowError,
    ExpressionError,
    TransitionError,
    VariableError,
)
from engine.expressions import compile_expression
from engine.instance import (
    COMPLETED,
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
from engine.model import Template
from engine.phase import staged_form
from engine.placeholders import lookup, substitute
from engine.plan import Node, Plan

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
# What a waiting circle is right now:
READY, PENDING, SCHEDULED, BLOCKED, DEAD = "ready", "pending", "scheduled", "blocked", "dead"
INPUT_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str), "text": lambda v: isinstance(v, str),
    "email": lambda v: isinstance(v, str) and "@" in v, "date": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool), "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list), "any": lambda v: True,
}


class InputError(BpflowError, ValueError):
    """Workflow inputs that do not match the template's declared `inputs`."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class Engine:
    """Drives instances. `clock` gives the time, `key` signs bookmarks."""

    def __init__(self, key: bytes, clock: Clock = utcnow):
        if not key:
            raise ValueError("a bookmark key is required")
        self.key = key
        self.clock = clock

    # ----------------------------------------------------------------- queries
    def statuses(self, inst: Instance) -> dict[str, str]:
        """What each waiting circle is: ready, pending, scheduled, blocked or dead."""
        now = self.clock()
        memo = inst.memo
        if memo is not None and memo[0] == inst.seq and memo[1] <= now < memo[2]:
            return memo[3]  # nothing changed and no retry fell due since
        plan: Plan = inst.template.plan
        out: dict[str, str] = {}
        for nid in plan.order:
            run = inst.circles[nid]
            if run.state == WAITING:
                out[nid] = self._status(plan.nodes[nid], inst, out, now)
        until = min((inst.circles[c].next_attempt_at for c, st in out.items() if st == SCHEDULED),
                    default=datetime.max.replace(tzinfo=UTC))
        inst.memo = (inst.seq, now, until, out)
        return out

    def _status(self, node: Node, inst: Instance, known: dict[str, str], now: datetime) -> str:
        if node.parent is not None:
            parent = inst.circles[node.parent]
            if parent.state != WAITING or parent.ready_at is None:
                return PENDING
        verdicts = [self._group(g, inst, known) for g in node.deps]
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

    @staticmethod
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

    def ready(self, inst: Instance) -> list[str]:
        """Circles waiting for the outside world now (a nested flow circle waits for its
        own circles and a timer for the clock instead); empty unless the instance is active."""
        if inst.status not in ACTIVE:
            return []
        nodes = inst.template.plan.nodes
        return [cid for cid, st in self.statuses(inst).items()
                if st == READY and inst.circles[cid].ready_at is not None
                and not nodes[cid].children and nodes[cid].circle.box.action_type != "timer"]

    def bookmark(self, inst: Instance, cid: str) -> str:
        return bookmarks.make(self.key, inst.id, cid, inst.circles[cid].epoch)

    def view(self, inst: Instance) -> dict[str, dict[str, Any]]:
        """Every circle as the API shows it, with the bookmark of each ready one."""
        ready = set(self.ready(inst))
        statuses = self.statuses(inst)
        out = {}
        for cid, run in inst.circles.items():
            out[cid] = {"state": run.state, "ready": cid in ready,
                        "blocked": statuses.get(cid) == BLOCKED, "result": run.result,
                        "reason": run.reason, "attempts": run.attempts,
                        "next_attempt_at": run.next_attempt_at.isoformat()
                        if run.next_attempt_at else None,
                        "bookmark": self.bookmark(inst, cid) if cid in ready else None}
        return out

    def variables(self, inst: Instance) -> dict[str, Any]:
        """The top-level variable table: results of succeeded circles by uri."""
        plan: Plan = inst.template.plan
        return {nid: run.result for nid, run in inst.circles.items()
                if run.state == SUCCESS and plan.nodes[nid].parent is None}

    def resolve(self, inst: Instance, cid: str, path: tuple[str, ...]) -> Any:
        """Value of `${path}` as seen from circle `cid`: its ancestors, then the ancestors
        of the flow circles around it, innermost first (as the analysis checks)."""
        ref = ".".join(path)
        root, rest = path[0], path[1:]
        if root == "workflow":
            return lookup({"input": inst.inputs}, rest, ref)
        if root == "user":
            return lookup(inst.user, rest, ref)
        if root == "instance":
            return lookup({"id": inst.id, "template": inst.template.name,
                           "version": inst.version}, rest, ref)
        target = inst.template.plan.nodes[cid].visible.get(root)
        if target is None:
            raise VariableError(ref, f"variable ${{{ref}}} is not set: '{root}' is not a"
                                     " circle this one depends on")
        run = inst.circles[target]
        if run.state != SUCCESS:
            raise VariableError(ref, f"variable ${{{ref}}} is not set: circle '{target}'"
                                     f" is {run.state}, it has no result")
        return lookup(run.result, rest, ref)

    def render(self, inst: Instance, cid: str, value: Any,
               extra: dict[str, Any] | None = None) -> Any:
        """`value` (a box, a text) with every `${...}` substituted as seen from `cid`;
        `extra` adds roots (the action layer reads its own form as `${form.x}`)."""
        def resolve(path: tuple[str, ...]) -> Any:
            if extra and path[0] in extra:
                return lookup(extra[path[0]], path[1:], ".".join(path))
            return self.resolve(inst, cid, path)
        return substitute(value, resolve)

    def wake_at(self, inst: Instance) -> datetime | None:
        """The next moment something happens by itself (retry, timer, timeout)."""
        if inst.status not in ACTIVE:
            return None
        plan: Plan = inst.template.plan
        times = []
        for cid, st in self.statuses(inst).items():
            run, circle = inst.circles[cid], plan.nodes[cid].circle
            if st == SCHEDULED:
                times.append(run.next_attempt_at)
            elif st == READY and run.ready_at is not None:
                if run.due_at is not None:
                    times.append(run.due_at)
                if circle.timeout is not None:
                    times.append(run.ready_at + timedelta(seconds=circle.timeout.seconds))
        return min(times, default=None)

    # -------------------------------------------------------------- operations
    def start(self, template: Template, inputs: dict[str, Any] | None = None,
              user: dict[str, Any] | None = None, instance_id: str | None = None,
              version: int | None = None, actor: str | None = None) -> Instance:
        inputs = dict(inputs or {})
        _check_inputs(template, inputs)
        now = self.clock()
        inst = Instance(id=instance_id or uuid.uuid4().hex, template=template, status=RUNNING,
                        inputs=inputs, user=dict(user or {}),
                        circles={nid: CircleRun() for nid in template.plan.order},
                        created_at=now, updated_at=now, version=version)
        self._emit(inst, "instance_started", actor, after={"status": RUNNING},
                   data={"template": template.name, "version": version, "inputs": inputs})
        self._settle(inst, actor)
        return inst

    def complete(self, inst: Instance, cid: str, bookmark: str, result: Any = None,
                 actor: str | None = None) -> None:
        """The outside world finished a ready circle's box successfully."""
        if self._node(inst, cid).children:
            raise TransitionError(f"circle '{cid}' is a nested flow; its circles complete it",
                                  instance=inst.id, circle=cid, state=inst.circles[cid].state)
        self._claim(inst, cid, bookmark)
        self._move(inst, cid, "succeed", actor, result=result)
        self._settle(inst, actor)

    def fail(self, inst: Instance, cid: str, bookmark: str, reason: str,
             actor: str | None = None) -> None:
        """The box failed: retry after the next wait of the list, or fail for good."""
        self._claim(inst, cid, bookmark)
        self._failed(inst, cid, str(reason), actor)
        self._settle(inst, actor)

    def mark_pending(self, inst: Instance, cid: str, bookmark: str, info: dict[str, Any],
                     actor: str | None = None) -> None:
        """The action layer started and now waits (form data staged for the worker, approval
        mail sent): the circle stays ready, its bookmark stays valid, and the worker leaves
        it alone until it completes or fails."""
        self._claim(inst, cid, bookmark)
        run = inst.circles[cid]
        before = run.snapshot()
        run.pending = info
        self._emit(inst, "circle_pending", actor, cid, before, run.snapshot(),
                   {k: v for k, v in info.items() if k != "form"})

    def record(self, inst: Instance, kind: str, cid: str | None = None,
               data: dict[str, Any] | None = None, actor: str | None = None) -> None:
        """Add a history event that changes no state (a refused tampered decision, a
        repeated sign-in)."""
        self._emit(inst, kind, actor, cid, data=data)

    def check_bookmark(self, inst: Instance, cid: str, bookmark: str) -> None:
        """Raise as `complete` would for this bookmark, changing nothing (a form is checked
        only once its bookmark is known to be good)."""
        self._claim(inst, cid, bookmark)

    def tick(self, inst: Instance, actor: str | None = "worker") -> None:
        """Let time pass: retries become ready, timers fire, timeouts apply."""
        self._settle(inst, actor)

    def reset_preview(self, inst: Instance, cid: str, scope: str,
                      levels: int | None = None) -> list[str]:
        """The circles a reset would send back to waiting, in flow order."""
        plan: Plan = inst.template.plan
        self._node(inst, cid)
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

    def reset(self, inst: Instance, cid: str, scope: str = "self", levels: int | None = None,
              actor: str | None = None) -> list[str]:
        """The seed's user-formed cycle: send finished circles (and what follows) back."""
        if inst.status == TERMINATED:
            raise TransitionError("a terminated instance cannot be reset", instance=inst.id,
                                  circle=cid, state=TERMINATED)
        self._node(inst, cid)
        run = inst.circles[cid]
        if run.state == WAITING and scope != "all":
            raise TransitionError(f"circle '{cid}' is still waiting; only failed or finished"
                                  " circles can be reset", instance=inst.id, circle=cid,
                                  state=WAITING)
        changed = self.reset_preview(inst, cid, scope, levels)
        for nid in changed:
            self._move(inst, nid, "reset", actor, data={"origin": cid, "scope": scope,
                                                         "levels": levels})
        if inst.status in (COMPLETED, FAILED):
            self._set_status(inst, RUNNING, None, actor)
        self._settle(inst, actor)
        return changed

    def suspend(self, inst: Instance, actor: str | None = None) -> None:
        self._instance_move(inst, "suspend", actor)

    def resume(self, inst: Instance, actor: str | None = None) -> None:
        self._instance_move(inst, "resume", actor)
        self._settle(inst, actor)

    def abort(self, inst: Instance, reason: str = "aborted", actor: str | None = None) -> None:
        self._instance_move(inst, "abort", actor, reason=reason)

    # ---------------------------------------------------------------- internals
    def _node(self, inst: Instance, cid: str) -> Node:
        node = inst.template.plan.nodes.get(cid)
        if node is None:
            raise TransitionError(f"instance has no circle '{cid}'", instance=inst.id, circle=cid)
        return node

    def _claim(self, inst: Instance, cid: str, bookmark: str) -> Node:
        node = self._node(inst, cid)
        run = inst.circles[cid]
        bookmarks.verify(self.key, inst.id, cid, run.epoch, bookmark)
        if run.state != WAITING:
            raise BookmarkError(f"bookmark already used: circle '{cid}' is {run.state}",
                                instance=inst.id, circle=cid, state=run.state)
        if inst.status not in ACTIVE:
            raise TransitionError(f"instance is {inst.status}", instance=inst.id, circle=cid,
                                  state=run.state)
        if cid not in self.ready(inst):
            raise TransitionError(f"circle '{cid}' is not ready (it is {run.state})",
                                  instance=inst.id, circle=cid, state=run.state)
        return node

    def _emit(self, inst: Instance, kind: str, actor: str | None, circle: str | None = None,
              before: dict | None = None, after: dict | None = None,
              data: dict | None = None) -> None:
        inst.seq += 1
        inst.updated_at = self.clock()
        inst.events.append(Event(inst.seq, inst.updated_at, kind, actor, circle, before, after,
                                 data or {}))

    def _move(self, inst: Instance, cid: str, move: str, actor: str | None,
              data: dict | None = None, **changes: Any) -> None:
        """Apply one circle move from CIRCLE_MOVES and record it."""
        allowed, target, event = CIRCLE_MOVES[move]
        run = inst.circles[cid]
        if run.state not in allowed:
            raise TransitionError(f"circle '{cid}' cannot {move} from {run.state}",
                                  instance=inst.id, circle=cid, state=run.state)
        before = run.snapshot()
        if move == "reset":
            inst.circles[cid] = run = CircleRun(epoch=run.epoch + 1)
        else:
            if move == "retry":  # a new attempt: new bookmark, the staged form stays
                run.epoch += 1
                run.ready_at = run.due_at = None
                form = staged_form(run)
                run.pending = None if form is None else {"form": form}
            for key, value in changes.items():
                setattr(run, key, value)
        run.state = target
        self._emit(inst, event, actor, cid, before, run.snapshot(), data)

    def _instance_move(self, inst: Instance, move: str, actor: str | None,
                       reason: str | None = None) -> None:
        allowed, target, event = INSTANCE_MOVES[move]
        if inst.status not in allowed:
            raise TransitionError(f"cannot {move} an instance that is {inst.status}",
                                  instance=inst.id, state=inst.status)
        before = {"status": inst.status}
        inst.status = target
        if reason is not None:
            inst.reason = reason
        self._emit(inst, event, actor, before=before, after={"status": target},
                   data={"reason": reason} if reason else None)

    def _failed(self, inst: Instance, cid: str, reason: str, actor: str | None,
                retry: bool = True) -> None:
        node = inst.template.plan.nodes[cid]
        run = inst.circles[cid]
        waits = node.circle.retry
        if retry and run.attempts < len(waits):
            at = self.clock() + timedelta(seconds=waits[run.attempts])
            self._move(inst, cid, "retry", actor, data={"reason": reason},
                       attempts=run.attempts + 1, next_attempt_at=at, reason=reason)
            for child in inst.template.plan.descendants(cid):
                if not inst.circles[child].pristine:
                    self._move(inst, child, "reset", actor, data={"origin": cid,
                                                                  "scope": "retry"})
        else:
            self._move(inst, cid, "fail", actor, attempts=run.attempts + 1, reason=reason,
                       next_attempt_at=None)

    def _settle(self, inst: Instance, actor: str | None) -> None:
        """Run everything that needs no outside party until nothing moves."""
        plan: Plan = inst.template.plan
        while inst.status in ACTIVE:
            statuses = self.statuses(inst)
            if self._update_status(inst, statuses, actor):
                return
            moved = False
            for nid, st in statuses.items():
                if inst.status not in ACTIVE or inst.circles[nid].state != WAITING:
                    continue
                if st == DEAD:
                    self._skip(inst, nid, actor, "every circle of a dependency group was skipped")
                    moved = True
                elif st == READY:
                    moved |= self._ready_step(inst, plan.nodes[nid], statuses, actor)
            if not moved:
                return

    def _update_status(self, inst: Instance, statuses: dict[str, str], actor: str | None) -> bool:
        """Follow the terminal: completed, failed or running. True when completed."""
        plan: Plan = inst.template.plan
        term = inst.circles[plan.terminal]
        if term.state == SUCCESS:
            self._set_status(inst, COMPLETED, None, actor)
            return True
        if term.state in (FAILURE, SKIPPED) or statuses.get(plan.terminal) == BLOCKED:
            failures = [f"{cid}: {r.reason}" for cid, r in inst.circles.items()
                        if r.state == FAILURE]
            self._set_status(inst, FAILED, "; ".join(failures) or "the terminal was skipped",
                             actor)
        else:
            self._set_status(inst, RUNNING, None, actor)
        return False

    def _set_status(self, inst: Instance, status: str, reason: str | None,
                    actor: str | None) -> None:
        if inst.status != status:
            before = {"status": inst.status}
            inst.status, inst.reason = status, reason
            self._emit(inst, f"instance_{status}", actor, before=before,
                       after={"status": status}, data={"reason": reason} if reason else None)

    def _skip(self, inst: Instance, cid: str, actor: str | None, why: str) -> None:
        self._move(inst, cid, "skip", actor, data={"why": why})
        for child in inst.template.plan.descendants(cid):
            if inst.circles[child].state == WAITING:
                self._move(inst, child, "skip", actor, data={"why": f"'{cid}' was skipped"})

    def _ready_step(self, inst: Instance, node: Node, statuses: dict[str, str],
                    actor: str | None) -> bool:
        """One step of a ready circle that needs nobody: enter, finish, fire, time out."""
        run, circle, now = inst.circles[node.id], node.circle, self.clock()
        if run.ready_at is None:
            return self._enter(inst, node, actor)
        if node.children:
            inner = inst.circles[node.inner_terminal]
            if inner.state == SUCCESS:
                table = {c.rsplit(".", 1)[1]: inst.circles[c].result for c in node.children
                         if inst.circles[c].state == SUCCESS}
                self._move(inst, node.id, "succeed", actor, result=table)
                return True
            if inner.state in (FAILURE, SKIPPED) or statuses.get(node.inner_terminal) == BLOCKED:
                failed = [f"{c[len(node.id) + 1:]}: {inst.circles[c].reason}"
                          for c in inst.template.plan.descendants(node.id)
                          if inst.circles[c].state == FAILURE]
                why = "; ".join(failed) or f"its terminal '{node.inner_terminal}' was skipped"
                self._failed(inst, node.id, f"nested flow failed: {why}", actor)
                return True
        if run.due_at is not None and run.due_at <= now:
            self._move(inst, node.id, "succeed", actor,
                       result={"fired_at": now.isoformat(), "due_at": run.due_at.isoformat()})
            return True
        timeout = circle.timeout
        if timeout is not None and now >= run.ready_at + timedelta(seconds=timeout.seconds):
            why = f"timed out after {timeout.seconds:g} s"
            if timeout.policy == "terminate":
                self._instance_move(inst, "abort", actor, reason=f"circle '{node.id}' {why}")
            else:
                self._failed(inst, node.id, why, actor, retry=timeout.policy == "retry")
            return True
        return False

    def _enter(self, inst: Instance, node: Node, actor: str | None) -> bool:
        """A circle becomes ready: check `when`, run what needs nobody, start timers."""
        run, circle, now = inst.circles[node.id], node.circle, self.clock()
        run.ready_at, run.next_attempt_at = now, None
        self._emit(inst, "circle_ready", actor, node.id, data={"attempt": run.attempts + 1})
        try:
            if circle.when is not None and not self._evaluate(inst, node.id, circle.when):
                self._skip(inst, node.id, actor, f"condition is false: {circle.when}")
                return True
            action = circle.box.action or {}
            kind = action.get("type")
            if circle.box.empty:
                self._move(inst, node.id, "succeed", actor, result=None)
            elif kind == "compute":
                outputs = {k: self._evaluate(inst, node.id, src)
                           for k, src in action["outputs"].items()}
                self._move(inst, node.id, "succeed", actor, result=outputs)
            elif kind == "timer":
                run.due_at = (now + timedelta(seconds=action["delay"]) if "delay" in action
                              else croniter(action["cron"], now).get_next(datetime))
            return True
        except (ExpressionError, VariableError) as exc:
            self._failed(inst, node.id, str(exc), actor)
            return True

    def _evaluate(self, inst: Instance, cid: str, source: str) -> Any:
        expr = compile_expression(source)
        return expr.evaluate(lambda path: self.resolve(inst, cid, path), self.clock())


def _check_inputs(template: Template, inputs: dict[str, Any]) -> None:
    declared = template.inputs
    if not declared:
        return
    problems = [f"missing input '{k}'" for k in declared if k not in inputs]
    problems += [f"unknown input '{k}'" for k in inputs if k not in declared]
    problems += [f"input '{k}' must be {t}" for k, t in declared.items()
                 if k in inputs and not INPUT_TYPES.get(t, INPUT_TYPES["any"])(inputs[k])]
    if problems:
        raise InputError("; ".join(problems))
