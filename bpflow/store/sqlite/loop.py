"""Group commit of the SQLite driver, driven from an event loop: the steps that arrive
together run on the loop in one transaction, whose `COMMIT` alone waits on a thread."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bpflow.store.connection import LockWait, sqlite_connect
from bpflow.store.writing import settle

Job = Callable[[sqlite3.Connection], Any]
Waiter = asyncio.Future  # of an event loop, resolved on that loop


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
