"""Small reads straight through the database's driver: sqlite3 on an SQLite file,
psycopg on PostgreSQL (one round trip on one of the writer's read connections), where a
pooled SQLAlchemy connection costs several times the client's CPU and, on PostgreSQL,
three round trips (its check, the query, its reset). `Store._rows` runs them; SQLAlchemy
runs the same query on any other database."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select

from bpflow.store import pg_writer as pg
from bpflow.store import statements as sql


@dataclass(frozen=True)
class Straight:
    """A query (its parameters named `b_...`) in the form each driver runs it."""

    query: Select
    sqlite: sql.SqliteRead
    pg: pg.Read


def straight(query: Select) -> Straight:
    return Straight(query, sql.read_for_sqlite(query), pg.read(query))
