"""People's tasks (SPEC §10): a circle's task (candidates, assignee, due time) and the two
columns derived from it (whom it waits for, everyone it names), and `task_audience`, one
row per person or role an open task waits for: what a task list is read by.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("circle_states") as batch:
        batch.add_column(sa.Column("task", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("audience", sa.Text(), nullable=True))
        batch.add_column(sa.Column("people", sa.Text(), nullable=True))
    op.create_index("ix_circle_states_people", "circle_states", ["instance_id"],
                    sqlite_where=sa.text("people IS NOT NULL"),
                    postgresql_where=sa.text("people IS NOT NULL"))
    op.create_table(
        "task_audience",
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("circle", sa.String(length=400), nullable=False),
        sa.Column("who", sa.String(length=150), nullable=False),
        sa.Column("ready_at", UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("instance_id", "circle", "who"),
    )
    op.create_index("ix_task_audience_who", "task_audience", ["who", "ready_at"])


def downgrade() -> None:
    op.drop_index("ix_task_audience_who", table_name="task_audience")
    op.drop_table("task_audience")
    op.drop_index("ix_circle_states_people", table_name="circle_states")
    with op.batch_alter_table("circle_states") as batch:
        batch.drop_column("people")
        batch.drop_column("audience")
        batch.drop_column("task")
