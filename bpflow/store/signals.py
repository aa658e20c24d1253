"""Signals (SPEC §11): delivering a signal to the circles of this tenant that wait for it,
and finding the instances whose template version stopped at its `stop_at`.

A ready `signal` circle's row carries the token it waits for (`circle_states.signal`,
`engine.signals.token`), null otherwise, under a partial index on (tenant, signal): a
signal finds its circles with one indexed read, then completes each with its own atomic
step, which checks again, on the instance as it is then, that the circle still waits for
this token (two identical signals at once complete a circle once: the second finds it
moved and does not count it).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from sqlalchemy import bindparam, select

from bpflow.store.errors import Conflict, NotFound
from bpflow.store.parts import StoreParts
from bpflow.store.reads import straight
from bpflow.store.tables import circles_t, instances_t, templates_t
from engine.errors import TransitionError
from engine.instance import FAILED, RUNNING, SUSPENDED, Instance
from engine.messages import N_
from engine.runtime import Engine
from engine.signals import token, waiting_for

EXPIRING = (RUNNING, FAILED, SUSPENDED)  # what `stop_at` terminates (abort's statuses)
_AT_ONCE = 64  # steps of one signal in flight together on an event loop
_WAITING = straight(select(circles_t.c.instance_id, circles_t.c.circle).where(
    circles_t.c.tenant == bindparam("b_tenant"), circles_t.c.signal.is_not(None),
    circles_t.c.signal == bindparam("b_signal")))  # `is_not`: the partial index


class Moved(Conflict):
    """The circle no longer waits for this signal (completed, reset or failed meanwhile)."""


def delivering(cid: str, wanted: str, data: Any, actor: str | None):
    """The step completing circle `cid` with `data` if it still waits for `wanted`."""
    def op(engine: Engine, inst: Instance) -> None:
        run = inst.circles.get(cid)
        if run is None or waiting_for(run) != wanted:
            raise Moved(N_("circle '%(uri)s' no longer waits for this signal", uri=cid))
        engine.complete(inst, cid, engine.bookmark(inst, cid), data, actor)
    return op


_NOT_DELIVERED = (Moved, TransitionError, NotFound)  # moved, suspended, deleted meanwhile


class _Lookups:
    """The lookups of the signals arriving on one event loop, one thread hop at a time:
    those that arrive while one runs go together in the next (their instances read in
    one query), so a busy server reads in batches that grow with its load."""

    def __init__(self, store: Any):
        self.store = store
        self.queued: list[tuple[Any, str, Any, list[tuple[str, str]] | None,
                                asyncio.Future]] = []
        self.running = False

    def ask(self, view: Any, name: str, key: Any,
            found: list[tuple[str, str]] | None) -> asyncio.Future:
        """The circles waiting for `name` and `key` (`found`, when already looked up),
        their instances read into the cache."""
        answer = asyncio.get_running_loop().create_future()
        self.queued.append((view, name, key, found, answer))
        if not self.running:
            self.running = True
            asyncio.get_running_loop().create_task(self._run())
        return answer

    async def _run(self) -> None:
        try:
            while self.queued:
                batch, self.queued = self.queued, []
                try:
                    found = await asyncio.to_thread(self.store._looked_up,
                                                    [ask[:4] for ask in batch])
                except Exception as exc:  # each asker gets the error
                    found = [exc] * len(batch)
                for (*_, answer), rows in zip(batch, found, strict=True):
                    if answer.done():
                        continue  # its request was cancelled
                    if isinstance(rows, Exception):
                        answer.set_exception(rows)
                    else:
                        answer.set_result(rows)
        finally:
            self.running = False


# per event loop, per database: the loop's batches of lookups
_LOOKUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _lookups(store: Any) -> _Lookups:
    mine = _LOOKUPS.setdefault(asyncio.get_running_loop(), {})
    found = mine.get(store.db)
    if found is None:
        found = mine[store.db] = _Lookups(store.of(None))
    return found


class Signals(StoreParts):
    """(part of `Store`)"""

    def waiting(self, name: str, key: Any) -> list[tuple[str, str]]:
        """(instance id, circle) of every circle of this tenant waiting for the signal
        `name` with `key` (through the partial index on the signal column)."""
        values = {"tenant": self._owner(), "signal": token(name, key)}
        return sorted((row.instance_id, row.circle) for row in self._rows(_WAITING, values))

    def _looked_up(self, asks: list[tuple[Any, str, Any, list | None]]
                   ) -> list[list[tuple[str, str]]]:
        """`waiting` of each (store of a tenant, name, key, what it found if it looked
        already), with the instances found read into the cache (those not there yet, in
        one read for all) so that the steps completing them need not read them again."""
        found = [view.waiting(name, key) if rows is None else rows
                 for view, name, key, rows in asks]
        missing = list({iid for rows in found for iid, _ in rows if self._cached(iid) is None})
        if missing:  # ids of the tenants' own circles: read with the view of every tenant
            every = self.of(None)
            for loaded in every._load_many(missing).values():
                every._peeked(loaded)
        return found

    def signal(self, name: str, key: Any = None, data: Any = None,
               actor: str | None = None) -> int:
        """Complete every circle of this tenant waiting for `name` and `key` with `data` as
        its result; how many were completed (one that moved meanwhile is not counted)."""
        wanted, delivered = token(name, key), 0
        for iid, cid in self.waiting(name, key):
            try:
                self.apply(iid, delivering(cid, wanted, data, actor))
            except _NOT_DELIVERED:
                continue
            delivered += 1
        return delivered

    async def signal_async(self, name: str, key: Any = None, data: Any = None,
                           actor: str | None = None) -> int:
        """`signal` for an event loop: the steps are awaited (on SQLite committed
        together). Where the driver's reads may run on the loop (sqlite3: one indexed
        read, as a start finds its template) the circles are found there; when instances
        must be read (not in the cache), or the driver's reads wait for a server, the
        lookup runs on a thread, together with those of the signals that arrived
        meanwhile (`_Lookups`)."""
        wanted = token(name, key)
        found = self.waiting(name, key) if self.driver.reads_on_loop else None
        if found is None or any(self._cached(iid) is None for iid, _ in found):
            found = await _lookups(self).ask(self, name, key, found)

        async def one(iid: str, cid: str) -> int:
            try:
                await self.apply_async(iid, delivering(cid, wanted, data, actor))
            except _NOT_DELIVERED:
                return 0
            return 1

        delivered = 0
        for start in range(0, len(found), _AT_ONCE):
            done = await asyncio.gather(*(one(iid, cid) for iid, cid
                                          in found[start:start + _AT_ONCE]))
            delivered += sum(done)
        return delivered

    def expired(self, limit: int = 100) -> list[str]:
        """Ids of instances still running, failed or suspended whose template version's
        `stop_at` has passed (of every tenant for the worker's view), oldest first.
        The versions past their `stop_at` are looked up first (a few rows): the worker
        asks every round, and as one join the planner could walk every instance in
        the order of their creation to find none."""
        with self.reader() as conn:
            versions = list(conn.execute(select(templates_t.c.id).where(
                templates_t.c.stop_at.is_not(None), templates_t.c.stop_at <= self.clock()))
                .scalars())
            if not versions:
                return []
            return list(conn.execute(
                select(instances_t.c.id)
                .where(self._here(instances_t), instances_t.c.template_id.in_(versions),
                       instances_t.c.status.in_(EXPIRING))
                .order_by(instances_t.c.created_at, instances_t.c.id).limit(limit)).scalars())
