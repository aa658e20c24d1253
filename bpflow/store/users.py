"""Users: added with hashed passwords, valid usernames (`bpflow.security.valid_username`)
and valid role names (built in or custom: `bpflow.access.valid_roles`), looked up,
authenticated, given other roles or a new password (which ends their sessions), disabled
(never deleted: ids are never reused, and a
disabled account's tokens stop working)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, overload

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from bpflow.store.accounts import (
    Caller,
    check_nobody,
    check_password,
    hash_password,
    normal_username,
    valid_roles,
    valid_username,
)
from bpflow.store.errors import NotFound
from bpflow.store.parts import StoreParts
from bpflow.store.reads import straight
from bpflow.store.reuse import Reused
from bpflow.store.tables import users_t
from engine.messages import N_

ACCOUNT_TTL = 2.0  # seconds this process reuses a users-table lookup of a token's account
_BY_NAME = select(users_t).where(users_t.c.username == bindparam("b_username"))
USER = {False: straight(_BY_NAME),  # any tenant's, and this store's tenant's
        True: straight(_BY_NAME.where(users_t.c.tenant == bindparam("b_tenant")))}


class Users(StoreParts):
    """The store's users (part of `Store`)."""

    account_ttl = ACCOUNT_TTL
    _accounts: Reused  # by user id
    _users: Reused  # by (tenant of the view, username)

    def add_user(self, username: str, password: str, roles: Iterable[str] = ("user",)) -> int:
        """A new user of this store's tenant. Usernames are unique across the installation
        (a sign-in names no tenant: the account does)."""
        roles = valid_roles(roles)
        username = valid_username(username)
        try:
            with self.db.begin() as conn:
                uid = conn.execute(insert(users_t).values(
                    tenant=self._owner(), username=username,
                    password_hash=hash_password(password), roles=roles,
                    created_at=self.clock()).returning(users_t.c.id)).scalar_one()
        except IntegrityError as exc:
            raise ValueError(N_("user '%(name)s' already exists", name=username)) from exc
        self._users.forget()  # a lookup of the name before it existed is not reused
        return uid

    def disable_user(self, username: str) -> bool:
        """Disable an account (what deleting a user means): it can no longer sign in, and
        its tokens are refused within `account_ttl` seconds (at once in this process).
        False when it was disabled already; NotFound when there is no such user."""
        name = normal_username(username)
        with self.db.begin() as conn:
            row = conn.execute(select(users_t.c.id, users_t.c.disabled_at)
                               .where(self._here(users_t), users_t.c.username == name)).first()
            if row is None:
                raise NotFound(N_("no user named %(name)s", name=name))
            if row.disabled_at is not None:
                return False
            conn.execute(update(users_t).where(users_t.c.id == row.id)
                         .values(disabled_at=self.clock()))
        self._accounts.forget(row.id)
        self._users.forget()
        return True

    def set_roles(self, username: str, roles: Iterable[str]) -> list[str]:
        """Give a user these roles (instead of theirs): the roles as stored. ValueError for
        invalid ones; NotFound when there is no such user. Their tokens carry the new
        roles within `account_ttl` seconds (at once in this process)."""
        roles = valid_roles(roles)
        name = normal_username(username)
        with self.db.begin() as conn:
            uid = conn.execute(select(users_t.c.id).where(
                self._here(users_t), users_t.c.username == name)).scalar()
            if uid is None:
                raise NotFound(N_("no user named %(name)s", name=name))
            conn.execute(update(users_t).where(users_t.c.id == uid).values(roles=roles))
        self._accounts.forget(uid)
        self._users.forget()
        return roles

    def set_password(self, username: str, password: str) -> int:
        """Give a user (of this store's tenant) a new password, ending every session of
        theirs: the account's token generation grows, so the tokens issued before are
        refused within `account_ttl` seconds (at once in this process). The new
        generation, to issue the token of a session that goes on; NotFound when there is
        no such user. (Whether the password is good enough is the caller's to check:
        `bpflow.accounts`.)"""
        name = normal_username(username)
        hashed = hash_password(password)  # a tenth of a second: outside the transaction
        with self.db.begin() as conn:
            row = conn.execute(update(users_t).where(
                self._here(users_t), users_t.c.username == name).values(
                password_hash=hashed, token_generation=users_t.c.token_generation + 1)
                .returning(users_t.c.id, users_t.c.token_generation)).first()
        if row is None:
            raise NotFound(N_("no user named %(name)s", name=name))
        self._accounts.forget(row.id)
        self._users.forget()
        return int(row.token_generation)

    def set_language(self, uid: int, language: str | None) -> None:
        """Keep the language a user chose (a code of `bpflow.languages`, checked there;
        None: their browser's again). Their `user` record has it at once in this
        process."""
        with self.db.begin() as conn:
            conn.execute(update(users_t).where(self._here(users_t), users_t.c.id == uid)
                         .values(language=language))
        self._users.forget()

    def account(self, uid: int) -> Caller | None:
        """The caller a token's user id stands for now (roles and tenant from the users
        table, whom they are the substitute of: `standing_of`), or None when the account
        does not exist or is disabled; each lookup is reused for `account_ttl` seconds.
        (Any tenant's: a token is checked here.)"""
        def load() -> Caller | None:
            with self.reader() as conn:
                row = conn.execute(select(users_t.c.id, users_t.c.username, users_t.c.roles,
                                          users_t.c.disabled_at, users_t.c.tenant,
                                          users_t.c.token_generation)
                                   .where(users_t.c.id == uid)).first()
                if row is None or row.disabled_at is not None:
                    return None
                return Caller(row.id, row.username, tuple(row.roles), row.tenant,
                              row.token_generation, self.standing_of(conn, uid))
        return self._accounts.get(uid, self.account_ttl, load)

    def has_users(self) -> bool:
        with self.reader() as conn:
            return conn.execute(select(users_t.c.id).where(self._here(users_t))
                                .limit(1)).first() is not None

    def username_taken(self, username: str) -> bool:
        """Whether any tenant has an account of this name (enabled or not)."""
        with self.reader() as conn:
            return conn.execute(select(users_t.c.id).where(
                users_t.c.username == normal_username(username))).first() is not None

    def user(self, username: str) -> dict[str, Any] | None:
        """An active user's record (None for an unknown or disabled one, or one of
        another tenant). Each lookup is reused for `account_ttl` seconds, as a token's
        (a change through this process counts at once)."""
        name = normal_username(username)

        def load() -> dict[str, Any] | None:
            rows = self._rows(USER[self.tenant is not None],
                              {"username": name, "tenant": self.tenant})
            row = rows[0] if rows else None
            return None if row is None or row.disabled_at is not None else {
                "id": row.id, "username": row.username, "roles": list(row.roles),
                "tenant": row.tenant, "language": row.language,
                "generation": row.token_generation}
        found = self._users.get((self.tenant, name), self.account_ttl, load)
        return None if found is None else {**found, "roles": list(found["roles"])}

    def authenticate(self, username: str, password: str) -> dict[str, Any] | None:
        """The user record for these credentials (with its tenant: signing in names no
        tenant); None for wrong ones or a disabled account (which costs the same
        password check)."""
        with self.reader() as conn:
            row = conn.execute(select(users_t).where(
                users_t.c.username == normal_username(username))).first()
        if row is None:
            check_nobody(password)  # the cost of a real account's check
            return None
        if not check_password(password, row.password_hash) or row.disabled_at is not None:
            return None
        return {"id": row.id, "username": row.username, "roles": list(row.roles),
                "tenant": row.tenant, "generation": row.token_generation}

    @overload
    def list_users(self, role: None = None) -> list[dict[str, Any]]: ...

    @overload
    def list_users(self, role: str) -> list[str]: ...

    def list_users(self, role: str | None = None) -> list[dict[str, Any]] | list[str]:
        """Every user with their roles, by name (never a password hash); with `role`, the
        usernames of the enabled users having that role (`usernames`)."""
        if role is not None:
            return self.usernames(role)
        q = select(users_t.c.id, users_t.c.username, users_t.c.roles, users_t.c.created_at,
                   users_t.c.disabled_at, users_t.c.tenant).where(self._here(users_t)
                                                                  ).order_by(users_t.c.username)
        with self.reader() as conn:
            return [{"id": r.id, "username": r.username, "roles": list(r.roles),
                     "created_at": r.created_at, "disabled_at": r.disabled_at,
                     "tenant": r.tenant}
                    for r in conn.execute(q)]

    def usernames(self, role: str | None = None) -> list[str]:
        """The enabled users' usernames, sorted, only those having `role` when one is named
        (a picker of people: a form's `user` field)."""
        q = (select(users_t.c.username, users_t.c.roles)
             .where(self._here(users_t), users_t.c.disabled_at.is_(None))
             .order_by(users_t.c.username))
        with self.reader() as conn:
            return [r.username for r in conn.execute(q) if role is None or role in r.roles]

    def user_ids(self, conn: Connection, names: list[str]) -> dict[str, int]:
        """The ids of these active usernames (on an open connection); NotFound names the
        missing."""
        found: dict[str, int] = dict(conn.execute(select(users_t.c.username, users_t.c.id).where(
            self._here(users_t), users_t.c.username.in_(names),
            users_t.c.disabled_at.is_(None))).all())
        missing = [n for n in names if n not in found]
        if missing:
            raise NotFound(N_("no user named %(name)s", name=", ".join(missing)))
        return found
