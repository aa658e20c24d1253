"""The store's statements and reads in the form sqlite3 runs them: compiled once by
SQLAlchemy's SQLite dialect, with values converted as SQLAlchemy stores them in SQLite
(JSON as its text, times as naive UTC text), so either side reads what the other wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import JSON, ClauseElement, Select, bindparam, func, select
from sqlalchemy.dialects import sqlite

from bpflow.store.connection import UTCDateTime, aware
from bpflow.store.statements import dumps, row_maker


def sql_time(t: datetime | None) -> str | None:
    """A UTC time as SQLAlchemy stores it in SQLite ("YYYY-MM-DD HH:MM:SS.ffffff")."""
    if (t := aware(t)) is None:
        return None
    if t.tzinfo is not UTC:
        t = t.astimezone(UTC)
    return t.isoformat(" ", "microseconds")[:26]  # without its "+00:00"


@dataclass(frozen=True)
class SqliteStatement:
    """A statement as sqlite3 runs it: its text, and `bind(row)` giving the positional
    values of a row keyed by column (JSON and times converted)."""

    sql: str
    bind: Callable[[dict[str, Any]], list[Any]]


def for_sqlite(statement: ClauseElement) -> SqliteStatement:
    compiled = statement.compile(dialect=sqlite.dialect())
    table = statement.table if hasattr(statement, "table") else None
    return SqliteStatement(compiled.string,
                           _binder(compiled, table.c if table is not None else {}))


def _binder(compiled: Any, columns: Any) -> Callable[[dict[str, Any]], list[Any]]:
    """`bind` of a compiled statement: the positional values of a row keyed by column,
    JSON and times (of `columns`, else as the parameter is typed) converted as SQLAlchemy
    stores them in SQLite."""
    names = list(compiled.positiontup)
    constants = {i: compiled.params[n] for i, n in enumerate(names) if not n.startswith("b_")}
    keys = [n[2:] if n.startswith("b_") else n for n in names]
    convert: list[tuple[int, Callable[[Any], Any]]] = []
    for i, key in enumerate(keys):
        column_type = columns[key].type if key in columns else compiled.binds[names[i]].type
        if isinstance(column_type, JSON):
            convert.append((i, dumps))
        elif isinstance(column_type, UTCDateTime):
            convert.append((i, sql_time))
    wanted = [k for i, k in enumerate(keys) if i not in constants]
    get = itemgetter(*wanted) if len(wanted) > 1 else lambda row: (row[wanted[0]],)

    def bind(row: dict[str, Any]) -> list[Any]:
        values = list(get(row))
        for i in sorted(constants):
            values.insert(i, constants[i])
        for i, conv in convert:
            values[i] = conv(values[i])
        return values
    return bind


# --------------------------------------------------- reads through sqlite3 straight
def ids_in(column: Any) -> Any:
    """`column` among the ids bound as `ids`, a list sent as a JSON array (one statement
    for any number of them: sqlite3 has no expanding parameters)."""
    return column.in_(select(func.json_each(bindparam("b_ids", type_=JSON))
                             .table_valued("value").c.value))


def _sqlite_json(text: Any) -> Any:
    """A JSON column's value (a column of numeric affinity: SQLite keeps the JSON text of
    a number as that number, as SQLAlchemy's SQLite JSON type knows)."""
    return orjson.loads(text) if isinstance(text, str) else text


def _sqlite_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=UTC)


@dataclass(frozen=True)
class SqliteRead:
    """A query as sqlite3 runs it: its text, `bind` (as `SqliteStatement`'s) and `row`
    making a row read into what SQLAlchemy would give (the columns by name, JSON and
    times converted), so code reading rows takes either."""

    sql: str
    bind: Callable[[dict[str, Any]], list[Any]]
    row: Callable[[tuple[Any, ...]], Any]


def read_for_sqlite(query: Select) -> SqliteRead:
    compiled = query.compile(dialect=sqlite.dialect())
    return SqliteRead(compiled.string, _binder(compiled, {}),
                      row_maker(query, {JSON: _sqlite_json, UTCDateTime: _sqlite_time}))
