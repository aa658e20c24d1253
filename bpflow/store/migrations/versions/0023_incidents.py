"""Incidents kept as rows (SPEC §18): `incidents` holds one row per failed circle of an
instance not over (running, failed or suspended; never a sandbox's), with what the
operations page groups and orders them by (the instance's template and start, the
circle's reason and its first 100 characters, `reason_key`). Triggers write it in the
very transaction that writes the circle or the instance row, from the two rows as they
are then, whatever writes them (each driver, a migration, raw SQL): a circle that fails,
is retried or changes its reason; an instance whose status enters or leaves those three.
A circle's row deleted (its instance's with it) takes its incident along (the foreign
key). The groups are then counted from one index (`ix_incidents_groups`), and a group's
newest instances are its top.

Also: failed circles indexed by circle and the reason's first 100 characters, with their
instance (the list of an incident's instances; the key an index entry can hold on
PostgreSQL however long a reason is), and open tasks past due indexed in the order they
are listed (due time, instance, circle).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

OPEN = "('running', 'failed', 'suspended')"  # engine.instance: statuses not over
COLUMNS = "tenant, instance_id, circle, template, reason, reason_key, created_at"
# the incident of circle NEW, if its instance is not over (one statement per dialect's
# trigger; NEW is the circle's row)
OF_CIRCLE = f"""INSERT INTO incidents ({COLUMNS})
    SELECT NEW.tenant, i.id, NEW.circle, i.template, NEW.reason, substr(NEW.reason, 1, 100),
           i.created_at
    FROM instances i
    WHERE i.id = NEW.instance_id AND i.status IN {OPEN} AND NOT i.sandbox"""
# the incidents of instance NEW, if it is not over (NEW is the instance's row)
OF_INSTANCE = f"""INSERT INTO incidents ({COLUMNS})
    SELECT c.tenant, c.instance_id, c.circle, NEW.template, c.reason, substr(c.reason, 1, 100),
           NEW.created_at
    FROM circle_states c
    WHERE c.instance_id = NEW.id AND c.state = 'failure' AND NEW.status IN {OPEN}
      AND NOT NEW.sandbox"""
CIRCLE_CHANGED = "(OLD.state = 'failure' OR NEW.state = 'failure') AND ({changed})"
OPENED_OR_CLOSED = f"(OLD.status IN {OPEN}) <> (NEW.status IN {OPEN})"
SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER incidents_circle_inserted AFTER INSERT ON circle_states
       WHEN NEW.state = 'failure'
       BEGIN {OF_CIRCLE}; END""",
    f"""CREATE TRIGGER incidents_circle_updated AFTER UPDATE OF state, reason ON circle_states
       WHEN {CIRCLE_CHANGED.format(changed="OLD.state IS NOT NEW.state"
                                   " OR OLD.reason IS NOT NEW.reason")}
       BEGIN
         DELETE FROM incidents WHERE instance_id = OLD.instance_id AND circle = OLD.circle;
         {OF_CIRCLE} AND NEW.state = 'failure';
       END""",
    f"""CREATE TRIGGER incidents_instance_updated AFTER UPDATE OF status ON instances
       WHEN {OPENED_OR_CLOSED}
       BEGIN
         DELETE FROM incidents WHERE instance_id = OLD.id;
         {OF_INSTANCE};
       END""",
]
POSTGRES_TRIGGERS = [
    f"""CREATE FUNCTION bpflow_incident_of_circle() RETURNS trigger AS $$
       BEGIN
         IF TG_OP = 'UPDATE' THEN
           DELETE FROM incidents WHERE instance_id = OLD.instance_id AND circle = OLD.circle;
         END IF;
         IF NEW.state = 'failure' THEN
           {OF_CIRCLE};
         END IF;
         RETURN NULL;
       END $$ LANGUAGE plpgsql""",
    f"""CREATE FUNCTION bpflow_incidents_of_instance() RETURNS trigger AS $$
       BEGIN
         DELETE FROM incidents WHERE instance_id = OLD.id;
         {OF_INSTANCE};
         RETURN NULL;
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER incidents_circle_inserted AFTER INSERT ON circle_states
       FOR EACH ROW WHEN (NEW.state = 'failure')
       EXECUTE FUNCTION bpflow_incident_of_circle()""",
    f"""CREATE TRIGGER incidents_circle_updated AFTER UPDATE OF state, reason ON circle_states
       FOR EACH ROW WHEN ({CIRCLE_CHANGED.format(
           changed="OLD.state IS DISTINCT FROM NEW.state"
                   " OR OLD.reason IS DISTINCT FROM NEW.reason")})
       EXECUTE FUNCTION bpflow_incident_of_circle()""",
    f"""CREATE TRIGGER incidents_instance_updated AFTER UPDATE OF status ON instances
       FOR EACH ROW WHEN ({OPENED_OR_CLOSED})
       EXECUTE FUNCTION bpflow_incidents_of_instance()""",
]
FAILED = "state = 'failure'"
OVERDUE = "audience IS NOT NULL AND due_at IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("instance_id", sa.String(length=32), primary_key=True),
        sa.Column("circle", sa.String(length=400), primary_key=True),
        sa.Column("template", sa.String(length=100), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("reason_key", sa.String(length=100), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["instance_id", "circle"],
                                ["circle_states.instance_id", "circle_states.circle"],
                                name="fk_incidents_circle", ondelete="CASCADE"),
    )
    op.create_index("ix_incidents_groups", "incidents",
                    ["tenant", "template", "circle", "reason_key", "created_at",
                     "instance_id"])
    # the incidents there are now: every failed circle of an instance not over
    op.execute(f"""INSERT INTO incidents ({COLUMNS})
        SELECT c.tenant, c.instance_id, c.circle, i.template, c.reason,
               substr(c.reason, 1, 100), i.created_at
        FROM circle_states c JOIN instances i ON i.id = c.instance_id
        WHERE c.state = 'failure' AND i.status IN {OPEN} AND NOT i.sandbox""")
    dialect = op.get_bind().dialect.name
    for statement in {"sqlite": SQLITE_TRIGGERS, "postgresql": POSTGRES_TRIGGERS}.get(dialect, []):
        op.execute(statement)
    op.drop_index("ix_circle_states_failed", table_name="circle_states")
    op.create_index("ix_circle_states_failed", "circle_states",
                    ["tenant", "circle", sa.text("substr(reason, 1, 100)"), "instance_id"],
                    sqlite_where=sa.text(FAILED), postgresql_where=sa.text(FAILED))
    op.drop_index("ix_circle_states_overdue", table_name="circle_states")
    op.create_index("ix_circle_states_overdue", "circle_states",
                    ["tenant", "due_at", "instance_id", "circle"],
                    sqlite_where=sa.text(OVERDUE), postgresql_where=sa.text(OVERDUE))


def downgrade() -> None:
    op.drop_index("ix_circle_states_overdue", table_name="circle_states")
    op.create_index("ix_circle_states_overdue", "circle_states", ["tenant", "due_at"],
                    sqlite_where=sa.text(OVERDUE), postgresql_where=sa.text(OVERDUE))
    op.drop_index("ix_circle_states_failed", table_name="circle_states")
    op.create_index("ix_circle_states_failed", "circle_states", ["tenant", "circle"],
                    sqlite_where=sa.text(FAILED), postgresql_where=sa.text(FAILED))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS incidents_instance_updated ON instances")
        op.execute("DROP TRIGGER IF EXISTS incidents_circle_updated ON circle_states")
        op.execute("DROP TRIGGER IF EXISTS incidents_circle_inserted ON circle_states")
        op.execute("DROP FUNCTION IF EXISTS bpflow_incidents_of_instance()")
        op.execute("DROP FUNCTION IF EXISTS bpflow_incident_of_circle()")
    else:
        for name in ("incidents_instance_updated", "incidents_circle_updated",
                     "incidents_circle_inserted"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_index("ix_incidents_groups", table_name="incidents")
    op.drop_table("incidents")
