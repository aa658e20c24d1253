"""Copies and reminders (SPEC §15): `circle_states.nudges`, what was sent about a
circle's attempt (its copies, the last urge, the last reminder), and one copy (mail of
kind `cc`) per instance, circle and recipient (`uq_mailbox_cc`).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 19:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("circle_states", sa.Column("nudges", sa.JSON(), nullable=True))
    op.create_index("uq_mailbox_cc", "mailbox",
                    ["instance_id", sa.text("coalesce(circle, '')"), "recipient_id"],
                    unique=True, sqlite_where=sa.text("kind = 'cc'"),
                    postgresql_where=sa.text("kind = 'cc'"))


def downgrade() -> None:
    op.drop_index("uq_mailbox_cc", table_name="mailbox")
    op.drop_column("circle_states", "nudges")
