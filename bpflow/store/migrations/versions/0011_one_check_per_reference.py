"""PostgreSQL checks each reference once: the one-column foreign keys that a composite
one of the same table implies are dropped there (`tables._implied`).

Since 0008 a row points at its parent twice or three times: `(tenant, instance_id) →
instances(tenant, id)` and also `instance_id → instances(id)` and `tenant →
tenants(name)`. PostgreSQL checks every key of every inserted row with a query that locks
the row pointed at (`SELECT … FOR KEY SHARE`): a step's events and a start's circle rows
paid each check three times over, and every transaction locked the one `tenants` row of
its tenant. The composite keys alone give the same guarantees: the parent exists, has
the same tenant, and its own tenant exists (checked along the chain of composite keys,
which ends at a table with its own `tenant → tenants`). The ON DELETE actions are the
same on both.

SQLite keeps them: a check there is an index lookup without a lock, and dropping a
constraint means rebuilding the table (all of `events`).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# (table, column, referred table, referred column, ON DELETE), as 0001-0009 made them
IMPLIED = [
    ("instances", "tenant", "tenants", "name", "RESTRICT"),
    ("instances", "template_id", "templates", "id", "RESTRICT"),
    ("instances", "user_id", "users", "id", "RESTRICT"),
    ("instance_templates", "tenant", "tenants", "name", "RESTRICT"),
    ("instance_templates", "instance_id", "instances", "id", "CASCADE"),
    ("instance_templates", "template_id", "templates", "id", "RESTRICT"),
    ("circle_states", "tenant", "tenants", "name", "RESTRICT"),
    ("circle_states", "instance_id", "instances", "id", "CASCADE"),
    ("task_audience", "tenant", "tenants", "name", "RESTRICT"),
    ("task_audience", "instance_id", "instances", "id", "CASCADE"),
    ("events", "tenant", "tenants", "name", "RESTRICT"),
    ("events", "instance_id", "instances", "id", "CASCADE"),
    ("mailbox", "instance_id", "instances", "id", "RESTRICT"),
    ("mailbox", "sender_id", "users", "id", "RESTRICT"),
    ("mailbox", "recipient_id", "users", "id", "RESTRICT"),
    ("deliveries", "tenant", "tenants", "name", "RESTRICT"),
    ("deliveries", "webhook_id", "webhooks", "id", "CASCADE"),
]


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    if not _postgres():
        return
    inspector = sa.inspect(op.get_bind())
    for table, column, referred, _, _ in IMPLIED:
        for key in inspector.get_foreign_keys(table):
            if key["constrained_columns"] == [column] and key["referred_table"] == referred \
                    and key["name"] is not None:  # PostgreSQL names every constraint
                op.drop_constraint(key["name"], table, type_="foreignkey")


def downgrade() -> None:
    if not _postgres():
        return
    for table, column, referred, target, ondelete in IMPLIED:
        op.create_foreign_key(f"{table}_{column}_fkey", table, referred, [column], [target],
                              ondelete=ondelete)
