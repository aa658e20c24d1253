"""Pinned nested templates are locked too: the versions an instance nests (pinned at its
start) can be neither changed nor deleted, like the instance's own version.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 03:23:55.648598
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instance_templates",
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["template_id"], ["templates.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("instance_id", "template_id"),
    )
    op.create_index(
        op.f("ix_instance_templates_template_id"),
        "instance_templates",
        ["template_id"],
        unique=False,
    )
    _triggers(USED_BY_INSTANCES_OR_NESTED)


def downgrade() -> None:
    _triggers(USED_BY_INSTANCES)
    op.drop_index(op.f("ix_instance_templates_template_id"), table_name="instance_templates")
    op.drop_table("instance_templates")


USED_BY_INSTANCES = "EXISTS (SELECT 1 FROM instances WHERE template_id = OLD.id)"
USED_BY_INSTANCES_OR_NESTED = (
    USED_BY_INSTANCES + " OR EXISTS (SELECT 1 FROM instance_templates WHERE template_id = OLD.id)"
)


def _triggers(condition: str) -> None:
    """Re-create the template locks of 0001 with `condition` for "has instances"."""
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for event, verb in (("update", "changed"), ("delete", "deleted")):
            op.execute(f"DROP TRIGGER IF EXISTS templates_locked_{event}")
            message = f"template version has instances: it cannot be {verb}"
            op.execute(f"""CREATE TRIGGER templates_locked_{event} BEFORE {event.upper()}
                ON templates WHEN {condition}
                BEGIN SELECT RAISE(ABORT, '{message}'); END""")
    elif dialect == "postgresql":
        op.execute(f"""CREATE OR REPLACE FUNCTION bpflow_templates_locked() RETURNS trigger AS $$
           BEGIN
             IF {condition} THEN
               RAISE EXCEPTION 'template version has instances: it cannot be %',
                 CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'changed' END;
             END IF;
             IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
             RETURN NEW;
           END $$ LANGUAGE plpgsql""")
