"""A step writes fewer index pages: the crowd counts' index holds crowds' rows only, and
SQLite's event feed reads by id.

- `circle_states.batch`: the crowd of the row's instance (`instances.batch`), written
  when the row is inserted (a crowd's start, a migration's new circles); filled here for
  the crowds started before.
- `ix_circle_states_batch (tenant, batch, circle, state) WHERE batch IS NOT NULL`
  replaces `ix_circle_states_state`, which every step of every instance had to update
  (a circle's state is in its key): ~3.5 of the ~12 pages a step wrote to SQLite's WAL.
- `ix_events_feed` is kept on PostgreSQL only: SQLite's feed reads events by id (one
  writer at a time, ids in commit order), so the index was one more page each step.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

CROWD = sa.text("batch IS NOT NULL")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.add_column("circle_states", sa.Column("batch", sa.String(length=32), nullable=True))
    op.execute("UPDATE circle_states SET batch = (SELECT i.batch FROM instances i"
               " WHERE i.id = circle_states.instance_id)"
               " WHERE instance_id IN (SELECT id FROM instances WHERE batch IS NOT NULL)")
    op.drop_index("ix_circle_states_state", table_name="circle_states")
    op.create_index("ix_circle_states_batch", "circle_states",
                    ["tenant", "batch", "circle", "state"],
                    sqlite_where=CROWD, postgresql_where=CROWD)
    if not postgres:
        op.drop_index("ix_events_feed", table_name="events")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.create_index("ix_events_feed", "events", ["tenant", "tx", "id"])
    op.drop_index("ix_circle_states_batch", table_name="circle_states")
    op.create_index("ix_circle_states_state", "circle_states",
                    ["circle", "state", "tenant", "instance_id"])
    op.drop_column("circle_states", "batch")
