"""Each user's language (SPEC §17): `users.language`, the BCP 47 code of the language the
web app speaks to them (`en`, `zh-CN`), null until they choose one (their browser's
language is used meanwhile).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("users", sa.Column("language", sa.String(16), nullable=True))


def downgrade() -> None:
    # SQLite drops a column in place (3.35 and later): no rebuild of a table others
    # reference
    op.drop_column("users", "language")
