"""A password change or reset ends every session of the account (SPEC §17's account
basics, §13): `users.token_generation` counts the changes of a user's password; a token
names the generation it was issued under, and one of an earlier generation is refused.
Existing rows start at 0, as do the tokens issued before (which name none).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27 16:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a column with a constant default: no table rebuild on SQLite, no rewrite on PostgreSQL
    op.add_column("users", sa.Column("token_generation", sa.Integer(), nullable=False,
                                     server_default="0"))


def downgrade() -> None:
    op.drop_column("users", "token_generation")
