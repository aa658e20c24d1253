"""Approvals and staged input: a circle's pending action state, signed decisions, one
request mail per attempt and recipient, hashed guest clients for rate limits.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 02:26:31.026455
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("circle_states", sa.Column("pending", sa.JSON(), nullable=True))
    op.add_column("mailbox", sa.Column("decision_signature", sa.String(length=128), nullable=True))
    op.add_column("mailbox", sa.Column("epoch", sa.Integer(), nullable=True))
    op.add_column("mailbox", sa.Column("client", sa.String(length=64), nullable=True))
    op.create_index(op.f("ix_mailbox_client"), "mailbox", ["client"], unique=False)
    op.create_index(
        "uq_mailbox_request",
        "mailbox",
        ["instance_id", "circle", "epoch", "recipient_id"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("uq_mailbox_request", table_name="mailbox")
    op.drop_index(op.f("ix_mailbox_client"), table_name="mailbox")
    op.drop_column("mailbox", "client")
    op.drop_column("mailbox", "epoch")
    op.drop_column("mailbox", "decision_signature")
    op.drop_column("circle_states", "pending")
