"""Database connections: SQLite by default (WAL, full sync), any SQLAlchemy URL otherwise.

SQLite write transactions start with `BEGIN IMMEDIATE`, so two processes never both
read a snapshot and then fight over the upgrade to a write lock; readers ask for
`DEFERRED` with the `sqlite_begin` execution option.
"""

from __future__ import annotations

import os
import sqlite3
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.types import TypeDecorator

DEFAULT_URL = "sqlite:///bpflow.db"


def database_url(url: str | None = None) -> str:
    return url or os.environ.get("DATABASE_URL") or DEFAULT_URL


def normalize_url(url: str) -> str:
    """Use psycopg 3 for plain postgres URLs (it is the driver we install)."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def make_engine(url: str | None = None, **kwargs: Any) -> Engine:
    url = normalize_url(database_url(url))
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                               **kwargs)
        _sqlite_setup(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        if engine.url.database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        if mode == "IMMEDIATE":
            begin_immediate(conn.connection.driver_connection)
        else:
            conn.exec_driver_sql(f"BEGIN {mode}")


# SQLite's own busy handler backs off to 100 ms sleeps, which shows in tail latencies; it
# gets a few milliseconds, and taking the write lock is retried here with short sleeps.
SQLITE_BUSY_MS = 5
WRITE_LOCK_TIMEOUT_S = 30.0


def begin_immediate(dbapi_conn: sqlite3.Connection) -> None:
    """`BEGIN IMMEDIATE`, waiting for the write lock in small steps."""
    deadline = time.monotonic() + WRITE_LOCK_TIMEOUT_S
    pause = 0.0002
    while True:
        try:
            dbapi_conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.002)


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes on every backend (SQLite keeps naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database; use UTC-aware ones")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
