"""Crowds (SPEC §11): one instance per user started in one set-based write; batch counts.

A crowd is admitted once, as a single start is (the template exists and is not retired or
past its `stop_at`, the inputs fit, the tenant's running-instances quota holds all of
them), then each instance is started by the engine in memory, its user as its starter,
and the rows of all of them reach the database in chunks of executemany, all or nothing
(`Writer.insert_many`), with the `batches` row naming template, version and count.
"""

from __future__ import annotations

import contextlib
import gc
import secrets
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import func, literal, select, union_all

from bpflow.store import audience
from bpflow.store.accounts import Caller, normal_username, valid_roles
from bpflow.store.changes import Change
from bpflow.store.errors import NotFound
from bpflow.store.parts import StoreParts
from bpflow.store.tables import batches_t, circles_t, instances_t, users_t
from bpflow.store.writing import NewInstance
from engine.inputs import InputError
from engine.messages import N_, joined

CHUNK = 2000  # instances built and written at a time (memory holds one chunk)
LOOKUP = 5000  # usernames looked up per query (below every database's parameter limit)
SHOWN = 10  # names an error lists at most
PREFIX = 16  # hex digits of the batch id that begin each of its instances' ids
STATES = ("waiting", "success", "failure", "skipped")  # a circle's
KEYS = 400  # (circle, state) pairs counted per statement (SQLite: 500 SELECTs at most)


