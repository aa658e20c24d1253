"""What a write carries, the order of a step's writes, and the driver protocol.

The store prepares rows (`NewInstance` for a start, `Write` for a step) and hands them to
its driver, chosen once when the store opens (`bpflow.store.driver_for`): `SqliteDriver`
(`sqlite/`: sqlite3 straight, group commit from an event loop) for an SQLite file,
`PgDriver` (`pg/`: psycopg straight) for PostgreSQL, `SqlAlchemyDriver` (`alchemy.py`)
otherwise. Every driver runs the statements of `bpflow.store.statements`, a step's in the
order of `step_rows`, and the small reads of `bpflow.store.reads` in its own form; a
write of several of them that decides as it goes (a decision on an approval and the step
it settles) runs in one transaction (`transact`, `Tx`).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from bpflow.store import statements as sql
from engine.instance import Event

if TYPE_CHECKING:
    from bpflow.store.reads import Straight


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


# What a step writes after its compare-and-set (`statements.cas`) and a migration's rows,
# in this order: the circles that changed, the task audience taken away, the new audience
# (after the old is gone: a circle's rows may be the same), the events.
STEP_ORDER = (sql.circle_update, sql.audience_delete, sql.audience_insert, sql.event_insert)


def step_rows(w: Write) -> list[tuple[Any, list[dict[str, Any]]]]:
    """The statements a step runs after its compare-and-set, each with its rows (maybe
    none), in the order every driver writes them: a migration's (`moved`), then
    STEP_ORDER's."""
    return [*w.moved, *zip(STEP_ORDER, (
        w.changed, w.retold, w.audience,
        sql.event_rows(w.row["id"], w.loaded.inst.tenant, w.events)), strict=True)]


Reads = tuple[tuple["Straight", dict[str, Any]], ...]  # reads and their values (`rows`)
T = TypeVar("T")


class Tx(Protocol):
    """One write transaction of a driver (`Driver.transact`): the statements of
    `bpflow.store.statements` (`run`: the rows they changed) and the reads of
    `bpflow.store.reads` (`rows`; `lock`: their rows held until it ends, PostgreSQL's
    `FOR UPDATE`; `locks` False: SQLite's `BEGIN IMMEDIATE` already excludes writers,
    no read is needed for that) run in it,
    steps written in it (`save`, as `Driver.save`). `connection`: its SQLAlchemy
    connection, None on the straight path (an instance is then read as `Driver.rows`
    reads: no other writer can commit meanwhile)."""

    connection: Any
    locks: bool  # whether rows a transaction must hold are locked by reading them

    def run(self, statement: Any, values: dict[str, Any]) -> int: ...

    def rows(self, read: Straight, values: dict[str, Any], lock: bool = False
             ) -> list[Any]: ...

    def save(self, writes: list[Write]) -> set[str]: ...


class Driver(Protocol):
    """How the store reaches its database: the writes of starts and steps and the small
    reads on a request's path (`reads.Straight`), each in the driver's own form. `save`
    returns the ids whose compare-and-set lost (nothing of those is written). `rows`
    gives the rows of each read (values keyed by the reads' parameters without `b_`),
    all from one snapshot. `transact(work)` runs `work(tx)` in one write transaction:
    its value once committed, or its error, nothing written."""

    file: str | None  # the SQLite file it writes, if it writes one (`bpflow.changes`)
    reads_on_loop: bool  # whether a small read may run on an event loop itself

    def insert(self, new: NewInstance) -> None: ...

    def insert_many(self, chunks: Iterable[list[NewInstance]],
                    batch: dict[str, Any]) -> None: ...

    async def insert_async(self, new: NewInstance) -> None: ...

    def save(self, writes: list[Write]) -> set[str]: ...

    async def save_async(self, writes: list[Write]) -> set[str]: ...

    def rows(self, *reads: tuple[Straight, dict[str, Any]]) -> list[list[Any]]: ...

    async def rows_async(self, *reads: tuple[Straight, dict[str, Any]]) -> list[list[Any]]: ...

    def transact(self, work: Callable[[Tx], T]) -> T: ...

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
