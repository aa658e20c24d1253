"""Tenants (SPEC §12): every user, template, instance, pinned nested version, circle, task
audience row, event, mail and retirement belongs to one tenant. A `tenants` table (with
the row `default`, in which every existing row ends up) and a `tenant` column on each of
those tables, defaulting to `default`. Rows point at each other with the tenant too
(composite foreign keys to `(tenant, id)`, which becomes unique on users, templates and
instances), so a row can never reference another tenant's. Template names are unique per
tenant (`(tenant, name, version)`), a retirement is keyed by `(tenant, name)`, and the
indexes a tenant's lists are read by start with the tenant.

On SQLite the tables are rebuilt (Alembic's batch mode), as in 0005: the whole upgrade
runs in a transaction of its own with foreign keys off (dropping a referenced table would
otherwise delete or refuse its children), every reference is checked before it commits,
and `users` stays AUTOINCREMENT with its high-water mark (a copy would restart from the
highest id left, and hand out again the ids of users deleted above it). Dropping a table
drops its triggers, and renaming one fails on a trigger that names a table gone for the
moment: the template locks of 0001/0003 are taken out before the rebuilds and put back,
as they were, after them.

The downgrade removes the tenants again; it refuses while rows of a tenant other than
`default` exist (they would be merged into one namespace).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 09:00:00
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from bpflow.store.connection import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

DEFAULT = "default"

# (table, the column `tenant` goes after, or None for first), parents before children.
TABLES = [
    ("users", "id"),
    ("templates", "id"),
    ("instances", "id"),
    ("instance_templates", None),
    ("circle_states", None),
    ("task_audience", None),
    ("events", "id"),
    ("mailbox", "id"),
    ("template_retirements", None),
]

# Unique (tenant, id): what the composite foreign keys point at.
TENANT_IDS = {"users": "uq_users_tenant_id", "templates": "uq_templates_tenant_id",
              "instances": "uq_instances_tenant_id"}

# table: [(name, (tenant, column), parent table, ondelete)]
IN_TENANT = {
    "instances": [("fk_instances_template", "template_id", "templates", "RESTRICT"),
                  ("fk_instances_user", "user_id", "users", "RESTRICT")],
    "instance_templates": [
        ("fk_instance_templates_instance", "instance_id", "instances", "CASCADE"),
        ("fk_instance_templates_template", "template_id", "templates", "RESTRICT")],
    "circle_states": [("fk_circle_states_instance", "instance_id", "instances", "CASCADE")],
    "task_audience": [("fk_task_audience_instance", "instance_id", "instances", "CASCADE")],
    "events": [("fk_events_instance", "instance_id", "instances", "CASCADE")],
    "mailbox": [("fk_mailbox_sender", "sender_id", "users", "RESTRICT"),
                ("fk_mailbox_recipient", "recipient_id", "users", "RESTRICT"),
                ("fk_mailbox_instance", "instance_id", "instances", "RESTRICT")],
}

# table: [(index, columns at 0007 or None, columns now)]
INDEXES: dict[str, list[tuple[str, list[str] | None, list[str]]]] = {
    "instances": [("ix_instances_tenant_created", None, ["tenant", "created_at"])],
    "task_audience": [("ix_task_audience_who", ["who", "ready_at"],
                       ["tenant", "who", "ready_at"])],
    "mailbox": [("ix_mailbox_guests", None, ["tenant", "kind", "recipient_id", "created_at"])],
}

RETIREMENTS_PK = "template_retirements_pkey"


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite and "tenants" in sa.inspect(bind).get_table_names():
        return  # the rebuild committed before its revision was recorded
    with _rebuilding(bind):
        tenants = op.create_table(
            "tenants",
            sa.Column("name", sa.String(length=63), nullable=False),
            sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
            sa.Column("quotas", sa.JSON(), nullable=True),
            sa.PrimaryKeyConstraint("name"),
        )
        op.bulk_insert(tenants, [{"name": DEFAULT, "created_at": datetime.now(UTC),
                                  "quotas": None}])
        for table, after in TABLES:
            with _batch(bind, table) as batch:
                key = sqlite and table == "template_retirements"  # as its new primary key
                batch.add_column(
                    sa.Column("tenant", sa.String(length=63), nullable=False,
                              server_default=DEFAULT, primary_key=key),
                    **_placed(sqlite, table, after))
                batch.create_foreign_key(f"{table}_tenant_fkey", "tenants", ["tenant"],
                                         ["name"], ondelete="RESTRICT")
                if table in TENANT_IDS:
                    batch.create_unique_constraint(TENANT_IDS[table], ["tenant", "id"])
                if table == "templates":
                    batch.drop_constraint("uq_templates_name_version", type_="unique")
                    batch.create_unique_constraint("uq_templates_tenant_name_version",
                                                   ["tenant", "name", "version"])
                if table == "template_retirements":
                    if not sqlite:  # SQLite's is unnamed: replaced by the one created
                        batch.drop_constraint(_primary_key(bind, table), type_="primary")
                    batch.create_primary_key(RETIREMENTS_PK, ["tenant", "name"])
                for name, column, parent, ondelete in IN_TENANT.get(table, []):
                    batch.create_foreign_key(name, parent, ["tenant", column],
                                             ["tenant", "id"], ondelete=ondelete)
                for name, old, new in INDEXES.get(table, []):
                    if old:
                        batch.drop_index(name)
                    batch.create_index(name, new)


def downgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite and "tenants" not in sa.inspect(bind).get_table_names():
        return  # the rebuild committed before its revision was recorded
    others = [(table, tenant) for table, _ in TABLES
              for (tenant,) in bind.execute(sa.text(
                  f"SELECT DISTINCT tenant FROM {table} WHERE tenant <> :d"), {"d": DEFAULT})]
    if others:
        raise RuntimeError(
            "cannot downgrade below 0008: rows of tenants other than 'default' exist "
            f"(table, tenant: {sorted(others)}); delete them first")
    with _rebuilding(bind):
        for table, _ in reversed(TABLES):
            with _batch(bind, table) as batch:
                for name, old, _new in INDEXES.get(table, []):
                    batch.drop_index(name)
                    if old:
                        batch.create_index(name, old)
                for name, *_ in IN_TENANT.get(table, []):
                    batch.drop_constraint(name, type_="foreignkey")
                if table == "template_retirements":
                    if not sqlite:
                        batch.drop_constraint(_primary_key(bind, table), type_="primary")
                    else:  # named by the upgrade on SQLite
                        batch.drop_constraint(RETIREMENTS_PK, type_="primary")
                    batch.create_primary_key(RETIREMENTS_PK, ["name"])
                if table == "templates":
                    batch.drop_constraint("uq_templates_tenant_name_version", type_="unique")
                    batch.create_unique_constraint("uq_templates_name_version",
                                                   ["name", "version"])
                if table in TENANT_IDS:
                    batch.drop_constraint(TENANT_IDS[table], type_="unique")
                batch.drop_constraint(f"{table}_tenant_fkey", type_="foreignkey")
                batch.drop_column("tenant")
        op.drop_table("tenants")


def _placed(sqlite: bool, table: str, after: str | None) -> dict[str, str]:
    """Where a rebuilt table has the column (as tables.py declares it); ALTER appends."""
    if not sqlite:
        return {}
    if after:
        return {"insert_after": after}
    first = {"instance_templates": "instance_id", "circle_states": "instance_id",
             "task_audience": "instance_id", "template_retirements": "name"}[table]
    return {"insert_before": first}


def _primary_key(bind, table: str) -> str:
    return sa.inspect(bind).get_pk_constraint(table)["name"]


def _batch(bind, table: str):
    """ALTERs on PostgreSQL; on SQLite a rebuilt table (users stays AUTOINCREMENT)."""
    if bind.dialect.name != "sqlite":
        return op.batch_alter_table(table)
    kwargs = {"sqlite_autoincrement": True} if table == "users" else {}
    return op.batch_alter_table(table, recreate="always", table_kwargs=kwargs)


@contextlib.contextmanager
def _rebuilding(bind):
    """On SQLite: the block in a transaction of its own with foreign keys off, the
    triggers taken out (put back unchanged after it) and AUTOINCREMENT's high-water marks
    kept; every reference is checked before
    it commits, and the connection is left as it was found (foreign keys on, in a
    transaction). What ran before it is committed first. Elsewhere: just the block."""
    if bind.dialect.name != "sqlite":
        yield
        return
    raw = bind.connection.driver_connection  # sqlite3, transactions begun by us
    inside = raw.in_transaction
    if inside:
        raw.execute("COMMIT")
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        raw.execute("BEGIN IMMEDIATE")
        try:
            triggers = raw.execute("SELECT name, sql FROM sqlite_master"
                                   " WHERE type = 'trigger' ORDER BY name").fetchall()
            for name, _sql in triggers:
                raw.execute(f'DROP TRIGGER "{name}"')
            sequences = _sequences(raw)
            yield
            for _name, sql in triggers:
                raw.execute(sql)
            for name, seq in sequences.items():  # the copy starts from the highest id left
                if name in _sequences(raw):
                    raw.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?",
                                (seq, name))
                elif name in _tables(raw):
                    raw.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)",
                                (name, seq))
            broken = raw.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"rebuilding the tables broke references: {broken[:5]}")
            raw.execute("COMMIT")
        except BaseException:
            raw.execute("ROLLBACK")
            raise
    finally:
        raw.execute("PRAGMA foreign_keys=ON")
        if inside:
            raw.execute("BEGIN IMMEDIATE")  # the caller's transaction goes on (and commits)


def _tables(raw) -> set[str]:
    return {name for (name,) in raw.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}


def _sequences(raw) -> dict[str, int]:
    """AUTOINCREMENT's high-water marks: a rebuilt table's would be the highest id it
    holds, and the ids of rows deleted above it would be handed out again."""
    if "sqlite_sequence" not in _tables(raw):
        return {}
    return dict(raw.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
