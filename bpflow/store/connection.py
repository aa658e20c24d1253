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


# SQLite's own busy handler backs off to 100 ms sleeps, which shows in tail latencies; it
# gets a few milliseconds, and taking the write lock is retried here with short sleeps.
SQLITE_BUSY_MS = 5
WRITE_LOCK_TIMEOUT_S = 30.0


def sqlite_pragmas(conn: sqlite3.Connection, busy_ms: int = SQLITE_BUSY_MS,
                   wal: bool = True) -> None:
    """The settings of every connection to the store's SQLite file: write-ahead log,
    full sync at commit (a step answered is on disk), foreign keys, a short busy wait.
    SQLite checkpoints the log in the commit that crosses 1,000 pages."""
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    for pragma in ("synchronous=FULL", "foreign_keys=ON", f"busy_timeout={busy_ms}"):
        conn.execute(f"PRAGMA {pragma}")


def sqlite_connect(path: str, busy_ms: int = SQLITE_BUSY_MS) -> sqlite3.Connection:
    """A plain sqlite3 connection with the store's settings; transactions are begun by
    the caller (`isolation_level=None`)."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    sqlite_pragmas(conn, busy_ms)
    return conn


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        sqlite_pragmas(dbapi_conn, wal=engine.url.database not in (None, "", ":memory:"))

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        if mode == "IMMEDIATE":
            begin_immediate(conn.connection.driver_connection)
        else:
            conn.exec_driver_sql(f"BEGIN {mode}")


class LockWait:
    """Waiting for SQLite's write lock: the pause before the next try (doubling from
    `first` up to `longest`), until `timeout` seconds have passed since the first."""

    def __init__(self, first: float = 0.0002, longest: float = 0.002,
                 timeout: float | None = None):
        self.first, self.longest = first, longest
        self.timeout = timeout  # None: WRITE_LOCK_TIMEOUT_S as it is when waiting
        self.since: float | None = None
        self.pause = first

    @staticmethod
    def busy(exc: sqlite3.OperationalError) -> bool:
        """Whether the error means another connection holds the lock."""
        text = str(exc)
        return "locked" in text or "busy" in text

    def next(self, exc: sqlite3.OperationalError) -> float | None:
        """The pause before trying again, or None when `exc` is not a lock wait or the
        time is up (the caller then raises it)."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
        limit = WRITE_LOCK_TIMEOUT_S if self.timeout is None else self.timeout
        if not self.busy(exc) or now - self.since >= limit:
            self.reset()
            return None
        pause = self.pause
        self.pause = min(self.pause * 2, self.longest)
        return pause

    def reset(self) -> None:
        self.since, self.pause = None, self.first


def begin_immediate(dbapi_conn: sqlite3.Connection) -> None:
    """`BEGIN IMMEDIATE`, waiting for the write lock in small steps."""
    wait = LockWait()
    while True:
        try:
            dbapi_conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            pause = wait.next(exc)
            if pause is None:
                raise
            time.sleep(pause)


def aware(t: datetime | None) -> datetime | None:
    """`t`, refused when naive: every write path stores aware UTC times only."""
    if t is not None and t.tzinfo is None:
        raise ValueError("naive datetime given to the database; use UTC-aware ones")
    return t


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every backend (SQLite keeps naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if (value := aware(value)) is None:
            return None
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
