"""Users: added with hashed passwords and known roles, looked up, authenticated."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from bpflow.access import valid_roles
from bpflow.errors import NotFound
from bpflow.security import check_password, hash_password
from bpflow.store.tables import users_t


class Users:
    """The store's users (part of `Store`)."""

    def add_user(self, username: str, password: str, roles: Iterable[str] = ("user",)) -> int:
        roles = valid_roles(roles)
        if not username or len(username) > 100:
            raise ValueError("a username has 1 to 100 characters")
        try:
            with self.db.begin() as conn:
                return conn.execute(insert(users_t).values(
                    username=username, password_hash=hash_password(password), roles=roles,
                    created_at=self.clock())).inserted_primary_key[0]
        except IntegrityError as exc:
            raise ValueError(f"user '{username}' already exists") from exc

    def has_users(self) -> bool:
        with self.reader() as conn:
            return conn.execute(select(users_t.c.id).limit(1)).first() is not None

    def user(self, username: str) -> dict[str, Any] | None:
        with self.reader() as conn:
            row = conn.execute(select(users_t).where(users_t.c.username == username)).first()
        return {"id": row.id, "username": row.username, "roles": list(row.roles)} if row else None

    def authenticate(self, username: str, password: str) -> dict[str, Any] | None:
        with self.reader() as conn:
            row = conn.execute(select(users_t).where(users_t.c.username == username)).first()
        if row is None:
            check_password(password, hash_password("timing"))  # same cost either way
            return None
        if not check_password(password, row.password_hash):
            return None
        return {"id": row.id, "username": row.username, "roles": list(row.roles)}

    def list_users(self) -> list[dict[str, Any]]:
        """Every user with their roles, by name (never a password hash)."""
        q = select(users_t.c.id, users_t.c.username, users_t.c.roles,
                   users_t.c.created_at).order_by(users_t.c.username)
        with self.reader() as conn:
            return [{"id": r.id, "username": r.username, "roles": list(r.roles),
                     "created_at": r.created_at} for r in conn.execute(q)]

    def user_ids(self, conn: Connection, names: list[str]) -> dict[str, int]:
        """The ids of these usernames (on an open connection); NotFound names the missing."""
        found = dict(conn.execute(select(users_t.c.username, users_t.c.id)
                                  .where(users_t.c.username.in_(names))).all())
        missing = [n for n in names if n not in found]
        if missing:
            raise NotFound(f"no user named {', '.join(missing)}")
        return found
