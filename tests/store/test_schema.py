"""The Alembic migrations produce exactly the SQLModel schema, on both databases."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

import bpflow.store.tables  # noqa: F401


def test_migrations_match_the_models(store):
    with store.db.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == []


def test_upgrade_is_idempotent_and_sqlite_runs_in_wal_mode(db_url, store):
    from bpflow.store.migrate import upgrade
    upgrade(db_url)  # second run: nothing to do, no error
    tables = set(inspect(store.db).get_table_names())
    assert {"users", "templates", "instances", "circle_states", "events", "mailbox"} <= tables
    if db_url.startswith("sqlite"):
        with store.db.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


@pytest.mark.parametrize("role", ["approver", "admin"])
def test_an_inbox_page_and_its_counts_are_read_from_indexes(tmp_path, role):
    """A page of a big inbox must not sort the whole mailbox: the list is the top of
    `ix_mailbox_list`, the counts come from `ix_mailbox_counts` (an administrator's
    guest messages too)."""
    from sqlalchemy import event

    from bpflow.access import Caller
    from bpflow.mailbox import Mailbox
    from bpflow.store import Store
    from bpflow.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'plan.db'}"
    upgrade(url)  # the migrations' indexes, as a user's database has them
    store = Store(url, secret=b"s" * 32)
    try:
        store.add_user("ann", "ann-password-1", [role])
        user, statements = Caller.of(store.user("ann")), []

        def record(conn, cursor, statement, parameters, context, executemany):
            if statement.lstrip().upper().startswith("SELECT") and "mailbox" in statement:
                statements.append((statement, parameters))

        event.listen(store.db, "before_cursor_execute", record)
        Mailbox(store).inbox(user, kind="approval", limit=25, offset=0)
        store.mail_counts(user)
        event.remove(store.db, "before_cursor_execute", record)
        assert len(statements) == 2
        with store.db.connect() as conn:
            plans = [" | ".join(row[-1] for row in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {sql}", params).all()) for sql, params in statements]
        assert "ix_mailbox_list" in plans[0] and "TEMP B-TREE" not in plans[0], plans[0]
        assert "ix_mailbox_counts" in plans[1] and "SCAN mailbox" not in plans[1], plans[1]
    finally:
        store.close()


def test_user_ids_are_never_reused(store):
    """A token names a user id: an id that came back would hand a deleted user's token
    (and their rights over instances) to the next user created."""
    from sqlalchemy import text
    store.add_user("ann", "ann-password-1")
    gone = store.add_user("bob", "bob-password-1")
    with store.db.begin() as conn:  # deleted by hand, the highest id
        conn.execute(text("DELETE FROM users WHERE id = :i"), {"i": gone})
    assert store.add_user("cid", "cid-password-1") > gone


def test_users_can_be_disabled_and_listed_as_such(store):
    from bpflow.errors import NotFound
    store.add_user("ann", "ann-password-1")
    assert store.disable_user("ann") is True
    assert [(u["username"], u["disabled_at"] is not None) for u in store.list_users()] == \
        [("ann", True)]
    assert store.user("ann") is None and store.authenticate("ann", "ann-password-1") is None
    with pytest.raises(NotFound):
        store.disable_user("nobody")


def test_the_sqlite_users_rebuild_keeps_every_row_and_reference(tmp_path):
    """Migration 0005 rebuilds `users` with AUTOINCREMENT on a database in use: the rows,
    the instances and mail that reference them, and the foreign keys all stay."""
    import sqlite3

    from alembic import command

    from bpflow.store.migrate import alembic_config, upgrade
    url = f"sqlite:///{tmp_path / 'old.db'}"
    command.upgrade(alembic_config(url), "0004")
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    db.execute("PRAGMA foreign_keys=ON")
    at = "2026-01-01 00:00:00"
    for uid, name in ((1, "ann"), (2, "bob"), (3, "cid"), (4, "eve")):
        db.execute("INSERT INTO users VALUES (?, ?, 'x', '[\"user\"]', ?)", (uid, name, at))
    db.execute("INSERT INTO templates VALUES (1, 't', 1, '{}', 'd', ?)", (at,))
    db.execute("INSERT INTO instances (id, template_id, template, version, nested_versions,"
               " user_id, user, status, inputs, variables, seq, lock_version, created_at,"
               " updated_at) VALUES ('i1', 1, 't', 1, '{}', 3, '{}', 'running', '{}', '{}',"
               " 0, 0, ?, ?)", (at, at))
    db.execute("INSERT INTO mailbox (kind, sender_id, sender_name, recipient_id, subject,"
               " body, created_at) VALUES ('message', 3, 'cid', 2, 's', 'b', ?)", (at,))
    db.close()
    upgrade(url)
    upgrade(url)  # idempotent
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    try:
        db.execute("PRAGMA foreign_keys=ON")
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'users'").fetchone()[0]
        assert "AUTOINCREMENT" in sql and "disabled_at" in sql
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        assert db.execute("SELECT id, username FROM users").fetchall() == \
            [(1, "ann"), (2, "bob"), (3, "cid"), (4, "eve")]
        head = db.execute("SELECT version_num FROM alembic_version").fetchall()
        assert head and head[0][0] >= "0005"
        with pytest.raises(sqlite3.IntegrityError):  # the references still hold
            db.execute("DELETE FROM users WHERE id = 3")
        db.execute("DELETE FROM users WHERE id = 4")  # the highest id, deleted by hand
        db.execute("INSERT INTO users (username, password_hash, roles, created_at)"
                   " VALUES ('dan', 'x', '[]', ?)", (at,))
        assert db.execute("SELECT id FROM users WHERE username = 'dan'").fetchone() == (5,)
    finally:
        db.close()
