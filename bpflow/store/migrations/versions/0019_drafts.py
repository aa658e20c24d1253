"""Designing flows in the browser (SPEC §16): `drafts`, a template being designed, its
author's, kept until published or deleted (read by author: `ix_drafts_author`); and
`template_layouts`, where the designer draws each template's circles (the positions last
published), kept beside the versions so that moving circles makes no new version.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the one-column keys the composite ones imply are SQLite's only (as since 0011)
    sqlite = op.get_bind().dialect.name == "sqlite"

    def key(target: str, ondelete: str) -> list[sa.ForeignKey]:
        return [sa.ForeignKey(target, ondelete=ondelete)] if sqlite else []
    op.create_table(
        "drafts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("tenant", sa.String(length=63), *key("tenants.name", "RESTRICT"),
                  nullable=False, server_default="default"),
        sa.Column("author_id", sa.Integer(), *key("users.id", "CASCADE"), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant", "author_id"], ["users.tenant", "users.id"],
                                ondelete="CASCADE", name="fk_drafts_author"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_drafts_author", "drafts", ["tenant", "author_id"])
    op.create_table(
        "template_layouts",
        sa.Column("tenant", sa.String(length=63),
                  sa.ForeignKey("tenants.name", ondelete="RESTRICT"), nullable=False,
                  server_default="default"),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("positions", sa.JSON(), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(length=100), nullable=True),
        sa.PrimaryKeyConstraint("tenant", "name"),
    )


def downgrade() -> None:
    op.drop_table("template_layouts")
    op.drop_index("ix_drafts_author", table_name="drafts")
    op.drop_table("drafts")
