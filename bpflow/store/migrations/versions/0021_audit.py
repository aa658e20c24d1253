"""The audit log (SPEC §18): `audit`, what each admin did, append-only. Triggers refuse
an UPDATE or a DELETE of its rows on PostgreSQL and on SQLite, even from raw SQL (a
TRUNCATE, an owner's act on the whole table, is not a row's change).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = [
    """CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
       BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
       BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
]
POSTGRES_TRIGGERS = [
    """CREATE FUNCTION bpflow_audit_append_only() RETURNS trigger AS $$
       BEGIN
         RAISE EXCEPTION 'the audit log is append-only';
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
       FOR EACH ROW EXECUTE FUNCTION bpflow_audit_append_only()""",
]


def upgrade() -> None:
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("tenant", sa.String(length=63),
                  sa.ForeignKey("tenants.name", ondelete="RESTRICT"), nullable=False,
                  server_default="default"),
        sa.Column("at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=100), nullable=True),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_tenant", "audit", ["tenant", "id"])
    dialect = op.get_bind().dialect.name
    for statement in {"sqlite": SQLITE_TRIGGERS, "postgresql": POSTGRES_TRIGGERS}.get(dialect, []):
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_append_only ON audit")
        op.execute("DROP FUNCTION IF EXISTS bpflow_audit_append_only()")
    op.drop_index("ix_audit_tenant", table_name="audit")
    op.drop_table("audit")
