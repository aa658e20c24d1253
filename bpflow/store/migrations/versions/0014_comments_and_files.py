"""Files (SPEC §15): `files`, each upload's record (who sent it, name, size, sha256, the
sniffed type, the instance whose form holds it), and `file_blobs`, the bytes once per
tenant and content hash when they are kept in the database. Comments need no table: each
is an event of its instance's history (kind `comment`).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27 19:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def _tenant(keyed: bool = True, primary: bool = False) -> sa.Column:
    keys = [sa.ForeignKey("tenants.name", ondelete="RESTRICT")] if keyed else []
    return sa.Column("tenant", sa.String(length=63), *keys, nullable=False,
                     server_default="default", primary_key=primary)


def _key(target: str, ondelete: str) -> list[sa.ForeignKey]:
    """A one-column key implied by a composite one: SQLite only (see tables.py)."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    return [sa.ForeignKey(target, ondelete=ondelete)] if sqlite else []


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=32), primary_key=True),
        _tenant(keyed=sqlite),
        sa.Column("owner_id", sa.Integer(), *_key("users.id", "RESTRICT"), nullable=False),
        sa.Column("owner", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=100), nullable=False),
        sa.Column("instance_id", sa.String(length=32), *_key("instances.id", "CASCADE"),
                  nullable=True),
        sa.Column("circle", sa.String(length=400), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant", "owner_id"], ["users.tenant", "users.id"],
                                ondelete="RESTRICT", name="fk_files_owner"),
        sa.ForeignKeyConstraint(["tenant", "instance_id"],
                                ["instances.tenant", "instances.id"],
                                ondelete="CASCADE", name="fk_files_instance"),
    )
    op.create_index("ix_files_instance", "files", ["tenant", "instance_id"])
    op.create_index("ix_files_unused", "files", ["created_at"],
                    sqlite_where=sa.text("instance_id IS NULL"),
                    postgresql_where=sa.text("instance_id IS NULL"))
    op.create_index("ix_files_owner", "files", ["tenant", "owner_id", "created_at"])
    op.create_table(
        "file_blobs",
        _tenant(primary=True),
        sa.Column("sha256", sa.String(length=64), primary_key=True),
        sa.Column("content", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("file_blobs")
    op.drop_index("ix_files_owner", table_name="files")
    op.drop_index("ix_files_unused", table_name="files")
    op.drop_index("ix_files_instance", table_name="files")
    op.drop_table("files")
