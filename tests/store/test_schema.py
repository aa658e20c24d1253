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
