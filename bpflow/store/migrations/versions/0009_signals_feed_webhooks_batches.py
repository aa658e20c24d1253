"""Signals, the event feed, webhooks, crowds and expiry (SPEC §11).

- `circle_states.signal`: what a ready `signal` circle waits for ("name\\x1fkey"), read
  by `POST /api/signals/{name}` through a partial index.
- `events.tx` (PostgreSQL: the writing transaction's id, a server default) and the feed's
  index `(tenant, tx, id)`: the feed hands out only rows no running transaction can still
  precede, so a cursor never skips a row committed late.
- `templates.stop_at`: the body's `stop_at`, for the worker's expiry sweep.
- `instances.batch` and `batches`: crowds started in one request.
- `webhooks` and `deliveries`: subscriptions to the feed and every delivery's attempts.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 13:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

PG_TX = "(pg_current_xact_id()::text::bigint)"


def _tenant() -> sa.Column:
    return sa.Column("tenant", sa.String(length=63), sa.ForeignKey(
        "tenants.name", ondelete="RESTRICT"), nullable=False, server_default="default")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    # plain ADD COLUMN: nullable columns need no table rebuild on SQLite either
    op.add_column("circle_states", sa.Column("signal", sa.Text(), nullable=True))
    op.create_index("ix_circle_states_signal", "circle_states", ["tenant", "signal"],
                    sqlite_where=sa.text("signal IS NOT NULL"),
                    postgresql_where=sa.text("signal IS NOT NULL"))
    op.add_column("events", sa.Column("tx", sa.BigInteger(), nullable=True))
    if postgres:
        op.execute(f"ALTER TABLE events ALTER COLUMN tx SET DEFAULT {PG_TX}")
        # the history written before: committed long ago, first in the feed
        op.execute("UPDATE events SET tx = 0 WHERE tx IS NULL")
    op.create_index("ix_events_feed", "events", ["tenant", "tx", "id"])
    op.add_column("templates", sa.Column("stop_at", UTCDateTime(timezone=True),
                                         nullable=True))
    op.add_column("instances", sa.Column("batch", sa.String(length=32), nullable=True))
    op.create_index("ix_instances_batch", "instances", ["batch", "tenant", "status", "version"],
                    sqlite_where=sa.text("batch IS NOT NULL"),
                    postgresql_where=sa.text("batch IS NOT NULL"))
    # a crowd's counts (crowds.py): each circle and state, the ids of a batch a range
    op.create_index("ix_circle_states_state", "circle_states",
                    ["circle", "state", "tenant", "instance_id"])
    op.create_table(
        "batches",
        sa.Column("id", sa.String(length=32), primary_key=True),
        _tenant(),
        sa.Column("template", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("started", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("tenant", "id", name="uq_batches_tenant_id"),
    )
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), primary_key=True),
        _tenant(),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("secret", sa.String(length=200), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("cursor", sa.String(length=100), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("disabled_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.UniqueConstraint("tenant", "id", name="uq_webhooks_tenant_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_webhooks_tenant", "webhooks", ["tenant"])
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), primary_key=True),
        _tenant(),
        sa.Column("webhook_id", sa.Integer(), sa.ForeignKey("webhooks.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("next_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", UTCDateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("webhook_id", "event_id", name="uq_deliveries_webhook_event"),
        sa.ForeignKeyConstraint(["tenant", "webhook_id"], ["webhooks.tenant", "webhooks.id"],
                                ondelete="CASCADE", name="fk_deliveries_webhook"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_deliveries_due", "deliveries", ["state", "next_at"])
    op.create_index("ix_deliveries_webhook", "deliveries", ["webhook_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_webhook", table_name="deliveries")
    op.drop_index("ix_deliveries_due", table_name="deliveries")
    op.drop_table("deliveries")
    op.drop_index("ix_webhooks_tenant", table_name="webhooks")
    op.drop_table("webhooks")
    op.drop_table("batches")
    op.drop_index("ix_circle_states_state", table_name="circle_states")
    op.drop_index("ix_instances_batch", table_name="instances")
    op.drop_index("ix_events_feed", table_name="events")
    op.drop_index("ix_circle_states_signal", table_name="circle_states")
    # plain DROP COLUMN (SQLite ≥ 3.35): a rebuild of instances would trip its children's
    # foreign keys
    op.drop_column("instances", "batch")
    op.drop_column("templates", "stop_at")
    op.drop_column("events", "tx")
    op.drop_column("circle_states", "signal")
