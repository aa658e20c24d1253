"""Small reads on a request's path, in the form each driver runs them (`Driver.rows`):
sqlite3 on an SQLite file, psycopg on PostgreSQL (one round trip on one of the driver's
read connections), where a pooled SQLAlchemy connection costs several times the client's
CPU and, on PostgreSQL, three round trips (its check, the query, its reset); SQLAlchemy
runs the same query on any other database. `Store._rows` runs one; `Instances._load_many`
reads instances and their circles by id (`by_ids`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, bindparam

from bpflow.store.pg.reads import Read, ids_any, read
from bpflow.store.sqlite.forms import SqliteRead, ids_in, read_for_sqlite


@dataclass(frozen=True)
class Straight:
    """A query (its parameters named `b_...`) in the form each driver runs it."""

    query: Select  # SQLAlchemy's
    sqlite: SqliteRead
    pg: Read


def straight(query: Select) -> Straight:
    return Straight(query, read_for_sqlite(query), read(query))


def by_ids(make: Callable[[Callable[[Any], Any]], Select]) -> Straight:
    """The query `make(ids)` gives, `ids(column)` being the condition that `column` is
    among the ids bound as `ids` (a list), in each driver's form: one statement for any
    number of ids (SQLAlchemy's expands them, sqlite3's takes a JSON array, psycopg's
    an array)."""
    return Straight(make(lambda column: column.in_(bindparam("b_ids", expanding=True))),
                    read_for_sqlite(make(ids_in)), read(make(ids_any)))
