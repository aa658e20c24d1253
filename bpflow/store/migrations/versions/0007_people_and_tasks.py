"""People's tasks (SPEC §10): a circle's task (candidates, assignee, due time) and the two
columns a task list and "flows I take part in" search by, each with a partial index over
the rows that have one.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("circle_states") as batch:
        batch.add_column(sa.Column("task", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("audience", sa.Text(), nullable=True))
        batch.add_column(sa.Column("people", sa.Text(), nullable=True))
    op.create_index("ix_circle_states_open_tasks", "circle_states", ["ready_at", "instance_id"],
                    sqlite_where=sa.text("audience IS NOT NULL"),
                    postgresql_where=sa.text("audience IS NOT NULL"))
    op.create_index("ix_circle_states_people", "circle_states", ["instance_id"],
                    sqlite_where=sa.text("people IS NOT NULL"),
                    postgresql_where=sa.text("people IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_circle_states_people", table_name="circle_states")
    op.drop_index("ix_circle_states_open_tasks", table_name="circle_states")
    with op.batch_alter_table("circle_states") as batch:
        batch.drop_column("people")
        batch.drop_column("audience")
        batch.drop_column("task")
