"""Template retirement (SPEC §10): a retired template is started no more, while its running
instances go on. A row per retired template name (restoring deletes it); which versions
a template has is not touched.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "template_retirements",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("retired_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("retired_by", sa.String(length=100), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("template_retirements")
