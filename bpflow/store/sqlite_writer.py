"""The SQLite writer: the store's statements straight through sqlite3.

The store's steps are small (one instance row, a few circle rows, a few events), so the
per-statement cost of SQLAlchemy would dominate the durable commit; on an SQLite file
the store hands its prepared rows to this writer instead (the statements are those of
`bpflow.store.statements`, compiled once for sqlite3).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bpflow.store import statements as sql
from bpflow.store.connection import LockWait, begin_immediate, sqlite_connect
from bpflow.store.writing import LoopWriters, NewInstance, Write, settle

Job = Callable[[sqlite3.Connection], Any]
Waiter = asyncio.Future  # of an event loop, resolved on that loop
CAS = sql.for_sqlite(sql.cas)
CIRCLE_UPDATE = sql.for_sqlite(sql.circle_update)
CIRCLE_INSERT = sql.for_sqlite(sql.circle_insert)
AUDIENCE_INSERT = sql.for_sqlite(sql.audience_insert)
AUDIENCE_DELETE = sql.for_sqlite(sql.audience_delete)
EVENT_INSERT = sql.for_sqlite(sql.event_insert)
INSTANCE_INSERT = sql.for_sqlite(sql.instance_insert)
PINNED_INSERT = sql.for_sqlite(sql.pinned_insert)
BATCH_INSERT = sql.for_sqlite(sql.batch_insert)
FOR_SQLITE = {sql.instance_insert: INSTANCE_INSERT, sql.circle_insert: CIRCLE_INSERT,
              sql.pinned_insert: PINNED_INSERT, sql.event_insert: EVENT_INSERT,
              sql.audience_insert: AUDIENCE_INSERT}
# a crowd's tables, in the order its rows are copied into the store's (`insert_many`)
STAGED = ("instances", "instance_templates", "circle_states", "events", "task_audience")
MOVED = {statement: sql.for_sqlite(statement) for statement in (
    sql.circle_delete, sql.circle_insert, sql.instance_moved, sql.pinned_delete,
    sql.pinned_insert)}  # a migration's statements (`writing.moved_rows`)


class SqliteWriter:
    """The write path on SQLite straight through sqlite3: the statements SQLAlchemy would
    send, without its per-statement cost; values are stored exactly as SQLAlchemy stores
    them, so either side reads both. A thread writes on a connection of its own (`write`);
    an event loop hands its steps to its `LoopWriter` (`run`), which commits the steps
    that arrive together in one transaction."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []  # of every thread
        self._loops: LoopWriters[LoopWriter] = LoopWriters()

    # ------------------------------------------------------------ the jobs
    def insert(self, new: NewInstance) -> None:
        self.write(self.insert_job(new))

    async def insert_async(self, new: NewInstance) -> None:
        await self.run(self.insert_job(new))

    def save(self, writes: list[Write]) -> set[str]:
        return self.write(self.save_job(writes))

    async def save_async(self, writes: list[Write]) -> set[str]:
        return await self.run(self.save_job(writes))

    @staticmethod
    def insert_job(*news: NewInstance) -> Job:
        """New instances with their circles, pinned nested versions and first events."""
        statements = [(form.sql, [form.bind(r) for r in rows])
                      for form, rows in ((FOR_SQLITE[s], rows) for s, rows in sql.new_rows(news))]

        def job(conn: sqlite3.Connection) -> None:
            for text, rows in statements:
                conn.executemany(text, rows)
        return job

    def insert_many(self, chunks: Iterable[list[NewInstance]], batch: dict[str, Any]) -> None:
        """A crowd (`Crowds`), all of it or nothing, without holding the write lock while
        it is built: each chunk goes into temporary tables of a connection of its own
        (named as the store's, so the same statements fill them; another connection's
        writes are not held up), then one write transaction copies them into the store's
        tables and adds the batch row. A failure before that commit stores nothing."""
        conn = sqlite_connect(self.path)
        try:
            for table in STAGED:
                conn.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM main.{table} WHERE 0")
            for chunk in chunks:
                conn.execute("BEGIN")
                self.insert_job(*chunk)(conn)
                conn.execute("COMMIT")
            begin_immediate(conn)
            try:
                for table in STAGED:
                    conn.execute(f"INSERT INTO main.{table} SELECT * FROM temp.{table}"
                                 " ORDER BY rowid")
                conn.execute(BATCH_INSERT.sql, BATCH_INSERT.bind(batch))
                conn.execute("COMMIT")
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        finally:
            conn.close()

    @staticmethod
    def save_job(writes: list[Write]) -> Job:
        """Steps; the ids whose compare-and-set lost."""
        steps = [(w.row["id"], CAS.bind(w.row), [CIRCLE_UPDATE.bind(c) for c in w.changed],
                  (w.loaded.inst.tenant, w.events), [AUDIENCE_DELETE.bind(c) for c in w.retold],
                  [AUDIENCE_INSERT.bind(a) for a in w.audience],
                  [(MOVED[s].sql, [MOVED[s].bind(r) for r in rows]) for s, rows in w.moved])
                 for w in writes]

        def job(conn: sqlite3.Connection) -> set[str]:
            lost = set()
            for iid, row, changed, events, retold, audience, moved in steps:
                if conn.execute(CAS.sql, row).rowcount != 1:
                    lost.add(iid)
                    continue
                for text, rows in moved:
                    conn.executemany(text, rows)
                if changed:
                    conn.executemany(CIRCLE_UPDATE.sql, changed)
                if retold:
                    conn.executemany(AUDIENCE_DELETE.sql, retold)
                if audience:
                    conn.executemany(AUDIENCE_INSERT.sql, audience)
                if events[1]:  # built here, inside the transaction, after the state rows
                    conn.executemany(EVENT_INSERT.sql, [EVENT_INSERT.bind(e) for e in
                                                        sql.event_rows(iid, *events)])
            return lost
        return job

    def scalar(self, statement: sql.SqliteStatement, values: dict[str, Any]) -> Any:
        """The first column of the first row of a small read (a connection of this
        thread, autocommit: WAL readers never wait for the writer)."""
        row = self._own("reader").execute(statement.sql, statement.bind(values)).fetchone()
        return row[0] if row else None

    def rows(self, *reads: tuple[sql.SqliteRead, dict[str, Any]]) -> list[list[Any]]:
        """The rows of each read, as its `row` makes them, all from one snapshot of the
        database (one read transaction on the connection of `scalar`)."""
        conn = self._own("reader")
        conn.execute("BEGIN")
        try:
            return [[query.row(r) for r in conn.execute(query.sql, query.bind(values))]
                    for query, values in reads]
        finally:
            conn.execute("COMMIT")

    def _own(self, name: str) -> sqlite3.Connection:
        """This thread's connection `name` (made anew when there is none yet in this
        thread, or the one there was inherited through a fork)."""
        pid, conn = getattr(self._local, name, (None, None))
        if pid != os.getpid() or conn is None:
            conn = sqlite_connect(self.path)
            setattr(self._local, name, (os.getpid(), conn))
            with self._lock:
                self._conns.append(conn)
        return conn

    # --------------------------------------------------------------- writing
    def write(self, job: Job) -> Any:
        """Run `job` inside a write transaction of this thread's connection: its value
        once committed, or the error that rolled it back. Threads write on their own
        connections (a hand-off to a writer thread costs more than sharing the flush
        saves: bench/RESULTS.md)."""
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

    async def run(self, job: Job) -> Any:
        """`write` for an event loop: awaits the commit without blocking the loop (the
        loop's own `LoopWriter` writes it)."""
        loop = asyncio.get_running_loop()
        writer = self._loops.of(loop, lambda: LoopWriter(self.path, loop))
        return await writer.run(job)

    def loop_writer(self, loop: asyncio.AbstractEventLoop) -> LoopWriter | None:
        """The group-commit writer of an event loop (once that loop has written)."""
        return self._loops.get(loop)

    def close(self) -> None:
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
            self._local = threading.local()
        self._loops.close()


