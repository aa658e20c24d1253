"""Inbox indexes: a page of mail is read from the top of an index in its order (no sort
of the whole mailbox), and the unread/pending counts from a covering index.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 08:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_mailbox_list", "mailbox",
                    ["recipient_id", "kind", "created_at", "id"], unique=False)
    op.create_index("ix_mailbox_counts", "mailbox",
                    ["recipient_id", "kind", "read_at", "decision"], unique=False)
    op.drop_index("ix_mailbox_recipient_kind", table_name="mailbox")


def downgrade() -> None:
    op.create_index("ix_mailbox_recipient_kind", "mailbox", ["recipient_id", "kind"],
                    unique=False)
    op.drop_index("ix_mailbox_counts", table_name="mailbox")
    op.drop_index("ix_mailbox_list", table_name="mailbox")
