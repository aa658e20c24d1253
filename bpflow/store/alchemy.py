"""The SQLAlchemy driver: the store's statements and reads through SQLAlchemy, on any
database it speaks (in-memory SQLite; PostgreSQL with `BPFLOW_PG_WRITER=sqlalchemy`).

`insert_rows` and `save_rows` write on an open SQLAlchemy connection: besides this
driver, the locked path (`Steps._apply_locked`, in the transaction that holds the
instance's row lock) and the PostgreSQL driver's migration steps use them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.engine import Connection, Engine

from bpflow.store import statements as sql
from bpflow.store.writing import NewInstance, Tx, Write, step_rows

if TYPE_CHECKING:
    from bpflow.store.reads import Straight


T = TypeVar("T")


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
        for statement, rows in step_rows(w):
            if rows:
                conn.execute(statement, [sql.prefixed(r) for r in rows])
    return lost


class AlchemyTx:
    """A write transaction on an SQLAlchemy connection (`Tx`)."""

    locks = True  # PostgreSQL: FOR UPDATE (SQLite: its BEGIN IMMEDIATE)

    def __init__(self, conn: Connection):
        self.connection = conn

    def run(self, statement: Any, values: dict[str, Any]) -> int:
        return self.connection.execute(statement, sql.prefixed(values)).rowcount

    def rows(self, read: Straight, values: dict[str, Any], lock: bool = False
             ) -> list[Any]:
        query = read.query.with_for_update() if lock else read.query
        return list(self.connection.execute(query, sql.prefixed(values)))

    def save(self, writes: list[Write]) -> set[str]:
        return save_rows(self.connection, writes)


class SqlAlchemyDriver:
    """Writes through SQLAlchemy, one transaction each; an event loop's writes and reads
    run on a thread."""

    file: str | None = None
    reads_on_loop: bool = False

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

    def rows(self, *reads: tuple[Straight, dict[str, Any]]) -> list[list[Any]]:
        """The rows of each read, in one transaction (SQLite: deferred, no write lock)."""
        with self.db.connect().execution_options(sqlite_begin="DEFERRED") as conn:
            return [list(conn.execute(read.query, sql.prefixed(values)))
                    for read, values in reads]

    async def rows_async(self, *reads: tuple[Straight, dict[str, Any]]) -> list[list[Any]]:
        return await asyncio.to_thread(self.rows, *reads)

    def transact(self, work: Callable[[Tx], T]) -> T:
        with self.db.begin() as conn:  # SQLite: BEGIN IMMEDIATE
            return work(AlchemyTx(conn))

    def close(self) -> None:
        pass