class LoopWriter:
    """Group commit driven from an event loop (the API's steps).

    The statements of a batch run on the loop itself: they only touch SQLite's page cache
    and take tens of microseconds, whereas a thread running them has to win the GIL back
    from the busy loop after every statement (bench/RESULTS.md). Only the
    `COMMIT`, which waits for the disk, goes to a thread; steps that arrive meanwhile form
    the next batch. Taking the write lock never waits on the loop: when another
    connection holds it, the batch is tried again a little later."""

    def __init__(self, path: str, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.conn = sqlite_connect(path, busy_ms=0)
        self.pending: list[tuple[Job, Waiter]] = []
        self.busy = False  # a batch is being written or committed
        self.wait = LockWait(longest=0.005)  # for the write lock, taken without blocking
        self.committer = ThreadPoolExecutor(1, thread_name_prefix="bpflow-commit")
        self.commits = self.jobs = 0  # transactions committed, jobs in them

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
            pause = self.wait.next(exc)
            if pause is not None:  # another connection writes: try again a little later
                self.pending[:0] = batch
                self.loop.call_later(pause, self._flush)
                return
            settle([(f, None, exc) for _, f in batch])
            self._next()
            return
        self.wait.reset()
        try:
            outcomes = _run_jobs(self.conn, batch)
        except BaseException as exc:
            self._failed(batch, exc)
            return
        done = self.loop.run_in_executor(self.committer, self.conn.execute, "COMMIT")
        done.add_done_callback(lambda d: self._committed(d, batch, outcomes))

    def _committed(self, done: asyncio.Future, batch, outcomes) -> None:
        if (exc := done.exception()) is not None:
            self._failed(batch, exc)
            return
        self.commits += 1
        self.jobs += len(batch)
        settle(outcomes)
        self._next()

    def _failed(self, batch, exc: BaseException) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        settle([(f, None, exc) for _, f in batch])
        self._next()

    def _next(self) -> None:
        self.busy = bool(self.pending)
        if self.busy:
            self.loop.call_soon(self._flush)

    def close(self) -> None:
        self.committer.shutdown(wait=True)
        self.conn.close()


def _run_jobs(conn: sqlite3.Connection, batch: list[tuple[Job, Waiter]]
              ) -> list[tuple[Waiter, Any, BaseException | None]]:
    """Run each job of a batch inside the open transaction, under its own savepoint when
    there are several (a job that fails is undone alone and gets its error)."""
    if len(batch) == 1:
        job, future = batch[0]
        return [(future, job(conn), None)]
    outcomes: list[tuple[Waiter, Any, BaseException | None]] = []
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
