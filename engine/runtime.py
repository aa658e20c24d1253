"""The runtime (SPEC §4): operations on an instance, with time and keys passed in.

Readiness reads like graphlib's protocol: `statuses()` says what each waiting
circle is (ready, pending, scheduled for a retry, blocked or dead), operations
apply one move and then `settle` the instance: dead paths are skipped, markers,
`compute` boxes and due timers run, timeouts apply and the status follows the
terminal. The pieces it leans on live next to it: `readiness` answers the status
question, `moves` holds the two tables of allowed moves and the only code that
applies them, `inputs` checks what an instance starts with.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter

from engine import bookmarks, nudges, phase, readiness, tasks
from engine.errors import BookmarkError, ExpressionError, TransitionError, VariableError
from engine.expressions import compile_expression
from engine.inputs import INPUT_TYPES, InputError, check_inputs
from engine.instance import (
    COMPLETED,
    FAILED,
    FAILURE,
    RUNNING,
    SKIPPED,
    SUCCESS,
    TERMINATED,
    WAITING,
    CircleRun,
    Instance,
)
from engine.messages import N_, word
from engine.model import Template
from engine.moves import (
    ACTIVE,
    CIRCLE_MOVES,
    INSTANCE_MOVES,
    Clock,
    emit,
    fail_circle,
    move_circle,
    move_instance,
    reset_reach,
    set_status,
    skip_circle,
)
from engine.placeholders import lookup, substitute
from engine.plan import Node
from engine.readiness import BLOCKED, DEAD, PENDING, READY, SCHEDULED
from engine.signals import MAX_KEY, key_text

# The public names, some now defined next door, so importers of engine.runtime keep working.
__all__ = ["ACTIVE", "BLOCKED", "CIRCLE_MOVES", "DEAD", "INPUT_TYPES", "INSTANCE_MOVES",
           "PENDING", "READY", "SCHEDULED", "Clock", "Engine", "InputError", "utcnow"]


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
        return readiness.statuses(inst, self.clock())

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
            task = run.task if cid in ready else None
            # a retry's next attempt, or when a ready timer fires
            at = run.next_attempt_at or (run.due_at if run.state == WAITING else None)
            out[cid] = {"state": run.state, "ready": cid in ready,
                        "blocked": statuses.get(cid) == BLOCKED, "result": run.result,
                        "reason": run.reason, "attempts": run.attempts,
                        "next_attempt_at": at.isoformat() if at else None,
                        "bookmark": self.bookmark(inst, cid) if cid in ready else None,
                        "assignee": task["assignee"] if task else None,
                        "candidates": {"users": task["users"], "roles": task["roles"]}
                        if task else None,
                        "due_at": task["due_at"] if task else None,
                        "delegate": task.get("delegate") if task else None,
                        "returned": task.get("returned") if task else None}
        return out

    def variables(self, inst: Instance) -> dict[str, Any]:
        """The top-level variable table: results of succeeded circles by uri."""
        plan = inst.template.plan
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
        plan = inst.template.plan
        times: list[datetime] = nudges.owed_times(inst) if plan.copying else []
        if inst.status not in ACTIVE:
            return min(times, default=None)
        for cid, st in self.statuses(inst).items():
            run, circle = inst.circles[cid], plan.nodes[cid].circle
            if st == SCHEDULED and run.next_attempt_at is not None:
                times.append(run.next_attempt_at)
            elif st == READY and run.ready_at is not None:
                if run.due_at is not None:
                    times.append(run.due_at)
                if circle.timeout is not None and not (run.task or {}).get("escalated"):
                    times.append(run.ready_at + timedelta(seconds=circle.timeout.seconds))
                if circle.remind is not None:
                    at = nudges.next_reminder(circle, run)
                    if at is not None:
                        times.append(at)
        return min(times, default=None)

    # -------------------------------------------------------------- operations
    def start(self, template: Template, inputs: dict[str, Any] | None = None,
              user: dict[str, Any] | None = None, instance_id: str | None = None,
              version: int | None = None, actor: str | None = None) -> Instance:
        inputs = dict(inputs or {})
        check_inputs(template, inputs)
        now = self.clock()
        inst = Instance(id=instance_id or uuid.uuid4().hex, template=template, status=RUNNING,
                        inputs=inputs, user=dict(user or {}),
                        circles={nid: CircleRun() for nid in template.plan.order},
                        created_at=now, updated_at=now, version=version)
        emit(inst, self.clock, "instance_started", actor, after={"status": RUNNING},
             data={"template": template.name, "version": version, "inputs": inputs})
        self._settle(inst, actor)
        return inst

    def complete(self, inst: Instance, cid: str, bookmark: str, result: Any = None,
                 actor: str | None = None) -> None:
        """The outside world finished a ready circle's box successfully."""
        if self._node(inst, cid).children:
            raise TransitionError(N_("circle '%(uri)s' is a nested flow; its circles complete"
                                     " it", uri=cid),
                                  instance=inst.id, circle=cid, state=inst.circles[cid].state)
        self._claim(inst, cid, bookmark)
        move_circle(inst, self.clock, cid, "succeed", actor, result=result)
        self._settle(inst, actor)

    def fail(self, inst: Instance, cid: str, bookmark: str, reason: str,
             actor: str | None = None) -> None:
        """The box failed: retry after the next wait of the list, or fail for good."""
        self._claim(inst, cid, bookmark)
        fail_circle(inst, self.clock, cid, str(reason), actor)
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
        emit(inst, self.clock, "circle_pending", actor, cid, before, run.snapshot(),
             {k: v for k, v in info.items() if k != "form"})

    def record(self, inst: Instance, kind: str, cid: str | None = None,
               data: dict[str, Any] | None = None, actor: str | None = None) -> None:
        """Add a history event that changes no state (a refused tampered decision, a
        repeated sign-in)."""
        emit(inst, self.clock, kind, actor, cid, data=data)

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
        self._node(inst, cid)
        return reset_reach(inst, cid, scope, levels)

    def reset(self, inst: Instance, cid: str, scope: str = "self", levels: int | None = None,
              actor: str | None = None) -> list[str]:
        """The seed's user-formed cycle: send finished circles (and what follows) back."""
        if inst.status == TERMINATED:
            raise TransitionError(N_("a terminated instance cannot be reset"), instance=inst.id,
                                  circle=cid, state=TERMINATED)
        self._node(inst, cid)
        run = inst.circles[cid]
        if run.state == WAITING and scope != "all":
            raise TransitionError(N_("circle '%(uri)s' is still waiting; only failed or"
                                     " finished circles can be reset", uri=cid),
                                  instance=inst.id, circle=cid,
                                  state=WAITING)
        changed = self.reset_preview(inst, cid, scope, levels)
        for nid in changed:
            move_circle(inst, self.clock, nid, "reset", actor,
                        data={"origin": cid, "scope": scope, "levels": levels})
        if inst.status in (COMPLETED, FAILED):
            set_status(inst, self.clock, RUNNING, None, actor)
        self._settle(inst, actor)
        return changed

    # ------------------------------------------------------- people (SPEC §10)
    def claim(self, inst: Instance, cid: str, username: str, actor: str | None = None) -> bool:
        """`username` takes the task of a ready circle; False when someone else holds it."""
        return tasks.claim(self, inst, cid, username, actor)

    def unclaim(self, inst: Instance, cid: str, actor: str | None = None) -> None:
        tasks.unclaim(self, inst, cid, actor)

    def transfer(self, inst: Instance, cid: str, to: str, actor: str | None = None,
                 comment: str | None = None) -> None:
        tasks.transfer(self, inst, cid, to, actor, comment)

    def delegate(self, inst: Instance, cid: str, to: str, actor: str | None = None,
                 comment: str | None = None) -> None:
        tasks.delegate(self, inst, cid, to, actor, comment)

    def answer(self, inst: Instance, cid: str, values: dict[str, Any],
               actor: str | None = None) -> None:
        tasks.answer(self, inst, cid, values, actor)

    def send_back(self, inst: Instance, cid: str, kind: str, actor: str | None = None,
                  comment: str | None = None, to: str | None = None) -> list[str]:
        """Withdraw (`kind` "withdrawn") or return ("returned") the work waiting at `cid`
        to the circles before it, or to `to` (a succeeded circle upstream, or "@start");
        the tasks sent back come back with why and their previous answers."""
        changed, answers = tasks.send_back(self, inst, cid, kind, actor, comment, to)
        self._settle(inst, actor)
        tasks.returned_tasks(self, inst, cid, kind, actor, comment, changed, answers)
        return changed

    def return_targets(self, inst: Instance, cid: str) -> list[str]:
        """Where the work waiting at `cid` may be returned to (circle uris, "@start")."""
        return tasks.return_targets(self, inst, cid)

    def suspend(self, inst: Instance, actor: str | None = None) -> None:
        move_instance(inst, self.clock, "suspend", actor)

    def resume(self, inst: Instance, actor: str | None = None) -> None:
        move_instance(inst, self.clock, "resume", actor)
        self._settle(inst, actor)

    def abort(self, inst: Instance, reason: str = "aborted", actor: str | None = None) -> None:
        move_instance(inst, self.clock, "abort", actor, reason=reason)

    # ---------------------------------------------------------------- internals
    def _node(self, inst: Instance, cid: str) -> Node:
        node = inst.template.plan.nodes.get(cid)
        if node is None:
            raise TransitionError(N_("instance has no circle '%(uri)s'", uri=cid),
                                  instance=inst.id, circle=cid)
        return node

    def _claim(self, inst: Instance, cid: str, bookmark: str) -> Node:
        node = self._node(inst, cid)
        run = inst.circles[cid]
        bookmarks.verify(self.key, inst.id, cid, run.epoch, bookmark)
        if run.state != WAITING:
            raise BookmarkError(N_("bookmark already used: circle '%(uri)s' is %(state)s",
                                   uri=cid, state=word(run.state)),
                                instance=inst.id, circle=cid, state=run.state)
        if inst.status not in ACTIVE:
            raise TransitionError(N_("instance is %(status)s", status=word(inst.status)),
                                  instance=inst.id, circle=cid,
                                  state=run.state)
        if cid not in self.ready(inst):
            raise TransitionError(N_("circle '%(uri)s' is not ready (it is %(state)s)", uri=cid,
                                     state=word(run.state)),
                                  instance=inst.id, circle=cid, state=run.state)
        return node

    def _settle(self, inst: Instance, actor: str | None) -> None:
        """Run everything that needs no outside party until nothing moves."""
        plan = inst.template.plan
        while inst.status in ACTIVE:
            statuses = self.statuses(inst)
            if self._update_status(inst, statuses, actor):
                return
            moved = False
            for nid, st in statuses.items():
                if inst.status not in ACTIVE or inst.circles[nid].state != WAITING:
                    continue
                if st == DEAD:
                    skip_circle(inst, self.clock, nid, actor,
                                "every circle of a dependency group was skipped")
                    moved = True
                elif st == READY:
                    moved |= self._ready_step(inst, plan.nodes[nid], statuses, actor)
            if not moved:
                return

    def _update_status(self, inst: Instance, statuses: dict[str, str], actor: str | None) -> bool:
        """Follow the terminal: completed, failed or running. True when completed."""
        plan = inst.template.plan
        term = inst.circles[plan.terminal]
        if term.state == SUCCESS:
            set_status(inst, self.clock, COMPLETED, None, actor)
            return True
        if term.state in (FAILURE, SKIPPED) or statuses.get(plan.terminal) == BLOCKED:
            failures = [f"{cid}: {r.reason}" for cid, r in inst.circles.items()
                        if r.state == FAILURE]
            set_status(inst, self.clock, FAILED,
                       "; ".join(failures) or "the terminal was skipped", actor)
        else:
            set_status(inst, self.clock, RUNNING, None, actor)
        return False

    def _ready_step(self, inst: Instance, node: Node, statuses: dict[str, str],
                    actor: str | None) -> bool:
        """One step of a ready circle that needs nobody: enter, finish, fire, time out."""
        run, circle, now = inst.circles[node.id], node.circle, self.clock()
        if run.ready_at is None:
            return self._enter(inst, node, actor)
        if node.inner_terminal is not None:  # a nested flow circle
            inner = inst.circles[node.inner_terminal]
            if inner.state == SUCCESS:
                table = {c.rsplit(".", 1)[1]: inst.circles[c].result for c in node.children
                         if inst.circles[c].state == SUCCESS}
                move_circle(inst, self.clock, node.id, "succeed", actor, result=table)
                return True
            if inner.state in (FAILURE, SKIPPED) or statuses.get(node.inner_terminal) == BLOCKED:
                failed = [f"{c[len(node.id) + 1:]}: {inst.circles[c].reason}"
                          for c in inst.template.plan.descendants(node.id)
                          if inst.circles[c].state == FAILURE]
                why = "; ".join(failed) or f"its terminal '{node.inner_terminal}' was skipped"
                fail_circle(inst, self.clock, node.id, f"nested flow failed: {why}", actor)
                return True
        if run.due_at is not None and run.due_at <= now:
            move_circle(inst, self.clock, node.id, "succeed", actor,
                        result={"fired_at": now.isoformat(), "due_at": run.due_at.isoformat()})
            return True
        timeout = circle.timeout
        if timeout is not None and now >= run.ready_at + timedelta(seconds=timeout.seconds):
            why = f"timed out after {timeout.seconds:g} s"
            if timeout.policy == "escalate":
                return tasks.escalate(self, inst, node, actor)
            if timeout.policy == "terminate":
                move_instance(inst, self.clock, "abort", actor,
                              reason=f"circle '{node.id}' {why}")
            else:
                fail_circle(inst, self.clock, node.id, why, actor, retry=timeout.policy == "retry")
            return True
        return False

    def _enter(self, inst: Instance, node: Node, actor: str | None) -> bool:
        """A circle becomes ready: check `when`, run what needs nobody, start timers."""
        run, circle, now = inst.circles[node.id], node.circle, self.clock()
        run.ready_at, run.next_attempt_at = now, None
        data: dict[str, Any] = {"attempt": run.attempts + 1}
        if circle.enter is not None:
            data["enter"] = circle.enter
        emit(inst, self.clock, "circle_ready", actor, node.id, data=data)
        try:
            if circle.when is not None and not self._evaluate(inst, node.id, circle.when):
                skip_circle(inst, self.clock, node.id, actor, f"condition is false: {circle.when}")
                return True
            if circle.is_task:  # whose it is goes into the event (still being written)
                run.task = tasks.task_for(self, inst, node, now)
                data["task"] = {k: run.task[k] for k in ("users", "roles", "assignee")}
            action = circle.box.action or {}
            kind = action.get("type")
            if circle.box.empty:
                move_circle(inst, self.clock, node.id, "succeed", actor, result=None)
            elif kind == "compute":
                outputs = {k: self._evaluate(inst, node.id, src)
                           for k, src in action["outputs"].items()}
                move_circle(inst, self.clock, node.id, "succeed", actor, result=outputs)
            elif kind == "signal":  # waits from now on: a signal sent after this step meets it
                key = key_text(self.render(inst, node.id, action.get("key")))
                if len(key) > MAX_KEY:
                    fail_circle(inst, self.clock, node.id, f"the signal's key is longer than"
                                f" {MAX_KEY} characters", actor)
                    return True
                data["signal"] = phase.wait_for_signal(run, action["name"], key)
            elif kind == "timer":
                run.due_at = (now + timedelta(seconds=action["delay"]) if "delay" in action
                              else croniter(action["cron"], now).get_next(datetime))
            return True
        except (ExpressionError, VariableError) as exc:
            fail_circle(inst, self.clock, node.id, str(exc), actor)
            return True

    def _evaluate(self, inst: Instance, cid: str, source: str) -> Any:
        expr = compile_expression(source)
        return expr.evaluate(lambda path: self.resolve(inst, cid, path), self.clock())

