"""The SQLite driver: the store's statements and reads straight through sqlite3.

The store's steps are small (one instance row, a few circle rows, a few events), so the
per-statement cost of SQLAlchemy would dominate the durable commit; on an SQLite file
the store hands its prepared rows to this driver instead (the statements are those of
`bpflow.store.statements`, compiled once for sqlite3: `forms`).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from bpflow.store import statements as sql
from bpflow.store.connection import begin_immediate, sqlite_connect
from bpflow.store.sqlite.forms import for_sqlite
from bpflow.store.sqlite.loop import Job, LoopWriter
from bpflow.store.writing import STEP_ORDER, LoopWriters, NewInstance, Tx, Write, step_rows

if TYPE_CHECKING:
    from bpflow.store.reads import Straight

CAS = for_sqlite(sql.cas)
CAS_QUIET = for_sqlite(sql.cas_quiet)
BATCH_INSERT = for_sqlite(sql.batch_insert)
# every statement a start or a step runs after the compare-and-set (a migration's too:
# `writing.moved_rows`)
FOR_SQLITE = {statement: for_sqlite(statement) for statement in (
    sql.instance_insert, sql.circle_insert, sql.pinned_insert, sql.event_insert,
    sql.audience_insert, *STEP_ORDER, sql.circle_delete, sql.instance_moved,
    sql.pinned_delete, *sql.mail_decision.values(), sql.mail_signed)}
# a crowd's tables, in the order its rows are copied into the store's (`insert_many`)
STAGED = ("instances", "instance_templates", "circle_states", "events", "task_audience")
T = TypeVar("T")


class SqliteTx:
    """A write transaction on a connection of sqlite3 (`Tx`)."""

    connection = None  # an instance is read as `rows` reads: no other writer can commit
    locks = False  # BEGIN IMMEDIATE excludes every other writer

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def run(self, statement: Any, values: dict[str, Any]) -> int:
        form = FOR_SQLITE[statement]
        return self.conn.execute(form.sql, form.bind(values)).rowcount

    def rows(self, read: Straight, values: dict[str, Any], lock: bool = False
             ) -> list[Any]:
        query = read.sqlite
        return [query.row(r) for r in self.conn.execute(query.sql, query.bind(values))]

    def save(self, writes: list[Write]) -> set[str]:
        return SqliteDriver.save_job(writes)(self.conn)


class SqliteDriver:
    """The store on SQLite straight through sqlite3: the statements SQLAlchemy would
    send, without its per-statement cost; values are stored exactly as SQLAlchemy stores
    them, so either side reads both. A thread writes on a connection of its own (`write`);
    an event loop hands its steps to its `LoopWriter` (`run`), which commits the steps
    that arrive together in one transaction. Reads (`rows`) go on a connection of each
    thread, autocommit: WAL readers never wait for the writer."""

    reads_on_loop: bool = True  # an indexed read takes tens of microseconds

    def __init__(self, path: str):
        self.path = path
        self.file: str | None = path
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
        """Steps (`writing.step_rows`); the ids whose compare-and-set lost. A step that
        leaves the instance's status and due time as its row holds them (`Loaded.stored`:
        the compare-and-set finds the row as that copy last read or wrote it) does not
        set them (`CAS_QUIET`)."""
        def step(w: Write) -> tuple[str, str, Any, list[tuple[str, list[Any]]]]:
            quiet = w.loaded.stored == (w.row["status"], w.row["due_at"])
            cas = CAS_QUIET if quiet else CAS
            return (w.row["id"], cas.sql, cas.bind(w.row),
                    [(FOR_SQLITE[s].sql, [FOR_SQLITE[s].bind(r) for r in rows])
                     for s, rows in step_rows(w) if rows])

        steps = [step(w) for w in writes]

        def job(conn: sqlite3.Connection) -> set[str]:
            lost = set()
            for iid, cas, row, statements in steps:
                if conn.execute(cas, row).rowcount != 1:
                    lost.add(iid)
                    continue
                for text, rows in statements:
                    conn.executemany(text, rows)
            return lost
        return job

    def rows(self, *reads: tuple[Straight, dict[str, Any]]) -> list[list[Any]]:
        """The rows of each read, as its `row` makes them, all from one snapshot of the
        database (one read alone is its own; several share a read transaction)."""
        conn = self._own("reader")
        if len(reads) == 1:
            [(read, values)] = reads
            query = read.sqlite
            return [[query.row(r) for r in conn.execute(query.sql, query.bind(values))]]
        conn.execute("BEGIN")
        try:
            return [[read.sqlite.row(r) for r in conn.execute(read.sqlite.sql,
                                                              read.sqlite.bind(values))]
                    for read, values in reads]
        finally:
            conn.execute("COMMIT")

    async def rows_async(self, *reads: tuple[Straight, dict[str, Any]]) -> list[list[Any]]:
        return await asyncio.to_thread(self.rows, *reads)

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

    def transact(self, work: Callable[[Tx], T]) -> T:
        """`work(tx)` in a write transaction of this thread's connection (`write`)."""
        return self.write(lambda conn: work(SqliteTx(conn)))

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
