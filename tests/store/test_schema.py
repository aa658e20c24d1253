"""The Alembic migrations produce exactly the SQLModel schema, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

import bpflow.models  # noqa: F401


def test_migrations_match_the_models(store):
    with store.db.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == []


def test_upgrade_is_idempotent_and_sqlite_runs_in_wal_mode(db_url, store):
    from bpflow.schema import upgrade
    upgrade(db_url)  # second run: nothing to do, no error
    tables = set(inspect(store.db).get_table_names())
    assert {"users", "templates", "instances", "circle_states", "events", "mailbox"} <= tables
    if db_url.startswith("sqlite"):
        with store.db.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
