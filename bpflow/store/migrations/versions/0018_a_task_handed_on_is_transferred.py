"""A task handed to someone else through `/assign` is a transfer (转办, SPEC §15): its
history events, recorded as `task_delegated` until now, are `task_transferred`, so that
`task_delegated` means only a delegation (委派: someone answers for the assignee).

Revision ID: 0018
Revises: 0016
Create Date: 2026-11-27 19:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE events SET kind = 'task_transferred' WHERE kind = 'task_delegated'")


def downgrade() -> None:
    op.execute("UPDATE events SET kind = 'task_delegated' WHERE kind = 'task_transferred'")
