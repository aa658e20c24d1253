"""Group commit of the PostgreSQL driver, driven from an event loop (`PgLoopWriter`),
and the loop's own read connections."""

from __future__ import annotations

import asyncio
import time
from contextlib import nullcontext
from typing import Any

import orjson
import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import set_json_loads

from bpflow.store.pg import pools
from bpflow.store.pg.reads import framed_reads, read_rows
from bpflow.store.pg.wire import Job, send_async
from bpflow.store.writing import Reads, settle

LANES = 3  # batches of an event loop on their way at once, each on a connection of its own
MIN_BATCH = 4  # jobs: the pending ones are shared among the free lanes, at least this many each


class PgLoopWriter:
    """Group commit driven from an event loop: the jobs that arrive together are shared
    among the free lanes (`LANES` connections, at least `MIN_BATCH` jobs a lane), each
    share a batch sent in one pipeline (one transaction); the jobs that arrive while
    every lane has a batch on its way form the next batches. Shared, the batches of
    concurrent flows fall out of step: the server writes one batch while the loop
    computes the steps of the flows another batch answered (16 flows in one batch: the
    two waited for each other, 1,450-1,650 steps/s; shared: 1,800-2,250). When a batch
    fails, it is rolled back and its jobs are sent again one by one, so only a failing
    job gets its error and the others commit. Reads (`read`) go on connections of their
    own, `pools.READERS` at most."""

    def __init__(self, conninfo: str, loop: asyncio.AbstractEventLoop, lanes: int = LANES):
        self.conninfo, self.loop = conninfo, loop
        self.idle: list[psycopg.AsyncConnection | None] = [None] * lanes  # made when used
        self.conns: list[psycopg.AsyncConnection] = []
        self.pending: list[tuple[Job, asyncio.Future]] = []
        self.calling = False  # a lane is called for the pending jobs
        self.commits = self.jobs = 0  # transactions committed, jobs in them
        self.readers: list[tuple[psycopg.AsyncConnection, float]] = []  # idle; when used
        self.reading = asyncio.Semaphore(pools.READERS)  # more reads at once wait

    def run(self, job: Job) -> asyncio.Future:
        future = self.loop.create_future()
        self.pending.append((job, future))
        if self.idle and not self.calling:
            self.calling = True
            self.loop.call_soon(self._call)  # what arrives in this loop turn joins
        return future

    def _call(self) -> None:
        """Each free lane takes its share of the pending jobs."""
        self.calling = False
        while self.pending and self.idle:
            conn = self.idle.pop()
            self.loop.create_task(self._drain(conn, self._share()))

    def _share(self) -> list[tuple[Job, asyncio.Future]]:
        """A lane's share of the pending jobs, shared with the free lanes."""
        share = max(MIN_BATCH, -(-len(self.pending) // (len(self.idle) + 1)))
        batch, self.pending = self.pending[:share], self.pending[share:]
        return batch

    async def _drain(self, conn: psycopg.AsyncConnection | None,
                     batch: list[tuple[Job, asyncio.Future]]) -> None:
        try:
            while batch:
                batch = [(job, f) for job, f in batch if not f.done()]
                if batch:
                    conn = await self._write(conn, batch)
                batch = self._share()
                self._call()  # the free lanes take the rest
        finally:
            self.idle.append(conn)

    async def _write(self, conn: psycopg.AsyncConnection | None,
                     batch: list[tuple[Job, asyncio.Future]]) -> psycopg.AsyncConnection | None:
        """Send a batch on a lane's connection (made anew when there is none or it
        broke); the connection, for the next batch."""
        try:
            if conn is None or conn.closed:
                conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
                self.conns.append(conn)
            answers = await send_async(conn, [job for job, _ in batch])
        except asyncio.CancelledError:  # the loop is going away, perhaps mid-transaction:
            if conn is not None:  # closed, the server rolls it back (no transaction left
                conn.pgconn.finish()  # open to hold back the event feed)
            raise
        except Exception as exc:
            if len(batch) == 1 or conn is None or conn.closed:
                settle([(f, None, exc) for _, f in batch])
                return conn
            for job, future in batch:  # each alone: only the failing one fails
                conn = await self._write(conn, [(job, future)])
            return conn
        self.commits += 1
        self.jobs += len(batch)
        settle([(f, a, None) for (_, f), a in zip(batch, answers, strict=True)])
        return conn

    async def read(self, reads: Reads) -> list[list[Any]]:
        """`PgDriver.rows` on this loop: on an idle read connection of the loop (checked
        when it was idle long enough to have been dropped), else a new one."""
        async with self.reading:
            conn = await self._reader()
            framed = framed_reads(reads)
            try:
                async with conn.pipeline() if len(framed) > 1 else nullcontext():
                    cursors = [await conn.execute(t, p, prepare=False) for t, p in framed]
                fetched = [await c.fetchall() for c, (_, p) in zip(cursors, framed, strict=True)
                           if p is not None]
            except Exception:
                if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                    await conn.execute("ROLLBACK")
                raise
            finally:
                if not conn.closed and not conn.broken:
                    self.readers.append((conn, time.monotonic()))
            return read_rows(reads, fetched)

    async def _reader(self) -> psycopg.AsyncConnection:
        while self.readers:
            conn, used = self.readers.pop()
            if not conn.closed and (time.monotonic() - used < pools.IDLE_CHECK_S
                                    or await pools.alive_async(conn)):
                return conn
            self.conns.remove(conn)
            await conn.close()
        conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        set_json_loads(orjson.loads, conn)
        self.conns.append(conn)
        return conn

    def close(self) -> None:
        self.readers = []
        conns, self.conns = self.conns, []
        for conn in conns:
            if not conn.closed:
                conn.pgconn.finish()  # the loop may be gone: the socket closed straight
