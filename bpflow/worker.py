"""The worker: leases instances with due work, lets time pass on them and runs their
worker-side actions (HTTP calls), then releases them.

Several workers can run at once: a lease is taken in one transaction (PostgreSQL
`FOR UPDATE SKIP LOCKED`, SQLite's single writer), so an instance is worked on by one
worker at a time, and renewed while the worker works on it (`heartbeat.py`). A worker that
dies leaves its lease to expire; the instance is then due again and another worker picks
it up (an action it had sent is sent again with the same Idempotency-Key), so nothing is
lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bpflow import metrics, operations, tracing
from bpflow.actions import HANDLERS, ActionContext, Outcome, shown_data
from bpflow.errors import NotFound, StorageQuotaExceeded
from bpflow.expiry import expire
from bpflow.files import Sweeper
from bpflow.heartbeat import Heartbeat, lease_seconds
from bpflow.mailbox import Mailbox
from bpflow.moves import nudging
from bpflow.moves.nudging import Owed
from bpflow.store import Store
from bpflow.webhooks import Deliverer
from engine.errors import BpflowError, VariableError
from engine.instance import Instance
from engine.phase import Phase, action_extra, box_phase
from engine.runtime import Engine

log = logging.getLogger("bpflow.worker")
DUTY_EVERY = 1.0  # seconds between two runs of a duty that can wait, while work falls due


Handler = Callable[[ActionContext], Outcome]


@dataclass(frozen=True)
class Job:
    context: ActionContext | None  # None when rendering failed (reason says why)
    circle: str
    bookmark: str
    reason: str = ""


class Worker:
    def __init__(self, store: Store, name: str | None = None, lease: float | None = None,
                 handlers: dict[str, Handler] | None = None):
        self.store = store.of(None)  # every tenant's due work (ids from its leases)
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.lease = lease_seconds() if lease is None else lease
        self.heartbeat = Heartbeat(self.store, self.name, self.lease)
        self.handlers = handlers if handlers is not None else HANDLERS
        self.mailbox = Mailbox(self.store)
        # what else a worker does each round besides due instances (expiry, webhook
        # deliveries): each a callable answering how much it did (0: nothing to do)
        self.duties: list[Callable[[Worker], int]] = [expire]
        self.webhooks = Deliverer()  # keeps its connections between rounds
        self.duties.append(self.webhooks)
        self.duties.append(Sweeper())  # uploads no form held within a day
        self.duties.append(operations.Runner())  # bulk operations (SPEC §18)
        self.duties.append(operations.fold_waits)  # the durations (SPEC §18)
        # the duties that can wait while instances keep falling due: each runs at most
        # once a DUTY_EVERY seconds then, so that due work is not late behind them
        self.waiting: set[Callable[[Worker], int]] = {expire, operations.fold_waits}
        self._ran: dict[Callable[[Worker], int], float] = {}
        self.pressed = False  # instances fell due within DUTY_EVERY (the duties take less)
        self._busy_at = -DUTY_EVERY  # when a round last found due instances

    def run_once(self, limit: int = 200) -> int:
        """Work through one batch of due instances; returns how many were claimed.

        Time passes on the whole batch in one transaction (timers, retries, timeouts);
        the actions it turns up then run one by one, each result its own step."""
        ids = self.store.claim_due(self.name, limit, self.lease)
        if not ids:
            return 0
        self.heartbeat.hold(ids)
        self._now = self.store.clock()
        try:
            due = self.store.apply_many(ids, self._due_jobs)
            self._send_owed([o[2] for o in due.values()
                             if not isinstance(o, BpflowError) and o[2]])
            for instance_id, outcome in due.items():
                if isinstance(outcome, BpflowError):
                    if not isinstance(outcome, NotFound):
                        log.warning("instance %s: %s", instance_id, outcome)
                    continue
                try:
                    self.process(instance_id, *outcome)
                except BpflowError as exc:
                    log.warning("instance %s: %s", instance_id, exc)
        finally:
            self.heartbeat.drop(ids)
            self.store.release(ids, self.name)
        return len(ids)

    def process(self, instance_id: str, jobs: list[Job], approvals: list[str],
                owed: Owed | None = None) -> None:
        """An instance's actions (and approvals to count) after the batch's step; its
        copies and reminders (`owed`) are `send_owed`'s, for the whole batch at once."""
        for cid in approvals:  # re-entry checks decided approval mail
            self.mailbox.settle(instance_id, cid)
            self.mailbox.advance(instance_id, cid)  # and asks whoever is due (a sequence)
        for job in jobs:
            if not self.store.renew(instance_id, self.name, self.lease):
                log.warning("instance %s: lease lost, leaving it to its new holder",
                            instance_id)
                return
            # the action and the step that records its result: one span (SPEC §18)
            with (contextlib.nullcontext() if job.context is None else tracing.span(
                    "action " + job.context.action["type"], **{
                        "bpflow.instance": instance_id, "bpflow.circle": job.circle})):
                if not self._job(instance_id, job):
                    return

    def _job(self, instance_id: str, job: Job) -> bool:
        """Run an action and record its outcome; False when the lease was lost."""
        outcome = (Outcome(False, reason=job.reason) if job.context is None
                   else self._run(job.context))
        if job.context is not None:
            metrics.action(job.context.action["type"], "pending" if outcome.ok is None
                           else "completed" if outcome.ok else "failed")
        if self.heartbeat.lost(instance_id):  # its new holder sends the action again
            log.warning("instance %s circle %s: result dropped: the lease was lost "
                        "while the action ran", instance_id, job.circle)
            return False
        try:
            if outcome.ok is None:
                def pend(e: Engine, i: Instance, job: Job = job, o: Outcome = outcome
                         ) -> None:
                    e.mark_pending(i, job.circle, job.bookmark, o.pending or {}, "worker")
                self.store.apply(instance_id, pend)
            elif outcome.ok:
                self._complete(instance_id, job, outcome.result)
            else:
                self.store.fail(instance_id, job.circle, job.bookmark, outcome.reason,
                                actor="worker")
        except BpflowError as exc:  # someone else moved the circle meanwhile
            log.info("instance %s circle %s: result dropped: %s", instance_id, job.circle,
                     exc)
        return True

    def _send_owed(self, owed: list[Owed]) -> None:
        """The batch's copies and reminders (SPEC §15); a failure is logged, not the
        batch's."""
        if not owed:
            return
        try:
            nudging.send_owed(self.store, owed)
        except BpflowError as exc:
            log.warning("copies and reminders: %s", exc)

    def _complete(self, instance_id: str, job: Job, result: Any) -> None:
        """The action's result, or, when storing it would pass the tenant's quota of
        variables, the circle failed with that reason (run again, the action would only
        be refused again: a payment sent twice)."""
        try:
            self.store.complete(instance_id, job.circle, job.bookmark, result, actor="worker")
        except StorageQuotaExceeded as exc:
            self.store.fail(instance_id, job.circle, job.bookmark, str(exc), actor="worker")

    def _run(self, ctx: ActionContext) -> Outcome:
        try:
            return self.handlers[ctx.action["type"]](ctx)
        except BpflowError as exc:  # e.g. an approver who does not exist
            return Outcome(False, reason=str(exc))
        except Exception as exc:  # a bug in a handler fails the circle, not the worker
            log.exception("handler for %s crashed", ctx.circle)
            return Outcome(False, reason=f"internal error: {type(exc).__name__}: {exc}")

    def _due_jobs(self, engine: Engine, inst: Instance
                  ) -> tuple[list[Job], list[str], Owed | None]:
        """Inside the store's atomic step: let time pass, then list the actions to run,
        the approvals waiting for decisions, and the copies and reminders owed."""
        due = self.store.due_at(inst)
        if due is not None and due <= self._now:  # taken up this late (SPEC §18)
            metrics.late((self._now - due).total_seconds())
        engine.tick(inst)
        plan = inst.template.plan
        owed = (nudging.owed_work(self.store.of(inst.tenant), engine, inst)
                if plan.copying or plan.reminding else None)
        nodes = plan.nodes
        jobs, approvals = [], []
        for cid in engine.ready(inst):
            circle, run = nodes[cid].circle, inst.circles[cid]
            action = circle.box.action
            if not action or action["type"] not in self.handlers:
                continue
            phase = box_phase(circle.box, run)
            if phase is Phase.APPROVAL:
                approvals.append(cid)
                continue
            if phase is not Phase.DUE:
                continue  # waits for its form, or for the outside world
            bookmark = engine.bookmark(inst, cid)
            try:
                rendered = engine.render(inst, cid, action, action_extra(run))
            except VariableError as exc:
                jobs.append(Job(None, cid, bookmark, reason=str(exc)))
                continue
            ctx = ActionContext(self.store.of(inst.tenant), inst.id, cid, run.epoch, rendered,
                                f"{inst.id}:{cid}:{run.epoch}", inst.user,
                                shown_data(engine, inst, cid))
            jobs.append(Job(ctx, cid, bookmark))
        return jobs, approvals, owed

    def run_forever(self, stop: threading.Event | None = None, poll: float = 0.5) -> None:
        """Work until `stop` is set. Writes of this process that make work due (a form
        submitted for an HTTP action, a retry scheduled) wake the worker at once; work
        written by other processes is found within `poll` seconds."""
        stop = stop or threading.Event()
        wake = threading.Event()
        self.store.on_due(lambda: wake.set())
        log.info("worker %s started", self.name)
        while not stop.is_set():
            wake.clear()
            try:
                busy = self.run_once()
            except Exception:  # the database may be briefly unavailable: keep going
                log.exception("worker batch failed")
                busy = 0
            if busy:
                self._busy_at = time.monotonic()
            busy += self.run_duties(
                pressed=time.monotonic() - self._busy_at < DUTY_EVERY)
            if not busy:
                wake.wait(self._idle_wait(poll))
        self.store.on_due(None)

    def run_duties(self, pressed: bool = False) -> int:
        """One round of every duty; a duty that fails is logged and tried next round.
        `pressed` (instances fell due in the last DUTY_EVERY seconds): the duties that
        can wait (`waiting`: expiry, the durations' fold) run only if DUTY_EVERY seconds
        passed since they last did, and the fold takes a short chunk."""
        done, now = 0, time.monotonic()
        self.pressed = pressed
        for duty in self.duties:
            if duty in self.waiting:
                if pressed and now - self._ran.get(duty, -DUTY_EVERY) < DUTY_EVERY:
                    continue
                self._ran[duty] = now
            try:
                done += duty(self)
            except Exception:
                log.exception("worker duty %s failed", getattr(duty, "__name__", duty))
        return done

    def _idle_wait(self, poll: float) -> float:
        """Sleep until the next due moment (at most `poll`); work already due but leased
        by another worker is looked at again after `poll`."""
        due = self.store.next_due()
        if due is None:
            return poll
        wait = (due - self.store.clock()).total_seconds()
        return poll if wait <= 0 else max(0.005, min(poll, wait))


def start_in_thread(store: Store, poll: float = 0.5,
                    **kwargs: Any) -> tuple[Worker, threading.Event]:
    """The in-process worker the web backend runs beside its requests."""
    worker, stop = Worker(store, **kwargs), threading.Event()

    def run() -> None:
        worker.run_forever(stop, poll)

    threading.Thread(target=run, daemon=True, name="bpflow-worker").start()
    return worker, stop

