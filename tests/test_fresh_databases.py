"""The fresh databases of the fixtures (tests/conftest.py) are the databases an upgrade
makes: a copied SQLite file and a PostgreSQL schema built from replayed statements have the
tables, columns, constraints, indexes, triggers, functions, sequences and rows of one that
Alembic upgraded itself. The one difference: the time the migrations write into a row (the
default tenant's `created_at`) is when the process's one upgrade ran."""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime
from pathlib import Path

from sqlalchemy import create_engine, text

from bpflow.store import Store
from bpflow.store.migrate import upgrade
from tests.conftest import need_postgres, pg_schema, sqlite_database

# Everything of the current schema, its name written as S (index and function definitions
# carry it).
CATALOG = [
    """SELECT table_name, column_name, data_type, column_default, is_nullable,
              ordinal_position FROM information_schema.columns
       WHERE table_schema = current_schema() ORDER BY 1, 6""",
    """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
       WHERE connamespace = current_schema()::regnamespace ORDER BY 1, 2""",
    """SELECT tablename, indexname, replace(indexdef, current_schema(), 'S') FROM pg_indexes
       WHERE schemaname = current_schema() ORDER BY 1, 2""",
    """SELECT t.tgrelid::regclass::text, t.tgname,
              replace(pg_get_triggerdef(t.oid), current_schema(), 'S')
       FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
       WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
       ORDER BY 1, 2""",
    """SELECT proname, replace(pg_get_functiondef(oid), current_schema(), 'S') FROM pg_proc
       WHERE pronamespace = current_schema()::regnamespace ORDER BY 1""",
    """SELECT sequencename, start_value, last_value, increment_by FROM pg_sequences
       WHERE schemaname = current_schema() ORDER BY 1""",
]


def _time(value: object) -> bool:
    """A time, or SQLite's text of one."""
    return isinstance(value, datetime) or (
        isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\d[ T][\d:.+]+", value) is not None)


def _rows(rows) -> list[str]:
    """The rows, sorted, each written out with its times as TIME (when the upgrade ran)."""
    return sorted(repr(tuple("TIME" if _time(value) else value for value in row))
                  for row in rows)


def _postgres(url: str) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            seen = [conn.execute(text(query)).all() for query in CATALOG]
            tables = conn.execute(text(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "ORDER BY 1")).scalars().all()
            for table in tables:
                rows = conn.execute(text(f'SELECT * FROM "{table}"')).all()
                seen.append((table, _rows(rows)))
        return seen
    finally:
        engine.dispose()


def _lines(sql: str | None) -> list[str]:
    """A definition's lines, sorted: a table Alembic rebuilt lists its foreign keys in an
    order that differs between two upgrades."""
    return sorted(line.strip().rstrip(",") for line in (sql or "").splitlines())


def _sqlite(path: Path) -> list:
    with sqlite3.connect(path) as conn:
        seen = [[(kind, name, table, _lines(sql)) for kind, name, table, sql in conn.execute(
                     "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")]]
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                     "ORDER BY name").fetchall():
            seen.append((table, _rows(conn.execute(f'SELECT * FROM "{table}"'))))
        seen.append(conn.execute("PRAGMA user_version").fetchall())
    conn.close()
    return seen


def test_a_fresh_sqlite_database_is_an_upgraded_one(tmp_path):
    upgrade(f"sqlite:///{tmp_path / 'upgraded.db'}")
    sqlite_database(tmp_path / "first.db")
    sqlite_database(tmp_path / "copied.db")
    expected = _sqlite(tmp_path / "upgraded.db")
    assert len(expected[0]) > 10 and len(dict(expected[1:-1])["alembic_version"]) == 1
    assert _sqlite(tmp_path / "first.db") == expected
    assert _sqlite(tmp_path / "copied.db") == expected


def test_a_fresh_postgresql_schema_is_an_upgraded_one(pg_available):
    need_postgres(pg_available)
    with pg_schema(upgrade) as upgraded:
        expected = _postgres(upgraded)
    assert len(expected[0]) > 50 and len(expected[3]) > 0  # columns, triggers
    with pg_schema() as first, pg_schema() as replayed:
        assert _postgres(first) == expected
        assert _postgres(replayed) == expected
        store = Store(first, secret=b"s")
        store.add_user("left-behind", "pw-left-behind", ["user"])
        store.close()
    # the next tests get those schemas again, emptied: still what an upgrade makes
    with pg_schema() as again, pg_schema() as other:
        assert {again, other} == {first, replayed}
        assert _postgres(again) == expected
        assert _postgres(other) == expected
