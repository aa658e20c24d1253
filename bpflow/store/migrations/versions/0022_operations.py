"""Operations (SPEC §18): `operations`, a bulk operation asked for by an admin, and
`operation_items`, its result per instance; the indexes the operations page reads by
(instances filtered and newest first; failed circles, circles waiting since a time and
open tasks past their due time, each a partial index holding only those rows); and the
durations folded from the history (`wait_cursor`, `wait_rounds`, `wait_buckets`; the
cursor at the start, so the history there is folded by the worker, in order).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

INSTANCE_INDEXES = {
    "ix_instances_ops_status": ["tenant", "status", "created_at"],
    "ix_instances_ops_template": ["tenant", "template", "status", "created_at"],
    "ix_instances_ops_updated": ["tenant", "updated_at"],
}
CIRCLE_INDEXES = {  # name: (columns, the rows it holds)
    "ix_circle_states_failed": (["tenant", "circle"], "state = 'failure'"),
    "ix_circle_states_waiting": (["tenant", "ready_at"],
                                 "state = 'waiting' AND ready_at IS NOT NULL"),
    "ix_circle_states_overdue": (["tenant", "due_at"],
                                 "audience IS NOT NULL AND due_at IS NOT NULL"),
}


def upgrade() -> None:
    for name, columns in INSTANCE_INDEXES.items():
        op.create_index(name, "instances", columns)
    for name, (columns, where) in CIRCLE_INDEXES.items():
        op.create_index(name, "circle_states", columns, sqlite_where=sa.text(where),
                        postgresql_where=sa.text(where))
    op.create_table(
        "operations",
        sa.Column("id", sa.String(length=32), primary_key=True),
        sa.Column("tenant", sa.String(length=63),
                  sa.ForeignKey("tenants.name", ondelete="RESTRICT"), nullable=False,
                  server_default="default"),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("filter", sa.JSON(), nullable=True),
        sa.Column("created_by_id", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("matched", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("refused", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("finished_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_until", UTCDateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_operations_tenant", "operations", ["tenant", "created_at"])
    op.create_index("ix_operations_open", "operations", ["lease_until"],
                    sqlite_where=sa.text("finished_at IS NULL"),
                    postgresql_where=sa.text("finished_at IS NULL"))
    op.create_table(
        "operation_items",
        sa.Column("operation_id", sa.String(length=32),
                  sa.ForeignKey("operations.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("instance_id", sa.String(length=32), primary_key=True),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("at", UTCDateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_operation_items_state", "operation_items",
                    ["operation_id", "state", "instance_id"])
    op.create_table(
        "wait_cursor",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("position", sa.String(length=60), nullable=False),
    )
    op.execute("INSERT INTO wait_cursor (id, position) VALUES (1, '')")
    op.create_table(
        "wait_rounds",
        sa.Column("tenant", sa.String(length=63),
                  sa.ForeignKey("tenants.name", ondelete="RESTRICT"), nullable=False,
                  server_default="default"),
        sa.Column("instance_id", sa.String(length=32), primary_key=True),
        sa.Column("circle", sa.String(length=400), primary_key=True),
        sa.Column("ready_at", UTCDateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "wait_buckets",
        sa.Column("tenant", sa.String(length=63),
                  sa.ForeignKey("tenants.name", ondelete="RESTRICT"), primary_key=True,
                  server_default="default"),
        sa.Column("template", sa.String(length=100), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("circle", sa.String(length=400), primary_key=True),
        sa.Column("day", sa.String(length=10), primary_key=True),
        sa.Column("bucket", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("max", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    for table in ("wait_buckets", "wait_rounds", "wait_cursor"):
        op.drop_table(table)
    op.drop_index("ix_operation_items_state", table_name="operation_items")
    op.drop_table("operation_items")
    op.drop_index("ix_operations_open", table_name="operations")
    op.drop_index("ix_operations_tenant", table_name="operations")
    op.drop_table("operations")
    for name in CIRCLE_INDEXES:
        op.drop_index(name, table_name="circle_states")
    for name in INSTANCE_INDEXES:
        op.drop_index(name, table_name="instances")
