"""The SQLite write path straight through sqlite3, and what a write carries.

The store's steps are small (one instance row, a few circle rows, a few events), so the
per-statement cost of SQLAlchemy would dominate the durable commit; on SQLite the store
hands its prepared rows to this writer instead. PostgreSQL goes through SQLAlchemy.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from bpflow.db import SQLITE_BUSY_MS, WRITE_LOCK_TIMEOUT_S, begin_immediate
from engine.instance import Event

CIRCLE_COLUMNS = ("state", "result", "reason", "attempts", "next_attempt_at", "ready_at",
                  "due_at", "epoch", "pending")


class Lost(Exception):
    """Our compare-and-set lost against another writer."""


@dataclass
class Write:
    """One instance's step, ready to be written."""

    loaded: Any  # the store's loaded instance
    circles: dict[str, tuple[Any, ...]]  # the circles as stored after this write
    row: dict[str, Any]
    changed: list[dict[str, Any]]
    events: list[Event]


Job = Callable[[sqlite3.Connection], Any]
Waiter = asyncio.Future  # of an event loop, resolved on that loop


def sql_time(t: datetime) -> str:
    """A UTC time as SQLAlchemy stores it in SQLite ("YYYY-MM-DD HH:MM:SS.ffffff")."""
    if t.tzinfo is not UTC:
        t = t.astimezone(UTC)
    return t.replace(tzinfo=None).isoformat(" ", "microseconds")


def _time(t: datetime | None) -> str | None:
    return None if t is None else sql_time(t)


def _circle(c: dict[str, Any]) -> tuple[Any, ...]:
    """A circle row's values for CIRCLE / CIRCLE_INSERT."""
    return (c["state"], dumps(c["result"]), c["reason"], c["attempts"],
            _time(c["next_attempt_at"]), _time(c["ready_at"]), _time(c["due_at"]), c["epoch"],
            dumps(c["pending"]), c["instance_id"], c["circle"])


def _event(e: dict[str, Any]) -> tuple[Any, ...]:
    """An event row's values for EVENT."""
    return (e["instance_id"], e["seq"], _time(e["at"]), e["kind"], e["actor"], e["circle"],
            dumps(e["before"]), dumps(e["after"]), dumps(e["data"]))


