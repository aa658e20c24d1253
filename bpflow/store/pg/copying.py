"""A crowd's rows copied into the store's tables (`PgDriver.insert_many`): each insert of
a start as a binary COPY, a chunk copied on a thread of its own while the next is built."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import psycopg
from sqlalchemy import JSON
from sqlalchemy.sql.dml import Insert

from bpflow.store import statements as sql
from bpflow.store.connection import UTCDateTime, aware
from bpflow.store.pg.statements import DIALECT, NEW, binds, quote
from bpflow.store.writing import NewInstance


@dataclass(frozen=True)
class Copy:
    """An insert of `statements` as COPY: its command, and `rows(rows)` giving the
    values of rows keyed by column, in the command's order (JSON as its text)."""

    command: str
    rows: Callable[[list[dict[str, Any]]], list[list[Any]]]
    types: list[str]  # the binary format's, by column (JSON goes as its text)


def for_copy(statement: Insert) -> Copy:
    keys = binds(statement)
    types = [statement.table.c[k].type for k in keys]
    texts = [i for i, t in enumerate(types) if isinstance(t, JSON)]
    times = [i for i, t in enumerate(types) if isinstance(t, UTCDateTime)]
    get = itemgetter(*keys)

    def rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
        out = []
        for row in rows:
            values = list(get(row))
            for i in texts:
                values[i] = sql.dumps(values[i])
            for i in times:
                aware(values[i])
            out.append(values)
        return out
    names = ["text" if isinstance(t, JSON) else t.compile(dialect=DIALECT).lower()
             for t in types]
    return Copy(f"COPY {quote(statement.table.name)}"
                f" ({', '.join(quote(k) for k in keys)}) FROM STDIN (FORMAT BINARY)", rows,
                [n.split("(")[0] for n in names])


COPY = {statement: for_copy(statement) for statement in NEW}  # a crowd's (`insert_many`)


class Copier:
    """Copies chunks of new instances on a thread of its own (`PgDriver.insert_many`):
    `put` hands one over (waiting while two are queued), `finish` waits for the last
    and raises what failed on either side."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self.queue: queue.Queue[list[NewInstance] | None] = queue.Queue(maxsize=2)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._copy, name="bpflow-copy", daemon=True)
        self.thread.start()

    def put(self, chunk: list[NewInstance]) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(chunk)

    def finish(self) -> None:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _copy(self) -> None:
        cursor = self.conn.cursor()
        while (chunk := self.queue.get()) is not None:
            if self.error is not None:
                continue  # what is left is dropped: the transaction will roll back
            try:
                for statement, rows in sql.new_rows(chunk):
                    form = COPY[statement]
                    with cursor.copy(form.command) as copy:
                        copy.set_types(form.types)
                        for values in form.rows(rows):
                            copy.write_row(values)
            except BaseException as exc:  # handed to the building thread
                self.error = exc