class Crowds(StoreParts):
    """(part of `Store`)"""

    def start_batch(self, name: str, users: list[str] | None = None,
                    role: str | None = None, inputs: dict[str, Any] | None = None,
                    version: int | None = None,
                    created_by: str | None = None) -> tuple[str, int]:
        """Start one instance of the template version (latest unless named) per user,
        each user its starter: the named `users` (each once) or the enabled users having
        `role`. Returns (batch id, instances started). Refused as a whole before anything
        is written: NotFound (no template), Conflict (retired, stopped), QuotaExceeded
        (the tenant's running-instances quota cannot take them all), InputError (bad
        inputs; no users; unknown or disabled ones; both users and a role, or neither)."""
        if (users is None) == (role is None):
            raise InputError(N_("name the crowd either by 'users' or by 'role', not both"))
        people = self._crowd(users) if users is not None else self._having(role or "")
        with self._quota_lock() or contextlib.nullcontext():  # count and insert, together
            return self._start_crowd(name, people, inputs, version, created_by)

    def _start_crowd(self, name: str, people: list[dict[str, Any]],
                     inputs: dict[str, Any] | None, version: int | None,
                     created_by: str | None) -> tuple[str, int]:
        row = self._startable_row(name, version, None, count=len(people))
        batch = secrets.token_hex(16)
        ids = crowd_ids(batch, len(people))
        first = self._new_instance(row, inputs, people[0], ids[0], batch)[1]  # inputs checked
        due: list[datetime] = []

        def chunks() -> Iterator[list[NewInstance]]:
            for at in range(0, len(people), CHUNK):
                chunk = [first] if at == 0 else []
                chunk += [self._new_instance(row, inputs, person, iid, batch)[1]
                          for person, iid in zip(people[at + len(chunk):at + CHUNK],
                                                 ids[at + len(chunk):at + CHUNK], strict=True)]
                due.extend(n.instance["due_at"] for n in chunk if n.instance["due_at"])
                yield chunk

        collecting = gc.isenabled()  # a build makes no reference cycles (a test says
        gc.disable()  # so), and the collections it would set off took half its time
        try:
            self.driver.insert_many(chunks(), {
                "id": batch, "tenant": self._owner(), "template": row.name,
                "version": row.version, "started": len(people), "created_by": created_by,
                "created_at": self.clock()})
        finally:
            if collecting:
                gc.enable()
        self._notify(min(due, default=None))  # wakes the worker if work is due now
        # every task list of the tenant
        self.changes.publish([Change("", 0, self.tenant, frozenset({audience.EVERY}))])
        return batch, len(people)

    def _crowd(self, users: list[str]) -> list[dict[str, Any]]:
        """The enabled users of this tenant named (each once, in the order given);
        InputError listing some of the unknown and disabled ones."""
        names = list(dict.fromkeys(normal_username(u) for u in users))
        if not names:
            raise InputError(N_("'users' is empty: name at least one user"))
        found: dict[str, Any] = {}
        q = select(users_t.c.id, users_t.c.username, users_t.c.roles, users_t.c.disabled_at)
        with self.reader() as conn:
            for i in range(0, len(names), LOOKUP):
                part = names[i:i + LOOKUP]
                found.update((r.username, r) for r in conn.execute(q.where(
                    self._here(users_t), users_t.c.username.in_(part))))
        problems = []
        for unknown, wrong in ((True, [n for n in names if n not in found]),
                               (False, [n for n in names if n in found
                                        and found[n].disabled_at is not None])):
            if wrong:
                shown = ", ".join(map(repr, wrong[:SHOWN]))
                if len(wrong) > SHOWN:
                    shown = N_("%(shown)s and %(more)s more", shown=shown,
                               more=len(wrong) - SHOWN)
                problems.append(N_("no user named %(names)s", names=shown) if unknown
                                else N_("disabled %(names)s", names=shown))
        if problems:
            raise InputError(N_("users refused: %(problems)s (nothing was started)",
                                problems=joined(problems)))
        return [_starter(found[n]) for n in names]

    def _having(self, role: str) -> list[dict[str, Any]]:
        """The enabled users of this tenant having `role`, oldest account first."""
        try:
            valid_roles([role])
        except ValueError as exc:
            raise InputError(str(exc)) from None
        q = (select(users_t.c.id, users_t.c.username, users_t.c.roles)
             .where(self._here(users_t), users_t.c.disabled_at.is_(None))
             .order_by(users_t.c.id))
        with self.reader() as conn:
            people = [_starter(r) for r in conn.execute(q) if role in r.roles]
        if not people:
            raise InputError(N_("no enabled user has the role '%(role)s' (nothing was started)",
                                role=role))
        return people

    def batch_stats(self, batch: str) -> dict[str, Any]:
        """A crowd's counts as `stats` gives a template's: circles per state, instances
        per status, with the batch's template, version and size. NotFound for an unknown
        batch or another tenant's."""
        with self.reader() as conn:
            row = conn.execute(select(batches_t).where(
                self._here(batches_t), batches_t.c.id == batch)).first()
        if row is None:
            raise NotFound(N_("no batch '%(id)s'", id=batch))
        template, _ = self._build(self._version_row(row.template, row.version), None)
        counts = self._counts([self._here(instances_t), instances_t.c.batch == batch],
                              lambda conn: self._crowd_counts(conn, row, template.plan.order))
        return {"batch": row.id, "template": row.template, "version": row.version,
                "started": row.started, **counts}

    def _crowd_counts(self, conn, row, circles: list[str]) -> list[Any]:
        """(circle, state, count) of a batch's circle rows, from the partial index
        `ix_circle_states_batch` alone (crowds' rows only; no row read): one count of
        its range per circle of the batch's version and state (~40 % faster than a
        GROUP BY over the same entries). When some of its instances moved to another
        version (a migration: their new circles carry the batch too), a GROUP BY."""
        c, i = circles_t, instances_t
        ours = [c.c.tenant == self._owner(), c.c.batch == row.id, c.c.batch.is_not(None)]
        moved = conn.execute(select(func.count()).where(
            i.c.batch == row.id, i.c.tenant == row.tenant, i.c.version != row.version)).scalar()
        if moved:
            return list(conn.execute(select(c.c.circle, c.c.state, func.count())
                                     .where(*ours).group_by(c.c.circle, c.c.state)))
        keys = [(cid, state) for cid in circles for state in STATES]
        found = []
        for at in range(0, len(keys), KEYS):
            k = union_all(*(select(literal(cid).label("circle"), literal(state).label("state"))
                            for cid, state in keys[at:at + KEYS])).subquery("k")
            n = select(func.count()).where(c.c.circle == k.c.circle, c.c.state == k.c.state,
                                           *ours).scalar_subquery()
            found += [r for r in conn.execute(select(k.c.circle, k.c.state, n)) if r[2]]
        return found


def crowd_ids(batch: str, count: int) -> list[str]:
    """The instance ids of a crowd: the batch's first 16 hex digits, then 16 random ones,
    in ascending order. Unguessable as any instance id, and the crowd's rows are
    neighbours in every table and index keyed by instance id (inserted in that order)."""
    prefix = batch[:PREFIX]
    suffixes = sorted({secrets.randbits(64) for _ in range(count)})
    while len(suffixes) < count:  # a repeat among 64-bit random numbers: draw again
        suffixes = sorted(set(suffixes) | {secrets.randbits(64)})
    return [f"{prefix}{n:016x}" for n in suffixes]


def _starter(row: Any) -> dict[str, Any]:
    """The user record an instance keeps of its starter (as a single start keeps it)."""
    return Caller(row.id, row.username, tuple(row.roles)).as_user()
