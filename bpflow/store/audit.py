"""The audit log's rows (SPEC §18): what each admin of a tenant did. Rows are added and
read, never changed nor removed (there is no statement here that would; triggers refuse
both, migration 0021). What is recorded, and its kinds, is `bpflow.audit`'s."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select

from bpflow.store.parts import StoreParts
from bpflow.store.tables import audit_t

TARGET_MAX = 200  # characters of a target kept (the column's width)


class AuditLog(StoreParts):
    """The store's audit log (part of `Store`)."""

    def add_audit(self, actor_id: int | None, actor: str | None, kind: str, target: str,
                  before: Any = None, after: Any = None) -> int:
        """Append what `actor` (None: the installation's operator) did; its id."""
        with self.db.begin() as conn:
            return conn.execute(insert(audit_t).values(
                tenant=self._owner(), at=self.clock(), actor_id=actor_id, actor=actor,
                kind=kind, target=target[:TARGET_MAX], before=before, after=after)
                .returning(audit_t.c.id)).scalar_one()

    def audit_entries(self, after: int | None = None, limit: int = 100, *,
                      before: int | None = None, actor: str | None = None,
                      kind: str | None = None, since: datetime | None = None,
                      until: datetime | None = None) -> list[dict[str, Any]]:
        """This tenant's entries matching the filters, by id: oldest first after `after`;
        newest first before `before` (a page read backwards). `since` inclusive, `until`
        exclusive. Each {"id", "at", "actor_id", "actor", "kind", "target", "before",
        "after"}."""
        c = audit_t.c
        q = select(c.id, c.at, c.actor_id, c.actor, c.kind, c.target, c.before,
                   c.after).where(self._here(audit_t))
        for column, value in ((c.actor, actor), (c.kind, kind)):
            if value is not None:
                q = q.where(column == value)
        if since is not None:
            q = q.where(c.at >= since)
        if until is not None:
            q = q.where(c.at < until)
        if after is not None:
            q = q.where(c.id > after)
        if before is not None:
            q = q.where(c.id < before).order_by(c.id.desc())
        else:
            q = q.order_by(c.id)
        with self.reader() as conn:
            return [dict(r._mapping) for r in conn.execute(q.limit(limit))]
