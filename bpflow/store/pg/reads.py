"""Reads through psycopg straight (`reads.Straight`'s PostgreSQL form): a query's text
as psycopg runs it, its rows made into what SQLAlchemy would give; several reads share
one snapshot (a read-only transaction), one round trip."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, String, any_, bindparam
from sqlalchemy.dialects import postgresql

from bpflow.store import statements as sql
from bpflow.store.connection import UTCDateTime
from bpflow.store.pg.statements import DIALECT

if TYPE_CHECKING:
    from bpflow.store.writing import Reads

READ_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"  # one snapshot for all


def ids_any(column: Any) -> Any:
    """`column` among the ids bound as the list `ids` (one prepared statement for any
    number of them)."""
    return column == any_(bindparam("b_ids", type_=postgresql.ARRAY(String)))


@dataclass(frozen=True)
class Read:
    """A query as psycopg runs it (planned each time: see `PgDriver.rows`): its text (its
    parameters named without `b_`, as the store gives their values), and `row` making a
    row read into what SQLAlchemy would give (the columns by name, times in UTC;
    psycopg loads JSON), so code reading rows takes either."""

    sql: str
    row: Callable[[tuple[Any, ...]], Any]
    constants: dict[str, Any]  # the values of its parameters that are not `b_` (a LIMIT)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def read(query: Select) -> Read:
    compiled = query.compile(dialect=DIALECT)
    return Read(compiled.string.replace("%(b_", "%("),
                sql.row_maker(query, {UTCDateTime: _utc}),
                {k: v for k, v in compiled.params.items() if not k.startswith("b_")})


def framed_reads(reads: Reads) -> list[tuple[str, Any]]:
    """The statements of reads as sent: one alone is a snapshot of its own, several
    share one (a read-only transaction)."""
    statements = [(r.pg.sql, {**r.pg.constants, **values}) for r, values in reads]
    if len(statements) == 1:
        return statements
    return [(READ_BEGIN, None), *statements, ("COMMIT", None)]


def read_rows(reads: Reads, fetched: list[list[tuple[Any, ...]]]) -> list[list[Any]]:
    """Each read's rows, as its `row` makes them, of what its statement fetched."""
    return [[r.pg.row(t) for t in rows] for (r, _), rows in zip(reads, fetched, strict=True)]
