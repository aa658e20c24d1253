"""Substitutes (代理人, SPEC §15): `substitutes`, one row per user who named one (whom,
from when, until when, for which templates, who set it), read by the substitute's id
(`ix_substitutes_to`); and `mailbox.decided_by`, who took an approval's decision (the
addressee, or "ann for bob" when their substitute did).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 19:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a nullable column: no table rebuild on SQLite, no rewrite on PostgreSQL
    op.add_column("mailbox", sa.Column("decided_by", sa.String(210), nullable=True))
    # the one-column keys the composite ones imply are SQLite's only (as since 0011)
    sqlite = op.get_bind().dialect.name == "sqlite"

    def key(target: str, ondelete: str) -> list[sa.ForeignKey]:
        return [sa.ForeignKey(target, ondelete=ondelete)] if sqlite else []
    op.create_table(
        "substitutes",
        sa.Column("tenant", sa.String(length=63), *key("tenants.name", "RESTRICT"),
                  nullable=False, server_default="default"),
        sa.Column("user_id", sa.Integer(), *key("users.id", "CASCADE"), primary_key=True,
                  autoincrement=False),
        sa.Column("to_id", sa.Integer(), *key("users.id", "CASCADE"), nullable=False),
        sa.Column("starts_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("ends_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("templates", sa.JSON(), nullable=True),
        sa.Column("set_by", sa.String(length=100), nullable=False),
        sa.Column("set_at", UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant", "user_id"], ["users.tenant", "users.id"],
                                ondelete="CASCADE", name="fk_substitutes_user"),
        sa.ForeignKeyConstraint(["tenant", "to_id"], ["users.tenant", "users.id"],
                                ondelete="CASCADE", name="fk_substitutes_to"),
    )
    op.create_index("ix_substitutes_to", "substitutes", ["to_id", "ends_at"])


def downgrade() -> None:
    op.drop_index("ix_substitutes_to", table_name="substitutes")
    op.drop_table("substitutes")
    op.drop_column("mailbox", "decided_by")
