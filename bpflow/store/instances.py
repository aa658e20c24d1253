"""Instances as stored: reading them (with a small cache of the ones this process wrote
last), and the rows of a new instance and of a step.

A cached copy is only ever used as the starting point of a step, whose compare-and-set
tells whether someone else wrote since (then the step is re-run on a fresh read), or for
what hardly ever changes in an instance (its owner; its template, which only a migration
to another version changes): `peek` serves a copy kept in the last PEEK_FRESH_S seconds,
so a migration made by another process is seen within that time.

An instance once answered (by a start or a step, or by `peek`) is never changed again: a
step changes a copy of the cached one (`_take`), so an answer still being made on one
thread never sees a step of another thread half done (a migration's new template with the
old circles, or the reverse).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

from sqlalchemy import bindparam, select

from bpflow.store import statements as sql
from bpflow.store.changes import Change
from bpflow.store.errors import NotFound
from bpflow.store.parts import StoreParts
from bpflow.store.reads import Straight, by_ids, straight
from bpflow.store.tables import circles_t, instances_t, templates_t
from bpflow.store.writing import NewInstance, Write
from engine.instance import COMPLETED, TERMINATED, Event, Instance
from engine.messages import N_
from engine.migration import MIGRATED
from engine.moves import ACTIVE

PEEK_FRESH_S = 5.0  # how long `peek` trusts a copy for its template (see above)
# instances by id (of every tenant, of one) and their circles, in each driver's form
INSTANCES = {False: by_ids(lambda ids: select(instances_t).where(ids(instances_t.c.id))),
             True: by_ids(lambda ids: select(instances_t).where(
                 ids(instances_t.c.id), instances_t.c.tenant == bindparam("b_tenant")))}
CIRCLES = by_ids(lambda ids: select(circles_t).where(ids(circles_t.c.instance_id)))
# an instance's lock_version (of every tenant's, of one): whether a copy is still current
_VERSION = select(instances_t.c.lock_version).where(instances_t.c.id == bindparam("b_id"))
VERSION = {False: straight(_VERSION),
           True: straight(_VERSION.where(instances_t.c.tenant == bindparam("b_tenant")))}


def _one(loaded: dict[str, Loaded], instance_id: str) -> Loaded:
    """The instance read, or NotFound."""
    if instance_id not in loaded:
        raise NotFound(N_("no instance '%(id)s'", id=instance_id))
    return loaded[instance_id]


@dataclass
class Loaded:
    """An instance with what its rows held when read or last written."""

    inst: Instance
    lock_version: int
    circles: dict[str, sql.Snapshot]  # circle rows as last written, to write only changes
    listed: bool = True  # whether its open tasks are in `task_audience` (it is active)
    kept_at: float = 0.0  # (monotonic) when it was read or written last
    batch: str | None = None  # the crowd it was started in (`instances.batch`)
    # (status, due_at) as its row holds them at `lock_version`; None: not known
    stored: tuple[str, Any] | None = None


class Instances(StoreParts):
    """Reading and caching instances (part of `Store`)."""

    def get(self, instance_id: str) -> Instance:
        """A fresh copy of the instance as stored."""
        return self._load(instance_id).inst

    def get_many(self, ids: list[str]) -> dict[str, Instance]:
        """Fresh copies of instances as stored, by id (two queries however many); the
        missing ones left out."""
        return {iid: loaded.inst for iid, loaded in self._load_many(ids).items()}

    def peek(self, instance_id: str) -> Instance:
        """The instance for what never changes in it (its owner, its template): the
        cached copy when there is one, else it is read and cached. Its state may be
        stale and must not be changed; use `apply` for that."""
        loaded = self._cached(instance_id)
        return loaded.inst if loaded is not None else self._peeked(self._load(instance_id))

    def current(self, instance_id: str) -> Instance:
        """The instance as stored now, to read and not change: this process's copy when
        the stored row's `lock_version` is still the copy's (every write of an instance
        moves it: one indexed read of a number), else read whole (and kept for `peek`)."""
        with self._lock:
            loaded = self._cache.get(instance_id)
        if self._mine(loaded):
            found = self._rows(VERSION[self.tenant is not None],
                               {"id": instance_id, "tenant": self.tenant})
            if not found:
                raise NotFound(N_("no instance '%(id)s'", id=instance_id))
            if found[0].lock_version == loaded.lock_version:
                return loaded.inst
        return self._peeked(self._load(instance_id))

    async def peek_async(self, instance_id: str) -> Instance:
        """`peek` for an event loop."""
        loaded = self._cached(instance_id)
        if loaded is not None:
            return loaded.inst
        return self._peeked(await self._load_async(instance_id))

    def _peeked(self, loaded: Loaded) -> Instance:
        loaded.kept_at = time.monotonic()
        with self._lock:  # a step that finished meanwhile keeps its newer copy
            kept = self._cache.get(loaded.inst.id)
            if kept is not None and kept.lock_version > loaded.lock_version:
                return kept.inst
            self._cache[loaded.inst.id] = loaded
            return loaded.inst

    # ------------------------------------------------------------------ cache
    def _mine(self, loaded: Loaded | None) -> TypeGuard[Loaded]:
        return loaded is not None and (self.tenant is None or loaded.inst.tenant == self.tenant)

    def _cached(self, instance_id: str) -> Loaded | None:
        """The cached copy for `peek`, if this store's tenant may see it (the cache is
        shared) and it was kept in the last PEEK_FRESH_S seconds."""
        with self._lock:
            loaded = self._cache.get(instance_id)
        if not self._mine(loaded) or time.monotonic() - loaded.kept_at > PEEK_FRESH_S:
            return None
        return loaded

    def _take(self, instance_id: str) -> Loaded | None:
        """The cached copy for a step to change, taken out of the cache: a copy of it
        (`Instance.copy`), since the cached instance may have been handed out (a step's
        answer, `peek`) and whoever holds it may still be reading it (an answer being
        made while a migration replaces the template and the circles)."""
        with self._lock:
            loaded = self._cache.get(instance_id)
            if not self._mine(loaded):
                return None  # another tenant's: as if it were not there (then NotFound)
            del self._cache[instance_id]
        return dataclasses.replace(loaded, inst=loaded.inst.copy())

    def _keep(self, loaded: Loaded) -> None:
        if loaded.inst.status in (COMPLETED, TERMINATED):
            return  # rarely touched again (a reset reads it back): not worth the memory
        loaded.kept_at = time.monotonic()
        with self._lock:
            self._cache[loaded.inst.id] = loaded
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    # ---------------------------------------------------------------- reading
    def _load(self, instance_id: str, conn=None, lock: bool = False) -> Loaded:
        return _one(self._load_many([instance_id], conn, lock), instance_id)

    async def _load_async(self, instance_id: str) -> Loaded:
        """`_load` for an event loop: read as the driver reads for a loop (PostgreSQL: on
        the loop's own connections; else on a thread), the instance made on the loop
        unless its template is one this process has not seen yet (made on a thread)."""
        rows, circles = await self.driver.rows_async(*self._reads([instance_id]))
        if all(row.template_id in self._template_rows for row in rows):
            loaded = self._loaded(rows, circles)
        else:
            loaded = await asyncio.to_thread(self._loaded, rows, circles)
        return _one(loaded, instance_id)

    def _reads(self, ids: list[str]) -> tuple[tuple[Straight, dict[str, Any]], ...]:
        """The reads of instances (of this store's tenant) and their circles."""
        values = {"ids": ids, "tenant": self.tenant}
        return (INSTANCES[self.tenant is not None], values), (CIRCLES, values)

    def _load_many(self, ids: list[str], conn=None, lock: bool = False) -> dict[str, Loaded]:
        """Instances as stored (two queries however many); missing ids are left out.
        Through the driver (one snapshot), or on `conn`, an SQLAlchemy connection (the
        locked path: `lock` holds their rows until it commits)."""
        if conn is None:
            rows, circles = self.driver.rows(*self._reads(ids))
            return self._loaded(rows, circles)
        q = select(instances_t).where(instances_t.c.id.in_(ids), self._here(instances_t))
        if lock:  # FOR UPDATE (SQLite has none: its BEGIN IMMEDIATE excludes writers)
            q = q.with_for_update()
        rows = conn.execute(q).all()
        circles = conn.execute(select(circles_t).where(circles_t.c.instance_id.in_(ids))) \
            if rows else []
        return self._loaded(rows, circles, conn)

    def _loaded(self, rows: list[Any], circles: Any, conn=None) -> dict[str, Loaded]:
        """The loaded instances of instance rows and their circle rows."""
        circle_rows: dict[str, list] = {}
        for r in circles:
            circle_rows.setdefault(r.instance_id, []).append(r)
        trows = self._read_templates({row.template_id for row in rows}, conn)
        out = {}
        for row in rows:
            trow = trows[row.template_id]
            template, _ = self._build(trow, dict(row.nested_versions))
            inst = Instance(
                id=row.id, template=template, status=row.status, inputs=row.inputs,
                user=row.user, circles={r.circle: sql.circle_run(r)
                                        for r in circle_rows.get(row.id, [])},
                created_at=row.created_at, updated_at=row.updated_at, version=row.version,
                reason=row.reason, seq=row.seq, tenant=row.tenant, sandbox=row.sandbox)
            out[row.id] = Loaded(inst, row.lock_version,
                                 {cid: sql.snapshot(run, inst.sandbox)
                                  for cid, run in inst.circles.items()},
                                 row.status in ACTIVE, batch=row.batch,
                                 stored=(row.status, row.due_at))
        return out

    def _read_templates(self, ids: set[int], conn=None) -> dict[int, Any]:
        """The template rows of `ids`, all read in one query, on `conn` or on a reading
        connection of its own: a version's once per process (versions never change), a
        sandbox's each time (SPEC §16: a draft tried again replaces its row, perhaps
        under the same id, from any process: the database is its truth)."""
        rows = {tid: self._template_rows[tid] for tid in ids if tid in self._template_rows}
        missing = ids - rows.keys()
        if not missing:
            return rows
        query = select(templates_t).where(templates_t.c.id.in_(sorted(missing)))
        if conn is None:
            with self.reader() as reading:
                found = reading.execute(query).all()
        else:
            found = conn.execute(query).all()
        for trow in found:
            rows[trow.id] = trow
            if not trow.sandbox:
                self._template_rows[trow.id] = trow
        return rows

    # ------------------------------------------------------------------ rows
    def _version_row(self, name: str, version: int | None):
        """The template version an instance starts from; NotFound when there is none."""
        row = self._template_row(name, version) if version else self._latest_row(name)
        if row is None:
            raise NotFound(N_("no template '%(name)s'", name=name) if not version else
                           N_("no template '%(name)s' version %(version)s", name=name,
                              version=version))
        return row

    def _new_instance(self, row, inputs: dict[str, Any] | None,
                      user: dict[str, Any] | None,
                      instance_id: str | None = None,
                      batch: str | None = None) -> tuple[Loaded, NewInstance]:
        """A new instance of version `row` (started by the engine, with `instance_id` or a
        new one; one of crowd `batch`) and its rows."""
        name, tenant = row.name, self._owner()
        template, nested = self._build(row, None)
        user = user or {}
        inst = self.engine.start(template, inputs, user, instance_id=instance_id,
                                 version=row.version, actor=user.get("username"))
        inst.tenant, inst.sandbox = tenant, bool(row.sandbox)  # a draft's body: a sandbox
        events = inst.drain_events()
        circles = {cid: sql.snapshot(run, inst.sandbox) for cid, run in inst.circles.items()}
        variables = self.engine.variables(inst)
        self._admit_variables(variables)
        values = {"id": inst.id, "tenant": tenant, "template_id": row.id, "template": name,
                  "version": row.version, "nested_versions": nested, "user_id": user.get("id"),
                  "user": user, "status": inst.status, "reason": inst.reason,
                  "inputs": inst.inputs, "variables": variables,
                  "seq": inst.seq, "lock_version": 1, "due_at": self.due_at(inst),
                  "created_at": inst.created_at, "updated_at": inst.updated_at,
                  "batch": batch, "sandbox": inst.sandbox}
        new = NewInstance(
            values, [sql.circle_row(inst.id, cid, d, tenant, batch) for cid, d in circles.items()],
            sql.event_rows(inst.id, tenant, events),
            [{"instance_id": inst.id, "tenant": tenant,
              "template_id": self._version_id(n, v)} for n, v in nested.items()],
            [a for cid, d in circles.items()
             for a in sql.audience_rows(inst.id, tenant, cid, d)]
            if inst.status in ACTIVE else [])
        return Loaded(inst, 1, circles, inst.status in ACTIVE, batch=batch,
                      stored=(inst.status, values["due_at"])), new

    def _step_write(self, loaded: Loaded, events: list[Event]) -> Write:
        """The rows of a step: the instance row's compare-and-set, the circles that
        changed, the new events."""
        inst = loaded.inst
        circles = {cid: sql.snapshot(run, inst.sandbox) for cid, run in inst.circles.items()}
        # the open tasks of an active instance are listed (`task_audience`), of no other
        changed, retold, audience = [], [], []
        listed, was = inst.status in ACTIVE, loaded.listed
        for cid, d in circles.items():
            before = loaded.circles.get(cid)
            if before != d:
                changed.append(sql.circle_row(inst.id, cid, d))
            old = before[sql.AUDIENCE] if before is not None and was else None
            new = d[sql.AUDIENCE] if listed else None
            if old != new:
                if old is not None:  # rows to take away (none for a task just opened)
                    retold.append({"instance_id": inst.id, "circle": cid})
                if new is not None:
                    audience += sql.audience_rows(inst.id, inst.tenant, cid, d)
        variables = self.engine.variables(inst)
        self.of(inst.tenant)._admit_variables(variables)
        row = {"id": inst.id, "lock": loaded.lock_version, "status": inst.status,
               "reason": inst.reason, "seq": inst.seq, "variables": variables,
               "due_at": self.due_at(inst), "next_lock": loaded.lock_version + 1,
               "updated_at": inst.updated_at}
        write = Write(loaded, circles, row, changed, events, retold, audience)
        if any(e.kind == MIGRATED for e in events):
            self._moved(write)  # Migrating: the rows of another template version
        return write

    def _written(self, writes: list[Write], commit: float | None = None) -> None:
        """Bring the loaded copies of committed writes up to what is stored, keep them,
        wake the worker for work now due, and tell the pages what changed (and the
        metrics, `on_steps`, how long the commit took: `commit` seconds)."""
        self.changes.publish([changed(w) for w in writes])
        for w in writes:
            w.loaded.lock_version += 1
            w.loaded.circles = w.circles
            w.loaded.listed = w.row["status"] in ACTIVE
            w.loaded.stored = (w.row["status"], w.row["due_at"])
            self._keep(w.loaded)
            self._notify(w.row["due_at"])
        hook = self._step_hook[0]
        if hook is not None and writes:
            hook([w.loaded.inst.tenant for w in writes], commit)

    def _notify(self, due_at: datetime | None) -> None:
        if self._on_due is not None and due_at is not None and due_at <= self.clock():
            self._on_due()


def changed(write: Write) -> Change:
    """The change a committed step made: its instance's new event counter and the task
    lists (audience tokens) of the circles whose task it opened, changed or closed."""
    tokens = {r["who"] for r in write.audience}
    for r in write.changed + write.retold:
        before = write.loaded.circles.get(r["circle"])
        for text in (before[sql.AUDIENCE] if before else None, r.get("audience")):
            if text:
                tokens.update(text.split())
    inst = write.loaded.inst
    return Change(inst.id, write.row["seq"], inst.tenant, frozenset(tokens))


def started(new: NewInstance) -> Change:
    """The change a committed start made."""
    row = new.instance
    return Change(row["id"], row["seq"], row["tenant"],
                  frozenset(r["who"] for r in new.audience))
