"""Substitutes (代理人, SPEC §15): the `substitutes` rows, one per user who named one. What
they may do is `bpflow.access`'s and what makes one acceptable `bpflow.substitutes`'; this
module reads and writes the rows, and gives an account the people it stands in for
(`standing_of`, read with the account by `Users.account`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import aliased

from bpflow.store.accounts import Standing
from bpflow.store.parts import StoreParts
from bpflow.store.tables import substitutes_t, users_t


class Substitutes(StoreParts):
    """The store's substitutes (part of `Store`)."""

    def put_substitute(self, user_id: int, to_id: int, starts: datetime, ends: datetime,
                       templates: list[str] | None, set_by: str) -> None:
        """Make `to_id` the substitute of `user_id` (instead of any earlier one). Both
        accounts see it at once in this process, elsewhere within `account_ttl`."""
        s = substitutes_t
        with self.db.begin() as conn:
            before = conn.execute(select(s.c.to_id).where(self._here(s), s.c.user_id == user_id)
                                  ).scalar()
            conn.execute(delete(s).where(self._here(s), s.c.user_id == user_id))
            conn.execute(insert(s).values(
                tenant=self._owner(), user_id=user_id, to_id=to_id, starts_at=starts,
                ends_at=ends, templates=templates, set_by=set_by, set_at=self.clock()))
        self._forget_accounts(before, to_id)

    def clear_substitute(self, user_id: int) -> bool:
        """Remove a user's substitute; False when they had none."""
        s = substitutes_t
        with self.db.begin() as conn:
            before = conn.execute(select(s.c.to_id).where(self._here(s), s.c.user_id == user_id)
                                  ).scalar()
            conn.execute(delete(s).where(self._here(s), s.c.user_id == user_id))
        self._forget_accounts(before)
        return before is not None

    def substitute_of(self, user_id: int) -> dict[str, Any] | None:
        """A user's substitute: {"user", "to", "to_id", "from", "until", "templates",
        "set_by", "set_at"} (times as datetimes), or None."""
        s, whom, to = substitutes_t, aliased(users_t), aliased(users_t)
        q = (select(whom.c.username.label("user"), to.c.username.label("to"), s.c.to_id,
                    s.c.starts_at, s.c.ends_at, s.c.templates, s.c.set_by, s.c.set_at)
             .join(whom, whom.c.id == s.c.user_id).join(to, to.c.id == s.c.to_id)
             .where(self._here(s), s.c.user_id == user_id))
        with self.reader() as conn:
            row = conn.execute(q).first()
        return None if row is None else {
            "user": row.user, "to": row.to, "to_id": row.to_id, "from": row.starts_at,
            "until": row.ends_at, "templates": row.templates, "set_by": row.set_by,
            "set_at": row.set_at}

    def substitute_ids(self, user_ids: list[int]) -> dict[int, int]:
        """Each of these users' substitute's id (those having one)."""
        s = substitutes_t
        with self.reader() as conn:
            return dict(conn.execute(select(s.c.user_id, s.c.to_id).where(
                self._here(s), s.c.user_id.in_(user_ids))).all())

    def standing_of(self, conn: Connection, uid: int) -> tuple[Standing, ...]:
        """Whom `uid` is the substitute of, from now on (not yet ended; whether active is
        asked at the time of use): one search of `ix_substitutes_to`."""
        s, u = substitutes_t, users_t
        rows = conn.execute(select(s.c.user_id, u.c.username, s.c.starts_at, s.c.ends_at,
                                   s.c.templates)
                            .join(u, u.c.id == s.c.user_id)
                            .where(s.c.to_id == uid, s.c.ends_at > self.clock())
                            .order_by(u.c.username)).all()
        return tuple(Standing(r.user_id, r.username, r.starts_at, r.ends_at,
                              tuple(r.templates) if r.templates is not None else None)
                     for r in rows)

    def _forget_accounts(self, *ids: int | None) -> None:
        for uid in ids:
            if uid is not None:
                self._accounts.forget(uid)
