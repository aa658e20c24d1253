"""The PostgreSQL driver (`PgDriver`): the store's writes and small reads through
psycopg 3 straight, a step in one round trip.

A thread writes on a connection of its own (`save`, `insert`: `write`); an event loop
hands its jobs to its `PgLoopWriter` (`run`), which sends the jobs that arrive together
in one pipeline. Reads (`rows`) share a few connections of the process (`pools`), an
event loop's its own (`rows_async`). A crowd is copied with COPY (`copying`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from sqlalchemy.engine import Engine

from bpflow.store.alchemy import SqlAlchemyDriver
from bpflow.store.pg.copying import Copier
from bpflow.store.pg.loop import PgLoopWriter
from bpflow.store.pg.pools import Connections, conninfo, planned
from bpflow.store.pg.reads import framed_reads, read_rows
from bpflow.store.pg.statements import BATCH
from bpflow.store.pg.wire import Job, insert_job, save_job, send
from bpflow.store.writing import LoopWriters, NewInstance, Tx, Write

if TYPE_CHECKING:
    from bpflow.store.reads import Straight

T = TypeVar("T")


class PgDriver(Connections):
    """The store on PostgreSQL through psycopg. A migration's steps (`moved`) need their
    compare-and-set answered before the rest: they go through SQLAlchemy (`fallback`), as
    do transactions that decide as they go (`transact`)."""

    file: str | None = None
    reads_on_loop: bool = False  # a read waits for the server: on the loop's own connections

    def __init__(self, db: Engine):
        super().__init__(planned(conninfo(db)))
        self.fallback = SqlAlchemyDriver(db)
        self._loops: LoopWriters[PgLoopWriter] = LoopWriters()

    def insert(self, new: NewInstance) -> None:
        self.write(insert_job([new]))
        self._count_starts(1)

    async def insert_async(self, new: NewInstance) -> None:
        await self.run(insert_job([new]))
        self._count_starts(1)

    def save(self, writes: list[Write]) -> set[str]:
        if any(w.moved for w in writes):
            return self.fallback.save(writes)
        return self.write(save_job(writes))

    async def save_async(self, writes: list[Write]) -> set[str]:
        if any(w.moved for w in writes):
            return await self.fallback.save_async(writes)
        return await self.run(save_job(writes))

    def insert_many(self, chunks: Iterable[list[NewInstance]], batch: dict[str, Any]) -> None:
        """A crowd (`Crowds`): every chunk's rows copied (COPY, table by table in the
        order of the foreign keys), then the batch row, in one transaction of a
        connection of its own: all of it or nothing. A thread copies each chunk while the
        next one is built (the server checks the rows' foreign keys meanwhile)."""
        started = 0
        with psycopg.connect(self.conninfo) as conn:  # commits at the end, or rolls back
            copier = Copier(conn)
            try:
                for chunk in chunks:
                    copier.put(chunk)
                    started += len(chunk)
            finally:
                copier.finish()
            statement, params = BATCH
            conn.execute(statement, params(batch))
        self._count_starts(started)

    # ------------------------------------------------------------- writing
    def write(self, job: Job) -> Any:
        """Run a job on this thread's connection: its answer once committed."""
        return send(self._own(), [job])[0]

    def transact(self, work: Callable[[Tx], T]) -> T:
        return self.fallback.transact(work)

    async def run(self, job: Job) -> Any:
        """`write` for an event loop: its `PgLoopWriter` sends it with the jobs that
        arrive together."""
        return await self._loop_writer().run(job)

    # ------------------------------------------------------------- reading
    def rows(self, *reads: tuple[Straight, dict[str, Any]]) -> list[list[Any]]:
        """The rows of each read, as its `row` makes them, all from one snapshot (a
        read-only transaction on one of the read connections: one round trip; a pooled
        SQLAlchemy connection costs three and several times the client's CPU).

        Reads are planned each time, not prepared: a plan kept from when the tables were
        nearly empty (a new database) scans whole tables once they have grown (seen: a
        sequential scan of `circle_states` for every read until the connection closed)."""
        with self._reading:
            conn = self._reader()
            try:
                framed = framed_reads(reads)
                with conn.pipeline() if len(framed) > 1 else nullcontext():
                    cursors = [conn.execute(t, p, prepare=False) for t, p in framed]
                fetched = [c.fetchall() for c, (_, p) in zip(cursors, framed, strict=True)
                           if p is not None]
                return read_rows(reads, fetched)
            except Exception:
                if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")
                raise
            finally:
                if not conn.closed and not conn.broken:
                    with self._lock:
                        self._readers.append((os.getpid(), conn, time.monotonic()))

    async def rows_async(self, *reads: tuple[Straight, dict[str, Any]]) -> list[list[Any]]:
        """`rows` for an event loop, on read connections of the loop's own: no thread
        to hand over to and back (a stale cached copy, read again, is half the steps of
        a scaled-out server)."""
        return await self._loop_writer().read(reads)

    # ------------------------------------------------------------ the loops
    def _loop_writer(self) -> PgLoopWriter:
        """The running event loop's `PgLoopWriter` (made on its first use)."""
        loop = asyncio.get_running_loop()
        return self._loops.of(loop, lambda: PgLoopWriter(self.conninfo, loop))

    def loop_writer(self, loop: asyncio.AbstractEventLoop) -> PgLoopWriter | None:
        return self._loops.get(loop)

    def close(self) -> None:
        self._close_connections()
        self._loops.close()
