"""Worker leases: which instances have work due, and who works on them now.

A lease is taken in one transaction (PostgreSQL `FOR UPDATE SKIP LOCKED`, SQLite's single
writer), so an instance is worked on by one worker at a time. Its holder renews it while it
works (`renew_all`, the worker's heartbeat); a crashed holder's lease expires and the
instance is due again.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, or_, select, update

from bpflow.store.parts import StoreParts
from bpflow.store.tables import instances_t
from engine.instance import Instance
from engine.phase import Phase, box_phase


class Leases(StoreParts):
    """The store's worker leases (part of `Store`)."""

    def claim_due(self, owner: str, limit: int = 20, lease: float = 30.0) -> list[str]:
        """Lease up to `limit` instances with due work; a crashed holder's lease expires."""
        now = self.clock()
        q = (select(instances_t.c.id)
             .where(self._here(instances_t), instances_t.c.due_at <= now,
                    or_(instances_t.c.lease_until.is_(None), instances_t.c.lease_until < now))
             .order_by(instances_t.c.due_at).limit(limit))
        if self.postgres:
            q = q.with_for_update(skip_locked=True)
        with self.db.begin() as conn:
            ids = list(conn.execute(q).scalars())
            if ids:
                conn.execute(update(instances_t).where(instances_t.c.id.in_(ids)).values(
                    lease_owner=owner, lease_until=now + timedelta(seconds=lease)))
        return ids

    def renew(self, instance_id: str, owner: str, lease: float) -> bool:
        """Extend `owner`'s lease before a long step; False when it was lost."""
        return instance_id in self.renew_all([instance_id], owner, lease)

    def renew_all(self, ids: list[str], owner: str, lease: float) -> set[str]:
        """Extend `owner`'s leases on these instances to `lease` seconds from now, in one
        statement (a worker's heartbeat); the ids it still held. A lease is lost only to
        another worker (its claim after the lease ran out), never by running out alone."""
        if not ids:
            return set()
        with self.db.begin() as conn:
            return set(conn.execute(
                update(instances_t)
                .where(instances_t.c.id.in_(ids), instances_t.c.lease_owner == owner)
                .values(lease_until=self.clock() + timedelta(seconds=lease))
                .returning(instances_t.c.id)).scalars())

    def release(self, ids: str | list[str], owner: str) -> None:
        """End `owner`'s leases on these instances (one id or many)."""
        ids = [ids] if isinstance(ids, str) else ids
        if not ids:
            return
        with self.db.begin() as conn:
            conn.execute(update(instances_t).where(instances_t.c.id.in_(ids),
                                                   instances_t.c.lease_owner == owner)
                         .values(lease_owner=None, lease_until=None))

    def next_due(self) -> datetime | None:
        with self.reader() as conn:
            return conn.execute(select(func.min(instances_t.c.due_at))
                                .where(self._here(instances_t))).scalar()

    def due_at(self, inst: Instance) -> datetime | None:
        """When a worker should look at the instance next: now if a ready circle runs on
        the worker (an HTTP call), else the engine's next retry, timer or timeout. Never
        for a sandbox (SPEC §16): the designer answers its actions and fires its timers."""
        if inst.sandbox:
            return None
        nodes = inst.template.plan.nodes
        for cid in self.engine.ready(inst):
            box = nodes[cid].circle.box
            if box.action_type in self.worker_actions and \
                    box_phase(box, inst.circles[cid]) is Phase.DUE:
                return inst.circles[cid].ready_at or self.clock()
        return self.engine.wake_at(inst)
