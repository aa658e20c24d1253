"""Drafts (SPEC §16): the `drafts` rows, a template being designed, one per draft, its
author's. Who may see or change one is `bpflow.access`'s and what a draft may hold is
`bpflow.drafts`'; this module reads and writes the rows of the store's tenant."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, insert, select, update

from bpflow.store.parts import StoreParts
from bpflow.store.tables import drafts_t, users_t

_COLUMNS = (drafts_t.c.id, drafts_t.c.tenant, drafts_t.c.author_id, drafts_t.c.name,
            drafts_t.c.created_at, drafts_t.c.updated_at)


class Drafts(StoreParts):
    """The store's drafts (part of `Store`)."""

    def add_draft(self, author_id: int, name: str, body: Any) -> int:
        """A new draft of `author_id`; its id."""
        now = self.clock()
        with self.db.begin() as conn:
            return conn.execute(insert(drafts_t).values(
                tenant=self._owner(), author_id=author_id, name=name, body=body,
                created_at=now, updated_at=now).returning(drafts_t.c.id)).scalar_one()

    def draft(self, draft_id: int) -> dict[str, Any] | None:
        """A draft of this tenant: {"id", "tenant", "author_id", "author", "name", "body",
        "created_at", "updated_at"}, or None."""
        rows = self._drafts(drafts_t.c.id == draft_id, body=True)
        return rows[0] if rows else None

    def drafts(self, author_id: int | None = None) -> list[dict[str, Any]]:
        """The drafts of `author_id` (None: every author of this tenant), newest change
        first, without their bodies."""
        cond = drafts_t.c.author_id == author_id if author_id is not None else None
        return self._drafts(cond)

    def count_drafts(self, author_id: int) -> int:
        with self.reader() as conn:
            return conn.execute(select(func.count()).select_from(drafts_t).where(
                self._here(drafts_t), drafts_t.c.author_id == author_id)).scalar_one()

    def save_draft(self, draft_id: int, name: str, body: Any) -> bool:
        """Replace a draft's body; False when there is no such draft (any more)."""
        with self.db.begin() as conn:
            return bool(conn.execute(update(drafts_t).where(
                self._here(drafts_t), drafts_t.c.id == draft_id).values(
                name=name, body=body, updated_at=self.clock())).rowcount)

    def delete_draft(self, draft_id: int) -> bool:
        """Remove a draft; False when there was none."""
        with self.db.begin() as conn:
            return bool(conn.execute(delete(drafts_t).where(
                self._here(drafts_t), drafts_t.c.id == draft_id)).rowcount)

    def _drafts(self, cond: Any, body: bool = False) -> list[dict[str, Any]]:
        columns = (*_COLUMNS, drafts_t.c.body) if body else _COLUMNS
        q = (select(*columns, users_t.c.username.label("author"))
             .join(users_t, users_t.c.id == drafts_t.c.author_id)
             .where(self._here(drafts_t))
             .order_by(drafts_t.c.updated_at.desc(), drafts_t.c.id.desc()))
        if cond is not None:
            q = q.where(cond)
        with self.reader() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]
