"""Trying a draft (SPEC §16 "Try it"): `instances.sandbox` marks an instance run from a
draft in the designer's sandbox (in no list, count, feed or quota; never due for the
worker; deleted after a day) and `templates.sandbox` the body it runs, kept as a version
row named outside the names templates may have, so it is no version of any template.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("templates", "instances"):
        op.add_column(table, sa.Column("sandbox", sa.Boolean(), nullable=False,
                                       server_default=sa.false()))
    # the worker's sweep of sandboxes a day old: only theirs
    op.create_index("ix_templates_sandbox", "templates", ["created_at"],
                    sqlite_where=sa.text("sandbox"), postgresql_where=sa.text("sandbox"))


def downgrade() -> None:
    op.drop_index("ix_templates_sandbox", table_name="templates")
    for table in ("instances", "templates"):
        op.drop_column(table, "sandbox")
