"""The SQLite write path straight through sqlite3, and what a write carries.

The store's steps are small (one instance row, a few circle rows, a few events), so the
per-statement cost of SQLAlchemy would dominate the durable commit; on SQLite the store
hands its prepared rows to this writer instead. PostgreSQL goes through SQLAlchemy.
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

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


Job = Callable[[sqlite3.Connection], Any]
Waiter = asyncio.Future  # of an event loop, resolved on that loop


def dumps(value: Any) -> str:
    """JSON text as the database keeps it (orjson: a tenth of the time of `json`)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _report(outcomes: list[tuple[Future | Waiter, Any, BaseException | None]]) -> None:
    """Hand each job its value or error: thread futures at once, an event loop's futures
    with one wake-up of that loop for the whole batch."""
    by_loop: dict[asyncio.AbstractEventLoop, list] = {}
    for future, value, error in outcomes:
        if isinstance(future, asyncio.Future):
            by_loop.setdefault(future.get_loop(), []).append((future, value, error))
        elif error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, items)
        except RuntimeError:  # that loop is closed: nobody waits any more
            pass


def _settle(items: list[tuple[Waiter, Any, BaseException | None]]) -> None:
    for future, value, error in items:
        if future.done():  # the waiting request was cancelled
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


class SqliteWriter:
    """The write path on SQLite straight through sqlite3, with group commit.

    One thread owns the write connection; any thread (or event loop) hands it a job and
    waits for the outcome. The thread takes every job queued meanwhile into one
    `BEGIN IMMEDIATE` transaction, each job under its own savepoint (a job that fails
    leaves the others alone), and reports only after the `COMMIT`: durability per step
    as before, but one fsync for all the steps that arrived during the previous one, and
    no two threads of this process polling SQLite's write lock. The statements are the
    ones SQLAlchemy would send, without its per-statement cost; values are stored exactly
    as SQLAlchemy stores them, so either side reads both."""

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
    MAX_BATCH = 200

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []

    # ------------------------------------------------------------ the jobs
    def insert(self, instance: dict[str, Any], circles: list[dict[str, Any]],
               events: list[dict[str, Any]], pinned: list[dict[str, Any]]) -> None:
        """A new instance with its circles, pinned nested versions and first events, in
        one transaction."""
        self.submit(self.insert_job(instance, circles, events, pinned)).result()

    def insert_job(self, instance: dict[str, Any], circles: list[dict[str, Any]],
                   events: list[dict[str, Any]], pinned: list[dict[str, Any]]) -> Job:
        statements = [(self._insert_sql("instances", instance), [self._sql(instance)]),
                      (self._insert_sql("circle_states", circles[0]),
                       [self._sql(c) for c in circles])]
        if pinned:
            statements.append((self._insert_sql("instance_templates", pinned[0]), pinned))
        statements.append((self.EVENT, [self._sql(e) for e in events]))

        def job(conn: sqlite3.Connection) -> None:
            for sql, rows in statements:
                conn.executemany(sql, rows)
        return job

    def save_all(self, writes: list[Write],
                 event_rows: Callable[[str, list[Event]], list[dict[str, Any]]]) -> set[str]:
        """Every write in one transaction; the ids whose compare-and-set lost."""
        return self.submit(self.save_job(writes, event_rows)).result()

    def save_job(self, writes: list[Write],
                 event_rows: Callable[[str, list[Event]], list[dict[str, Any]]]) -> Job:
        steps = [(self._sql(w.row), [self._sql(c) for c in w.changed],
                  [self._sql(e) for e in event_rows(w.row["id"], w.events)])
                 for w in writes]

        def job(conn: sqlite3.Connection) -> set[str]:
            lost = set()
            for row, changed, events in steps:
                if conn.execute(self.CAS, row).rowcount != 1:
                    lost.add(row["id"])
                    continue
                if changed:
                    conn.executemany(self.CIRCLE, changed)
                if events:
                    conn.executemany(self.EVENT, events)
            return lost
        return job

    def _sql(self, row: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in row.items():
            if isinstance(v, datetime):
                v = v.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
            elif k in self.JSON:
                v = dumps(v)
            out[k] = v
        return out

    @staticmethod
    def _insert_sql(table: str, row: dict[str, Any]) -> str:
        return (f"INSERT INTO {table} ({', '.join(row)}) VALUES"
                f" ({', '.join(':' + k for k in row)})")

    def scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """The first column of the first row of a small read (a connection of this
        thread, autocommit: WAL readers never wait for the writer)."""
        pid, conn = getattr(self._local, "conn", (None, None))
        if pid != os.getpid():  # none yet in this thread, or inherited through a fork
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
            self._local.conn = (os.getpid(), conn)
            with self._lock:
                self._readers.append(conn)
        row = conn.execute(sql, params).fetchone()
        return row[0] if row else None

    # -------------------------------------------------------- group commit
    def submit(self, job: Job, waiter: Waiter | None = None) -> Future | None:
        """Queue `job` (run inside a write transaction); its future resolves once that
        transaction committed (with the job's value) or failed. With `waiter` (an event
        loop's future) that is resolved instead, on its loop."""
        future: Future | None = Future() if waiter is None else None
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's thread is not here
                self._pid, self._queue, self._thread = os.getpid(), queue.SimpleQueue(), None
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="bpflow-sqlite-writer",
                                                daemon=True)
                self._thread.start()
            self._queue.put((job, future if waiter is None else waiter))
        return future

    async def run(self, job: Job) -> Any:
        """`submit` for an event loop: awaits the commit without blocking the loop."""
        waiter = asyncio.get_running_loop().create_future()
        self.submit(job, waiter)
        return await waiter

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                               check_same_thread=False)
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON",
                       f"busy_timeout={SQLITE_BUSY_MS}"):
            conn.execute(f"PRAGMA {pragma}")
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                batch = [item]
                while len(batch) < self.MAX_BATCH:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        self._queue.put(None)  # stop after this batch
                        break
                    batch.append(item)
                self._commit(conn, batch)
        finally:
            conn.close()

    @staticmethod
    def _commit(conn: sqlite3.Connection, batch: list[tuple[Job, Future | Waiter]]) -> None:
        outcomes: list[tuple[Future | Waiter, Any, BaseException | None]] = []
        live = [(job, f) for job, f in batch
                if isinstance(f, asyncio.Future) or f.set_running_or_notify_cancel()]
        try:
            begin_immediate(conn)
        except BaseException as exc:
            _report([(future, None, exc) for _, future in live])
            return
        alone = len(live) == 1
        try:
            for job, future in live:
                if not alone:
                    conn.execute("SAVEPOINT job")
                try:
                    value = job(conn)
                except Exception as exc:
                    if alone:
                        raise
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    outcomes.append((future, None, exc))
                    continue
                if not alone:
                    conn.execute("RELEASE job")
                outcomes.append((future, value, None))
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            _report([(future, None, exc) for _, future in live])
            return
        _report(outcomes)

    def close(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None and self._pid == os.getpid():
                self._queue.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)
        with self._lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            self._local = threading.local()
