"""Steps: every engine transition persisted atomically, one writer per instance.

An operation runs against the instance in memory, then one transaction writes the
instance row with a compare-and-set on `lock_version`, the changed circle rows and the
new history events: all of it commits, or none of it. A lost race is re-run on fresh
state (where a used bookmark is refused), so updates are never lost nor applied twice,
across threads, processes and machines.

The retry loop is written once (`_attempts`, a generator that yields what it needs from
the database); `apply` serves it on the calling thread, `apply_async` on an event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError

from bpflow.store.alchemy import save_rows
from bpflow.store.errors import AlreadyStarted, Conflict, NotFound
from bpflow.store.instances import started
from bpflow.store.keys import derive
from bpflow.store.parts import StoreParts
from bpflow.store.writing import Lost
from engine.errors import BpflowError
from engine.instance import Instance
from engine.messages import N_
from engine.model import Template
from engine.runtime import Engine

T = TypeVar("T")
# (database, tenant) -> the lock its starts take while a running-instances quota applies:
# the quota's count and the insert are then one at a time in this process (SPEC §12)
_QUOTA_LOCKS: dict[tuple[int, str], threading.Lock] = {}
_QUOTA_LOCKS_GUARD = threading.Lock()
Op = Callable[[Engine, Instance], T]
Attempts = Generator[tuple[Callable[..., Any], Callable[..., Awaitable[Any]], tuple], Any, T]


class Steps(StoreParts):
    """Starting instances and applying steps to them (part of `Store`)."""

    def start(self, name: str, inputs: dict[str, Any] | None = None,
              user: dict[str, Any] | None = None, version: int | None = None,
              instance_id: str | None = None,
              admit: Callable[[dict[str, Any]], None] | None = None,
              quota: bool = True) -> Instance:
        """A new instance of the template version (latest unless named), started.

        `admit` is given the version's body first and raises to refuse the start (who may
        start it: `bpflow.access.startable`); a retired template is refused (Conflict).
        With `instance_id` (`keyed_id`: an idempotent start), an instance of that id that
        exists already is answered with `AlreadyStarted`, however close together the two
        starts came. `quota=False`: not counted against the tenant's running-instances
        quota (the app's own frame, `signin`: signing in is never refused for it)."""
        lock = self._quota_lock() if quota else None
        if lock is None:
            return self._start(name, inputs, user, version, instance_id, admit, quota)
        with lock:  # the quota's count and the insert, one start at a time
            return self._start(name, inputs, user, version, instance_id, admit, quota)

    def _start(self, name: str, inputs: dict[str, Any] | None, user: dict[str, Any] | None,
               version: int | None, instance_id: str | None,
               admit: Callable[[dict[str, Any]], None] | None,
               quota: bool = True) -> Instance:
        row = self._startable_row(name, version, admit, quota)
        loaded, new = self._new_instance(row, inputs, user, instance_id)
        try:
            self.driver.insert(new)
        except (sqlite3.IntegrityError, IntegrityError) as exc:
            self._taken(instance_id, exc)
        return self._begun(loaded, new)

    def _quota_lock(self) -> threading.Lock | None:
        """The lock of this tenant's starts while it has a running-instances quota."""
        if self.tenant is None or self.quotas().get("instances") is None:
            return None
        key = (id(self.db), self.tenant)
        with _QUOTA_LOCKS_GUARD:
            return _QUOTA_LOCKS.setdefault(key, threading.Lock())

    async def start_async(self, name: str, inputs: dict[str, Any] | None = None,
                          user: dict[str, Any] | None = None,
                          version: int | None = None, instance_id: str | None = None,
                          admit: Callable[[dict[str, Any]], None] | None = None
                          ) -> Instance:
        """`start` for an event loop: the commit is awaited, not blocked on. A template
        not analysed yet in this process, or whose first steps may evaluate expressions,
        starts on a thread, as does a start of a tenant with a running-instances quota
        (under its lock: `start`)."""
        if self._quota_lock() is not None:
            return await asyncio.to_thread(self.start, name, inputs, user, version,
                                           instance_id, admit)
        row = self._startable_row(name, version, admit)  # read once: the only lookup
        built = self._built(row)
        if built is None or self.evaluates(built):
            loaded, new = await asyncio.to_thread(self._new_instance, row, inputs, user,
                                                  instance_id)
        else:
            loaded, new = self._new_instance(row, inputs, user, instance_id)
        try:
            await self.driver.insert_async(new)
        except (sqlite3.IntegrityError, IntegrityError) as exc:
            await asyncio.to_thread(self._taken, instance_id, exc)
        return self._begun(loaded, new)

    def keyed_id(self, user_id: int | None, key: str) -> str:
        """The id an idempotent start of this user with this key gives its instance
        (SPEC §10 `Idempotency-Key`): the same for the same user and key, unguessable
        without the server's secret, and never another user's."""
        secret = derive(self.secret, "idempotency")
        return hmac.new(secret, f"{user_id}:{key}".encode(), hashlib.sha256).hexdigest()[:32]

    def _startable_row(self, name: str, version: int | None,
                       admit: Callable[[dict[str, Any]], None] | None, quota: bool = True,
                       count: int = 1):
        """The version row a start (of `count` instances: a crowd) may begin from."""
        row = self._version_row(name, version)
        if quota:
            self._admit_instance(count)
        if self.is_retired(name):
            raise Conflict(N_("template '%(name)s' is retired: it cannot be started (running"
                              " instances go on)", name=name))
        if row.stop_at is not None and self.clock() >= row.stop_at:  # SPEC §11
            raise Conflict(N_("template '%(name)s' stopped taking starts at %(at)s (its stop_at)",
                              name=name, at=row.stop_at.isoformat()))
        if admit is not None:
            admit(row.body)
        return row

    def _taken(self, instance_id: str | None, exc: Exception) -> None:
        """After an insert refused by the database: `AlreadyStarted` when the id was
        taken, else the refusal itself."""
        if instance_id is None:
            raise exc
        try:
            first = self._load(instance_id).inst
        except NotFound:
            raise exc from None
        raise AlreadyStarted(first)

    def _begun(self, loaded, new) -> Instance:
        self.changes.publish([started(new)])
        self._keep(loaded)
        self._notify(new.instance["due_at"])
        if (hook := self._step_hook[0]) is not None:  # a start is a step too (metrics)
            hook([loaded.inst.tenant], None)
        return loaded.inst

    def apply(self, instance_id: str, op: Op[T], optimistic: int = 3) -> T:
        """Run `op` on the instance and persist what it did, as one atomic step.

        First optimistically (the cached or freshly read state, then a compare-and-set);
        after `optimistic` lost races, under a row lock held from read to write, so a
        busy instance still makes progress (one writer at a time, never a lost update).
        """
        attempts, reply = self._attempts(instance_id, op, optimistic), None
        with self._step_span(instance_id):
            try:
                while True:
                    serve, _, args = attempts.send(reply)
                    reply = serve(*args)
            except StopIteration as done:
                return done.value

    async def apply_async(self, instance_id: str, op: Op[T], optimistic: int = 3) -> T:
        """`apply` for an event loop: `op` runs on the loop, the commit is awaited (on
        SQLite, group commit with the steps that arrive together) and a read the cache
        cannot serve runs on a thread."""
        attempts, reply = self._attempts(instance_id, op, optimistic), None
        with self._step_span(instance_id):
            try:
                while True:
                    _, serve, args = attempts.send(reply)
                    reply = await serve(*args)
            except StopIteration as done:
                return done.value

    def _step_span(self, instance_id: str) -> AbstractContextManager[Any]:
        """What a step of `instance_id` runs inside: its trace span (`on_step_span`)."""
        factory = self._span_hook[0]
        if factory is None:
            return contextlib.nullcontext()
        return factory("step", **{"bpflow.instance": instance_id})

    def _attempts(self, instance_id: str, op: Op[T], optimistic: int) -> Attempts[T]:
        """The optimistic loop. It yields what it needs of the database as (how a thread
        gets it, how an event loop awaits it, arguments): a fresh read, the commit of a
        step (answered with the ids whose compare-and-set lost) and, when every attempt
        lost, the locked path's value."""
        fresh = False
        for _ in range(optimistic):
            loaded = None if fresh else self._take(instance_id)
            if loaded is None:
                loaded = yield self._load, self._load_async, (instance_id,)
                fresh = True
            try:
                if self.evaluates(loaded.inst.template):  # off the event loop: see `evaluates`
                    value = (yield self._run, self._run_async, (op, loaded.inst)).result()
                else:
                    value = op(self.engine, loaded.inst)
            except BpflowError:
                if fresh:
                    raise  # refused on the stored state: a real refusal
                fresh = True  # our copy may be stale: decide on the stored state
                continue
            write = self._step_write(loaded, loaded.inst.drain_events())
            began = time.perf_counter()
            if (yield self.driver.save, self.driver.save_async, ([write],)):
                fresh = True  # lost the compare-and-set
                continue
            self._written([write], time.perf_counter() - began)
            return value
        return (yield self._apply_locked, self._apply_locked_async, (instance_id, op))

    def evaluates(self, template: Template) -> bool:
        """Whether a step of this template may evaluate expressions (`when`, `compute`).
        Such steps never run on an event loop: expressions are bounded in time (engine
        limits), but a server's loop must not wait for them at all."""
        hit = self._evaluating.get(id(template))
        if hit is None or hit[0] is not template:
            uses = any(node.circle.when or node.circle.box.action_type == "compute"
                       for node in template.plan.nodes.values())
            hit = self._evaluating[id(template)] = (template, uses)
        return hit[1]

    def _run(self, op: Op, inst: Instance) -> Future:
        """`op` on `inst`, its value or error in a resolved future (the attempt loop
        raises it where it decides about errors)."""
        done: Future = Future()
        try:
            done.set_result(op(self.engine, inst))
        except BpflowError as exc:
            done.set_exception(exc)
        return done

    async def _run_async(self, op: Op, inst: Instance) -> Future:
        return await asyncio.to_thread(self._run, op, inst)

    async def _apply_locked_async(self, instance_id: str, op: Op[T]) -> T:
        return await asyncio.to_thread(self._apply_locked, instance_id, op)

    def _apply_locked(self, instance_id: str, op: Op[T]) -> T:
        began = time.perf_counter()
        with self.db.begin() as conn:  # SQLite: BEGIN IMMEDIATE already excludes writers
            loaded = self._load(instance_id, conn, lock=True)
            value = op(self.engine, loaded.inst)
            write = self._step_write(loaded, loaded.inst.drain_events())
            if save_rows(conn, [write]):
                raise Lost()  # cannot happen under the lock
        self._written([write], time.perf_counter() - began)
        return value

    def apply_many(self, ids: list[str], op: Op) -> dict[str, Any]:
        """`apply` for many instances with one transaction (the worker's timer batches):
        each value, or the BpflowError that refused it, by id. An instance whose cached
        copy was stale or whose compare-and-set lost goes through `apply` on its own."""
        results: dict[str, Any] = {}
        writes = []
        alone: list[str] = []
        cached = {iid: loaded for iid in ids if (loaded := self._take(iid)) is not None}
        stored = self._load_many([iid for iid in ids if iid not in cached])
        for iid in ids:
            loaded = cached.get(iid) or stored.get(iid)
            if loaded is None:
                results[iid] = NotFound(N_("no instance '%(id)s'", id=iid))
                continue
            try:
                with self._step_span(iid):  # its commit is the batch's, after
                    results[iid] = op(self.engine, loaded.inst)
            except BpflowError:
                alone.append(iid)  # decided again on its own, on the stored state
                continue
            writes.append(self._step_write(loaded, loaded.inst.drain_events()))
        began = time.perf_counter()
        lost = self.driver.save(writes) if writes else set()
        self._written([w for w in writes if w.row["id"] not in lost],
                      time.perf_counter() - began if writes else None)
        for iid in alone + sorted(lost):
            try:
                results[iid] = self.apply(iid, op)
            except BpflowError as exc:
                results[iid] = exc
        return results

    # --------------------------------------------------- the engine's operations
    def complete(self, instance_id: str, cid: str, bookmark: str, result: Any = None,
                 actor: str | None = None) -> Instance:
        return self._step(instance_id, lambda e, i: e.complete(i, cid, bookmark, result, actor))

    def fail(self, instance_id: str, cid: str, bookmark: str, reason: str,
             actor: str | None = None) -> Instance:
        return self._step(instance_id, lambda e, i: e.fail(i, cid, bookmark, reason, actor))

    def reset(self, instance_id: str, cid: str, scope: str = "self", levels: int | None = None,
              actor: str | None = None) -> Instance:
        return self._step(instance_id, lambda e, i: e.reset(i, cid, scope, levels, actor))

    def suspend(self, instance_id: str, actor: str | None = None) -> Instance:
        return self._step(instance_id, lambda e, i: e.suspend(i, actor))

    def resume(self, instance_id: str, actor: str | None = None) -> Instance:
        return self._step(instance_id, lambda e, i: e.resume(i, actor))

    def abort(self, instance_id: str, reason: str = "aborted",
              actor: str | None = None) -> Instance:
        return self._step(instance_id, lambda e, i: e.abort(i, reason, actor))

    def tick(self, instance_id: str) -> Instance:
        return self._step(instance_id, lambda e, i: e.tick(i))

    def _step(self, instance_id: str, op: Callable[[Engine, Instance], Any]) -> Instance:
        """`apply` of an operation, answering with the instance as it then is."""
        return self.apply(instance_id, lambda e, i: (op(e, i), i)[1])
