"""Failed circles kept as rows (SPEC §18): `failed_circles` holds one row per failed
circle (never a sandbox's) with what the operations page groups, filters and orders them
by: the instance's template and start, the circle's reason and its first 100 characters
(`reason_key`, what an index entry can hold on PostgreSQL however long a reason is), and
whether it is an incident (`active`: its instance is running, failed or suspended).
Triggers write it in the very transaction that writes the circle's or the instance's row,
from the two rows as they are then, whatever writes them (each driver, a migration, raw
SQL): a circle that fails, is retried or changes its reason; an instance whose status
enters or leaves those three. A circle's row deleted (its instance's with it) takes its
row along (the foreign key). The incident groups are counted from one index
(`ix_failed_circles_incidents`, its active rows), a group's newest instances are its
top, and the list of an incident's instances is the top of `ix_failed_circles_list`.
The index of failed circles of 0022 goes (read by nothing now); open tasks past due are
indexed in the order they are listed (due time, instance, circle).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 02:00:00
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
COLUMNS = "tenant, instance_id, circle, template, reason, reason_key, created_at, active"
# the row of failed circle NEW, unless its instance is a sandbox's (one statement for
# each dialect's trigger; NEW is the circle's row)
OF_CIRCLE = f"""INSERT INTO failed_circles ({COLUMNS})
    SELECT NEW.tenant, i.id, NEW.circle, i.template, NEW.reason, substr(NEW.reason, 1, 100),
           i.created_at, i.status IN {OPEN}
    FROM instances i
    WHERE i.id = NEW.instance_id AND NOT i.sandbox"""
# whether the failed circles of instance NEW are incidents (NEW is the instance's row)
OF_INSTANCE = f"""UPDATE failed_circles SET active = (NEW.status IN {OPEN})
    WHERE instance_id = NEW.id"""
CIRCLE_CHANGED = "(OLD.state = 'failure' OR NEW.state = 'failure') AND ({changed})"
OPENED_OR_CLOSED = f"(OLD.status IN {OPEN}) <> (NEW.status IN {OPEN})"
SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER failed_circle_inserted AFTER INSERT ON circle_states
       WHEN NEW.state = 'failure'
       BEGIN {OF_CIRCLE}; END""",
    f"""CREATE TRIGGER failed_circle_updated AFTER UPDATE OF state, reason ON circle_states
       WHEN {CIRCLE_CHANGED.format(changed="OLD.state IS NOT NEW.state"
                                   " OR OLD.reason IS NOT NEW.reason")}
       BEGIN
         DELETE FROM failed_circles WHERE instance_id = OLD.instance_id
                                      AND circle = OLD.circle;
         {OF_CIRCLE} AND NEW.state = 'failure';
       END""",
    f"""CREATE TRIGGER failed_circles_of_instance AFTER UPDATE OF status ON instances
       WHEN {OPENED_OR_CLOSED}
       BEGIN {OF_INSTANCE}; END""",
]
POSTGRES_TRIGGERS = [
    f"""CREATE FUNCTION bpflow_failed_circle() RETURNS trigger AS $$
       BEGIN
         IF TG_OP = 'UPDATE' THEN
           DELETE FROM failed_circles WHERE instance_id = OLD.instance_id
                                        AND circle = OLD.circle;
         END IF;
         IF NEW.state = 'failure' THEN
           {OF_CIRCLE};
         END IF;
         RETURN NULL;
       END $$ LANGUAGE plpgsql""",
    f"""CREATE FUNCTION bpflow_failed_circles_of_instance() RETURNS trigger AS $$
       BEGIN
         {OF_INSTANCE};
         RETURN NULL;
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER failed_circle_inserted AFTER INSERT ON circle_states
       FOR EACH ROW WHEN (NEW.state = 'failure')
       EXECUTE FUNCTION bpflow_failed_circle()""",
    f"""CREATE TRIGGER failed_circle_updated AFTER UPDATE OF state, reason ON circle_states
       FOR EACH ROW WHEN ({CIRCLE_CHANGED.format(
           changed="OLD.state IS DISTINCT FROM NEW.state"
                   " OR OLD.reason IS DISTINCT FROM NEW.reason")})
       EXECUTE FUNCTION bpflow_failed_circle()""",
    f"""CREATE TRIGGER failed_circles_of_instance AFTER UPDATE OF status ON instances
       FOR EACH ROW WHEN ({OPENED_OR_CLOSED})
       EXECUTE FUNCTION bpflow_failed_circles_of_instance()""",
]
FAILED = "state = 'failure'"
OVERDUE = "audience IS NOT NULL AND due_at IS NOT NULL"


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "failed_circles",
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("instance_id", sa.String(length=32), primary_key=True),
        sa.Column("circle", sa.String(length=400), primary_key=True),
        sa.Column("template", sa.String(length=100), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("reason_key", sa.String(length=100), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["instance_id", "circle"],
                                ["circle_states.instance_id", "circle_states.circle"],
                                name="fk_failed_circles_circle", ondelete="CASCADE"),
    )
    op.create_index("ix_failed_circles_incidents", "failed_circles",
                    ["tenant", "active", "template", "circle", "reason_key", "created_at",
                     "instance_id"])
    op.create_index("ix_failed_circles_list", "failed_circles",
                    ["tenant", "circle", "reason_key", "created_at", "instance_id"])
    # the failed circles there are now
    op.execute(f"""INSERT INTO failed_circles ({COLUMNS})
        SELECT c.tenant, c.instance_id, c.circle, i.template, c.reason,
               substr(c.reason, 1, 100), i.created_at, i.status IN {OPEN}
        FROM circle_states c JOIN instances i ON i.id = c.instance_id
        WHERE c.state = 'failure' AND NOT i.sandbox""")
    if dialect == "postgresql":  # read well from the start (not when autovacuum comes)
        op.execute("ANALYZE failed_circles")
    for statement in {"sqlite": SQLITE_TRIGGERS, "postgresql": POSTGRES_TRIGGERS}.get(dialect, []):
        op.execute(statement)
    op.drop_index("ix_circle_states_failed", table_name="circle_states")
    op.drop_index("ix_circle_states_overdue", table_name="circle_states")
    op.create_index("ix_circle_states_overdue", "circle_states",
                    ["tenant", "due_at", "instance_id", "circle"],
                    sqlite_where=sa.text(OVERDUE), postgresql_where=sa.text(OVERDUE))


def downgrade() -> None:
    op.drop_index("ix_circle_states_overdue", table_name="circle_states")
    op.create_index("ix_circle_states_overdue", "circle_states", ["tenant", "due_at"],
                    sqlite_where=sa.text(OVERDUE), postgresql_where=sa.text(OVERDUE))
    op.create_index("ix_circle_states_failed", "circle_states", ["tenant", "circle"],
                    sqlite_where=sa.text(FAILED), postgresql_where=sa.text(FAILED))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS failed_circles_of_instance ON instances")
        op.execute("DROP TRIGGER IF EXISTS failed_circle_updated ON circle_states")
        op.execute("DROP TRIGGER IF EXISTS failed_circle_inserted ON circle_states")
        op.execute("DROP FUNCTION IF EXISTS bpflow_failed_circles_of_instance()")
        op.execute("DROP FUNCTION IF EXISTS bpflow_failed_circle()")
    else:
        for name in ("failed_circles_of_instance", "failed_circle_updated",
                     "failed_circle_inserted"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_index("ix_failed_circles_list", table_name="failed_circles")
    op.drop_index("ix_failed_circles_incidents", table_name="failed_circles")
    op.drop_table("failed_circles")