def dumps(value: Any) -> str:
    """JSON text as the database keeps it (orjson: a tenth of the time of `json`)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _settle(items: list[tuple[Waiter, Any, BaseException | None]]) -> None:
    for future, value, error in items:
        if future.done():  # the waiting request was cancelled
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


class SqliteWriter:
    """The write path on SQLite straight through sqlite3: the statements SQLAlchemy would
    send, without its per-statement cost; values are stored exactly as SQLAlchemy stores
    them, so either side reads both. A thread writes on a connection of its own (`write`);
    an event loop hands its steps to its `LoopWriter` (`run`), which commits the steps
    that arrive together in one transaction."""

    CAS = ("UPDATE instances SET status=:status, reason=:reason, seq=:seq, "
           "variables=:variables, due_at=:due_at, lock_version=:next_lock, "
           "updated_at=:updated_at WHERE id=:id AND lock_version=:lock")
    # circles and events positionally (the bulk of a step's rows): see _circle, _event
    CIRCLE = ("UPDATE circle_states SET " + ", ".join(f"{k}=?" for k in CIRCLE_COLUMNS)
              + " WHERE instance_id=? AND circle=?")
    CIRCLE_INSERT = (f"INSERT INTO circle_states ({', '.join(CIRCLE_COLUMNS)}, instance_id,"
                     f" circle) VALUES ({', '.join('?' * (len(CIRCLE_COLUMNS) + 2))})")
    EVENT = ("INSERT INTO events (instance_id, seq, at, kind, actor, circle, before, after,"
             " data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
    JSON = {"variables", "result", "before", "after", "data", "pending", "nested_versions",
            "user", "inputs"}

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []  # of every thread
        self._loops: dict[asyncio.AbstractEventLoop, LoopWriter] = {}

    # ------------------------------------------------------------ the jobs
    def insert(self, instance: dict[str, Any], circles: list[dict[str, Any]],
               events: list[dict[str, Any]], pinned: list[dict[str, Any]]) -> None:
        """A new instance with its circles, pinned nested versions and first events, in
        one transaction."""
        self.write(self.insert_job(instance, circles, events, pinned))

    def insert_job(self, instance: dict[str, Any], circles: list[dict[str, Any]],
                   events: list[dict[str, Any]], pinned: list[dict[str, Any]]) -> Job:
        statements = [(self._insert_sql("instances", instance), [self._sql(instance)]),
                      (self.CIRCLE_INSERT, [_circle(c) for c in circles])]
        if pinned:
            statements.append((self._insert_sql("instance_templates", pinned[0]), pinned))
        statements.append((self.EVENT, [_event(e) for e in events]))

        def job(conn: sqlite3.Connection) -> None:
            for sql, rows in statements:
                conn.executemany(sql, rows)
        return job

    def save_all(self, writes: list[Write],
                 event_rows: Callable[[str, list[Event]], list[dict[str, Any]]]) -> set[str]:
        """Every write in one transaction; the ids whose compare-and-set lost."""
        return self.write(self.save_job(writes, event_rows))

    def save_job(self, writes: list[Write],
                 event_rows: Callable[[str, list[Event]], list[dict[str, Any]]]) -> Job:
        steps = [(self._sql(w.row), [_circle(c) for c in w.changed],
                  [_event(e) for e in event_rows(w.row["id"], w.events)])
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
        json_keys = self.JSON
        out = {}
        for k, v in row.items():
            if k in json_keys:
                v = dumps(v)
            elif isinstance(v, datetime):
                v = sql_time(v)
            out[k] = v
        return out

    @staticmethod
    def _insert_sql(table: str, row: dict[str, Any]) -> str:
        return (f"INSERT INTO {table} ({', '.join(row)}) VALUES"
                f" ({', '.join(':' + k for k in row)})")

    def scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """The first column of the first row of a small read (a connection of this
        thread, autocommit: WAL readers never wait for the writer)."""
        row = self._own("reader").execute(sql, params).fetchone()
        return row[0] if row else None

    def _own(self, name: str) -> sqlite3.Connection:
        """This thread's connection `name` (made anew when there is none yet in this
        thread, or the one there was inherited through a fork)."""
        pid, conn = getattr(self._local, name, (None, None))
        if pid != os.getpid():
            conn = _connect(self.path)
            setattr(self._local, name, (os.getpid(), conn))
            with self._lock:
                self._conns.append(conn)
        return conn

    # --------------------------------------------------------------- writing
    def write(self, job: Job) -> Any:
        """Run `job` inside a write transaction of this thread's connection: its value
        once committed, or the error that rolled it back. Threads write on their own:
        handing each step to a writer thread cost more (a thread hand-off each way) than
        sharing the disk flush saved."""
        with self._lock:
            self._started()
        conn = self._own("writer")
        begin_immediate(conn)
        try:
            value = job(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return value

    def _started(self) -> None:
        """(Under the lock) forget the loop writers a forked child inherited without
        their threads."""
        if self._pid != os.getpid():
            self._pid, self._loops = os.getpid(), {}

    async def run(self, job: Job) -> Any:
        """`write` for an event loop: awaits the commit without blocking the loop (the
        loop's own `LoopWriter` writes it)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._started()
            writer = self._loops.get(loop)
            if writer is None:
                for gone in [lp for lp in self._loops if lp.is_closed()]:
                    self._loops.pop(gone).close()
                writer = self._loops[loop] = LoopWriter(self.path, loop)
        return await writer.run(job)

    def close(self) -> None:
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
            self._local = threading.local()
            loops, self._loops = self._loops, {}
        for writer in loops.values():
            writer.close()


class LoopWriter:
    """Group commit driven from an event loop (the API's steps).

    The statements of a batch run on the loop itself: they only touch SQLite's page cache
    and take tens of microseconds, whereas a thread running them has to win the GIL back
    from the busy loop after every statement (measured: p99 21 ms for a batch). Only the
    `COMMIT`, which waits for the disk, goes to a thread; steps that arrive meanwhile form
    the next batch. Taking the write lock never waits on the loop: when another
    connection holds it, the batch is tried again a little later."""

    RETRY_S = (0.0002, 0.005)  # first and longest pause before taking the lock again

    def __init__(self, path: str, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.conn = _connect(path, busy_ms=0)
        self.pending: list[tuple[Job, Waiter]] = []
        self.busy = False  # a batch is being written or committed
        self.pause = self.RETRY_S[0]
        self.committer = ThreadPoolExecutor(1, thread_name_prefix="bpflow-commit")
        self.commits = self.jobs = 0  # transactions committed, jobs in them
        self.waiting_since: float | None = None  # for the write lock, since then

    def run(self, job: Job) -> Waiter:
        future = self.loop.create_future()
        self.pending.append((job, future))
        if not self.busy:
            self.busy = True
            self.loop.call_soon(self._flush)  # what arrives in this loop turn joins
        return future

    def _flush(self) -> None:
        batch = [(job, f) for job, f in self.pending if not f.done()]
        self.pending = []
        if not batch:
            self.busy = False
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            now = time.monotonic()
            if self.waiting_since is None:
                self.waiting_since = now
            if ("locked" in str(exc) or "busy" in str(exc)) and \
                    now - self.waiting_since < WRITE_LOCK_TIMEOUT_S:  # another writer: later
                self.pending[:0] = batch
                self.loop.call_later(self.pause, self._flush)
                self.pause = min(self.pause * 2, self.RETRY_S[1])
                return
            self.waiting_since = None
            _settle([(f, None, exc) for _, f in batch])
            self._next()
            return
        self.pause, self.waiting_since = self.RETRY_S[0], None
        try:
            outcomes = _run_jobs(self.conn, batch)
        except BaseException as exc:
            self._failed(batch, exc)
            return
        done = self.loop.run_in_executor(self.committer, self.conn.execute, "COMMIT")
        done.add_done_callback(lambda d: self._committed(d, batch, outcomes))

    def _committed(self, done: asyncio.Future, batch, outcomes) -> None:
        if done.exception() is not None:
            self._failed(batch, done.exception())
            return
        self.commits += 1
        self.jobs += len(batch)
        _settle(outcomes)
        self._next()

    def _failed(self, batch, exc: BaseException) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        _settle([(f, None, exc) for _, f in batch])
        self._next()

    def _next(self) -> None:
        self.busy = bool(self.pending)
        if self.busy:
            self.loop.call_soon(self._flush)

    def close(self) -> None:
        self.committer.shutdown(wait=True)
        self.conn.close()


def _connect(path: str, busy_ms: int = SQLITE_BUSY_MS) -> sqlite3.Connection:
    """A connection with the store's pragmas. SQLite checkpoints the write-ahead log in
    the commit that crosses 1,000 pages; on the loop writer that commit runs on its
    thread. (A background checkpointer was tried: with steady writes its PASSIVE
    checkpoints never caught up, the log was never rewound and grew, and every commit's
    fsync then also flushed the file's growth: durable steps 25 % slower.)"""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON",
                   f"busy_timeout={busy_ms}"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def _run_jobs(conn: sqlite3.Connection, batch: list[tuple[Job, Waiter]]
              ) -> list[tuple[Waiter, Any, BaseException | None]]:
    """Run each job of a batch inside the open transaction, under its own savepoint when
    there are several (a job that fails is undone alone and gets its error)."""
    if len(batch) == 1:
        job, future = batch[0]
        return [(future, job(conn), None)]
    outcomes = []
    for job, future in batch:
        conn.execute("SAVEPOINT job")
        try:
            value = job(conn)
        except Exception as exc:
            conn.execute("ROLLBACK TO job")
            conn.execute("RELEASE job")
            outcomes.append((future, None, exc))
            continue
        conn.execute("RELEASE job")
        outcomes.append((future, value, None))
    return outcomes
