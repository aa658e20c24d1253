"""Initial schema: users, templates, instances, circle states, events, mailbox.

Triggers keep a template version that has instances from being changed or deleted,
whatever client runs the SQL.

Revision ID: 0001
Revises:
Create Date: 2026-11-22 02:16:53.144829
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "templates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", "version", name="uq_templates_name_version"),
    )
    op.create_index(op.f("ix_templates_name"), "templates", ["name"], unique=False)
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=100), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("roles", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("username"),
    )
    op.create_table(
        "instances",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=False),
        sa.Column("template", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("nested_versions", sa.JSON(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("user", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("variables", sa.JSON(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("lock_version", sa.Integer(), nullable=False),
        sa.Column("due_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_until", UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["template_id"], ["templates.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_instances_due_at"), "instances", ["due_at"], unique=False)
    op.create_index(op.f("ix_instances_status"), "instances", ["status"], unique=False)
    op.create_index(op.f("ix_instances_template_id"), "instances", ["template_id"], unique=False)
    op.create_index(
        "ix_instances_user_template", "instances", ["user_id", "template"], unique=False
    )
    op.create_table(
        "circle_states",
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("circle", sa.String(length=400), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("ready_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("due_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("instance_id", "circle"),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("actor", sa.String(length=100), nullable=True),
        sa.Column("circle", sa.String(length=400), nullable=True),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("instance_id", "seq", name="uq_events_instance_seq"),
    )
    op.create_table(
        "mailbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("sender_id", sa.Integer(), nullable=True),
        sa.Column("sender_name", sa.String(length=100), nullable=False),
        sa.Column("recipient_id", sa.Integer(), nullable=True),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("signature", sa.String(length=128), nullable=True),
        sa.Column("decision", sa.String(length=20), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("instance_id", sa.String(length=32), nullable=True),
        sa.Column("circle", sa.String(length=400), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("read_at", UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["recipient_id"], ["users.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["sender_id"], ["users.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_mailbox_recipient_kind", "mailbox", ["recipient_id", "kind"], unique=False)

    _lock_instantiated_templates()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS templates_locked ON templates")
        op.execute("DROP FUNCTION IF EXISTS bpflow_templates_locked()")
    op.drop_index("ix_mailbox_recipient_kind", table_name="mailbox")
    op.drop_table("mailbox")
    op.drop_table("events")
    op.drop_table("circle_states")
    op.drop_index("ix_instances_user_template", table_name="instances")
    op.drop_index(op.f("ix_instances_template_id"), table_name="instances")
    op.drop_index(op.f("ix_instances_status"), table_name="instances")
    op.drop_index(op.f("ix_instances_due_at"), table_name="instances")
    op.drop_table("instances")
    op.drop_table("users")
    op.drop_index(op.f("ix_templates_name"), table_name="templates")
    op.drop_table("templates")


SQLITE_TRIGGERS = [
    """CREATE TRIGGER templates_locked_update BEFORE UPDATE ON templates
       WHEN EXISTS (SELECT 1 FROM instances WHERE template_id = OLD.id)
       BEGIN SELECT RAISE(ABORT, 'template version has instances: it cannot be changed'); END""",
    """CREATE TRIGGER templates_locked_delete BEFORE DELETE ON templates
       WHEN EXISTS (SELECT 1 FROM instances WHERE template_id = OLD.id)
       BEGIN SELECT RAISE(ABORT, 'template version has instances: it cannot be deleted'); END""",
]
POSTGRES_TRIGGERS = [
    """CREATE FUNCTION bpflow_templates_locked() RETURNS trigger AS $$
       BEGIN
         IF EXISTS (SELECT 1 FROM instances WHERE template_id = OLD.id) THEN
           RAISE EXCEPTION 'template version has instances: it cannot be %',
             CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'changed' END;
         END IF;
         IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
         RETURN NEW;
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER templates_locked BEFORE UPDATE OR DELETE ON templates
       FOR EACH ROW EXECUTE FUNCTION bpflow_templates_locked()""",
]


def _lock_instantiated_templates() -> None:
    dialect = op.get_bind().dialect.name
    for statement in {"sqlite": SQLITE_TRIGGERS, "postgresql": POSTGRES_TRIGGERS}.get(dialect, []):
        op.execute(statement)
