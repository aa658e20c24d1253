"""What a write carries, and the writer protocol with its SQLAlchemy implementation.

The store prepares rows (`NewInstance` for a start, `Write` for a step) and hands them to
its writer, chosen once when the store opens: `SqliteWriter` (sqlite3 straight, group
commit from an event loop) for an SQLite file, `SqlAlchemyWriter` otherwise. Both run
the statements of `bpflow.store.statements`.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy.engine import Connection, Engine

from bpflow.store import statements as sql
from engine.instance import Event


class Closing(Protocol):
    """What a loop's writer is at least: closed with its store."""

    def close(self) -> None: ...


L = TypeVar("L", bound=Closing)  # a loop's writer


class Lost(Exception):
    """Our compare-and-set lost against another writer."""


@dataclass
class NewInstance:
    """The rows of a new instance."""

    instance: dict[str, Any]
    circles: list[dict[str, Any]]
    events: list[dict[str, Any]]
    pinned: list[dict[str, Any]]
    audience: list[dict[str, Any]] = field(default_factory=list)  # open tasks' audience


@dataclass
class Write:
    """One instance's step, ready to be written."""

    loaded: Any  # the store's loaded instance
    circles: dict[str, sql.Snapshot]  # the circles as stored after this write
    row: dict[str, Any]  # the instance row's new values (STEP_COLUMNS)
    changed: list[dict[str, Any]]  # circle rows that changed
    events: list[Event]
    retold: list[dict[str, Any]] = field(default_factory=list)  # circles whose audience
    audience: list[dict[str, Any]] = field(default_factory=list)  # changed, and its rows
    moved: list[tuple[Any, list[dict[str, Any]]]] = field(default_factory=list)  # a
    # migration's (statement, rows) to run first: `moved_rows`


def moved_rows(removed: list[dict[str, Any]], added: list[dict[str, Any]],
               instance: dict[str, Any], pinned: list[dict[str, Any]]
               ) -> list[tuple[Any, list[dict[str, Any]]]]:
    """What a step that moves its instance to another template version writes besides a
    step's rows (SPEC §11): its circles gone and new, its version and its pinned nested
    versions."""
    out = [(sql.circle_delete, removed), (sql.circle_insert, added),
           (sql.instance_moved, [instance]),
           (sql.pinned_delete, [{"instance_id": instance["id"]}]), (sql.pinned_insert, pinned)]
    return [(statement, rows) for statement, rows in out if rows]


class Writer(Protocol):
    """How the store's writes reach the database. `save` returns the ids whose
    compare-and-set lost (nothing of those is written)."""

    def insert(self, new: NewInstance) -> None: ...

    def insert_many(self, chunks: Iterable[list[NewInstance]],
                    batch: dict[str, Any]) -> None: ...

    async def insert_async(self, new: NewInstance) -> None: ...

    def save(self, writes: list[Write]) -> set[str]: ...

    async def save_async(self, writes: list[Write]) -> set[str]: ...

    def close(self) -> None: ...


def settle(items: list[tuple[asyncio.Future, Any, BaseException | None]]) -> None:
    """Resolve the futures of a group commit's writes, each with its value or error (one
    whose request was cancelled meanwhile is left alone)."""
    for future, value, error in items:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


class LoopWriters(Generic[L]):
    """The group-commit writers of a store's event loops, one a loop, made on its first
    write; those of loops closed since are closed. A forked child forgets its parent's
    (their threads did not come with it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._loops: dict[asyncio.AbstractEventLoop, L] = {}

    def of(self, loop: asyncio.AbstractEventLoop, make: Callable[[], L]) -> L:
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._loops = os.getpid(), {}
            writer = self._loops.get(loop)
            if writer is None:
                for gone in [lp for lp in self._loops if lp.is_closed()]:
                    self._loops.pop(gone).close()
                writer = self._loops[loop] = make()
            return writer

    def get(self, loop: asyncio.AbstractEventLoop) -> L | None:
        """The writer of `loop`, once that loop has written."""
        with self._lock:
            return self._loops.get(loop)

    def close(self) -> None:
        with self._lock:
            loops, self._loops = self._loops, {}
        for writer in loops.values():
            writer.close()


def insert_rows(conn: Connection, news: list[NewInstance]) -> None:
    """New instances' rows on an open SQLAlchemy connection (each statement once for
    all of them: executemany)."""
    for statement, rows in sql.new_rows(news):
        conn.execute(statement, [sql.prefixed(r) for r in rows])


def save_rows(conn: Connection, writes: list[Write]) -> set[str]:
    """Steps on an open SQLAlchemy connection; the ids whose compare-and-set lost."""
    lost = set()
    for w in writes:
        if conn.execute(sql.cas, sql.prefixed(w.row)).rowcount != 1:
            lost.add(w.row["id"])
            continue
        for statement, rows in w.moved:
            conn.execute(statement, [sql.prefixed(r) for r in rows])
        if w.changed:
            conn.execute(sql.circle_update, [sql.prefixed(c) for c in w.changed])
        if w.retold:
            conn.execute(sql.audience_delete, [sql.prefixed(c) for c in w.retold])
        if w.audience:
            conn.execute(sql.audience_insert, [sql.prefixed(a) for a in w.audience])
        if w.events:
            conn.execute(sql.event_insert, [sql.prefixed(e) for e in sql.event_rows(
                w.row["id"], w.loaded.inst.tenant, w.events)])
    return lost


class SqlAlchemyWriter:
    """Writes through SQLAlchemy, one transaction each (PostgreSQL, in-memory SQLite);
    an event loop's writes run on a thread."""

    def __init__(self, db: Engine):
        self.db = db

    def insert(self, new: NewInstance) -> None:
        with self.db.begin() as conn:
            insert_rows(conn, [new])

    def insert_many(self, chunks: Iterable[list[NewInstance]], batch: dict[str, Any]) -> None:
        """A crowd (`Crowds`): every chunk's instances, then the batch row, in one
        transaction (the chunks are built while it is open: memory holds one at a time)."""
        with self.db.begin() as conn:
            for chunk in chunks:
                insert_rows(conn, chunk)
            conn.execute(sql.batch_insert, sql.prefixed(batch))

    async def insert_async(self, new: NewInstance) -> None:
        await asyncio.to_thread(self.insert, new)

    def save(self, writes: list[Write]) -> set[str]:
        with self.db.begin() as conn:
            return save_rows(conn, writes)

    async def save_async(self, writes: list[Write]) -> set[str]:
        return await asyncio.to_thread(self.save, writes)

    def close(self) -> None:
        pass
