"""The SQLite write path straight through sqlite3, and what a write carries.

The store's steps are small (one instance row, a few circle rows, a few events), so the
per-statement cost of SQLAlchemy would dominate the durable commit; on SQLite the store
hands its prepared rows to this writer instead. PostgreSQL goes through SQLAlchemy.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bpflow.db import SQLITE_BUSY_MS, begin_immediate
from engine.instance import Event

CIRCLE_COLUMNS = ("state", "result", "reason", "attempts", "next_attempt_at", "ready_at",
                  "due_at", "epoch", "pending")


class Lost(Exception):
    """Our compare-and-set lost against another writer."""


@dataclass
class Write:
    """One instance's step, ready to be written."""

    loaded: Any  # the store's loaded instance
    circles: dict[str, dict[str, Any]]
    row: dict[str, Any]
    changed: list[dict[str, Any]]
    events: list[Event]



class SqliteWriter:
    """The write path on SQLite straight through sqlite3 (one connection per thread):
    the same three statements in one `BEGIN IMMEDIATE` transaction, without the
    per-statement cost of SQLAlchemy that would otherwise dominate a durable commit.
    Values are stored exactly as SQLAlchemy stores them, so either side reads both."""

    CAS = ("UPDATE instances SET status=:status, reason=:reason, seq=:seq, "
           "variables=:variables, due_at=:due_at, lock_version=:next_lock, "
           "updated_at=:updated_at WHERE id=:id AND lock_version=:lock")
    CIRCLE = ("UPDATE circle_states SET " + ", ".join(f"{k}=:{k}" for k in CIRCLE_COLUMNS)
              + " WHERE instance_id=:instance_id AND circle=:circle")
    EVENT = ("INSERT INTO events (instance_id, seq, at, kind, actor, circle, before, after,"
             " data) VALUES (:instance_id, :seq, :at, :kind, :actor, :circle, :before, :after,"
             " :data)")
    JSON = {"variables", "result", "before", "after", "data", "pending", "nested_versions",
            "user", "inputs"}

    def __init__(self, path: str):
        self.path = path
        self.local = threading.local()
        self.all: list[sqlite3.Connection] = []
        self.lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                   check_same_thread=False)
            for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON",
                           f"busy_timeout={SQLITE_BUSY_MS}"):
                conn.execute(f"PRAGMA {pragma}")
            self.local.conn = conn
            with self.lock:
                self.all.append(conn)
        return conn

    def _sql(self, row: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in row.items():
            if isinstance(v, datetime):
                v = v.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
            elif k in self.JSON:
                v = json.dumps(v)
            out[k] = v
        return out

    def insert(self, instance: dict[str, Any], circles: list[dict[str, Any]],
               events: list[dict[str, Any]], pinned: list[dict[str, Any]]) -> None:
        """A new instance with its circles, pinned nested versions and first events, in
        one transaction."""
        conn = self._conn()
        begin_immediate(conn)
        try:
            conn.execute(self._insert_sql("instances", instance), self._sql(instance))
            conn.executemany(self._insert_sql("circle_states", circles[0]),
                             [self._sql(c) for c in circles])
            if pinned:
                conn.executemany(self._insert_sql("instance_templates", pinned[0]), pinned)
            conn.executemany(self.EVENT, [self._sql(e) for e in events])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _insert_sql(table: str, row: dict[str, Any]) -> str:
        return (f"INSERT INTO {table} ({', '.join(row)}) VALUES"
                f" ({', '.join(':' + k for k in row)})")

    def save_all(self, writes: list[Write],
                 event_rows: Callable[[str, list[Event]], list[dict[str, Any]]]) -> set[str]:
        conn = self._conn()
        lost = set()
        begin_immediate(conn)
        try:
            for w in writes:
                if conn.execute(self.CAS, self._sql(w.row)).rowcount != 1:
                    lost.add(w.row["id"])
                    continue
                if w.changed:
                    conn.executemany(self.CIRCLE, [self._sql(c) for c in w.changed])
                if w.events:
                    conn.executemany(self.EVENT, [self._sql(e) for e in
                                                  event_rows(w.row["id"], w.events)])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return lost

    def close(self) -> None:
        with self.lock:
            for conn in self.all:
                conn.close()
            self.all.clear()
        self.local = threading.local()

