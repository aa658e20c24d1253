"""Users are disabled, never deleted, and their ids are never reused: `users.disabled_at`,
and on SQLite `AUTOINCREMENT` on `users.id` (PostgreSQL's sequence never reuses a value).

SQLite can only add AUTOINCREMENT by rebuilding the table (Alembic's batch mode: a new
table, the rows copied, the old one dropped, the new one renamed). Dropping a table that
others reference needs foreign keys off, which SQLite ignores inside a transaction: the
rebuild runs in a transaction of its own with them off, checks every reference before it
commits, and leaves the connection as it found it (foreign keys on, in a transaction).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 04:30:00
"""

from __future__ import annotations

import contextlib
from datetime import datetime

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if "disabled_at" in {c["name"] for c in sa.inspect(bind).get_columns("users")}:
        return  # a rebuild that committed before its revision was recorded
    column: sa.Column[datetime] = sa.Column("disabled_at", UTCDateTime(timezone=True),
                                            nullable=True)
    if bind.dialect.name != "sqlite":
        op.add_column("users", column)
        return
    with _foreign_keys_off(bind), op.batch_alter_table(
            "users", recreate="always", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(column)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_column("users", "disabled_at")
        return
    with _foreign_keys_off(bind), op.batch_alter_table("users", recreate="always") as batch:
        batch.drop_column("disabled_at")


@contextlib.contextmanager
def _foreign_keys_off(bind):
    """The block in a transaction of its own with SQLite's foreign keys off; the
    references are checked before it commits. What ran before it is committed first."""
    raw = bind.connection.driver_connection  # sqlite3, transactions begun by us
    inside = raw.in_transaction
    if inside:
        raw.execute("COMMIT")
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        raw.execute("BEGIN IMMEDIATE")
        try:
            yield
            broken = raw.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"rebuilding users broke references: {broken[:5]}")
            raw.execute("COMMIT")
        except BaseException:
            raw.execute("ROLLBACK")
            raise
    finally:
        raw.execute("PRAGMA foreign_keys=ON")
        if inside:
            raw.execute("BEGIN IMMEDIATE")  # the caller's transaction goes on (and commits)
