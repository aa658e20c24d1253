"""The Alembic migrations produce exactly the SQLModel schema, on both databases."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from bpflow.store.migrate import drift


def test_migrations_match_the_models(store):
    with store.db.connect() as conn:
        diff = drift(conn)
    assert diff == []


def test_upgrade_is_idempotent_and_sqlite_runs_in_wal_mode(db_url, store):
    from bpflow.store.migrate import upgrade
    upgrade(db_url)  # second run: nothing to do, no error
    tables = set(inspect(store.db).get_table_names())
    assert {"users", "templates", "instances", "circle_states", "events", "mailbox"} <= tables
    if db_url.startswith("sqlite"):
        with store.db.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


@pytest.mark.parametrize("role", ["approver", "admin"])
def test_an_inbox_page_and_its_counts_are_read_from_indexes(tmp_path, role):
    """A page of a big inbox must not sort the whole mailbox: the list is the top of
    `ix_mailbox_list`, the counts are index searches (`ix_mailbox_counts`, or for an
    administrator's guest messages of their tenant whichever of the recipient indexes and
    `ix_mailbox_guests` the planner picks), never a scan of the mailbox."""
    from sqlalchemy import event

    from bpflow.access import Caller
    from bpflow.mailbox import Mailbox
    from bpflow.store import Store
    from bpflow.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'plan.db'}"
    upgrade(url)  # the migrations' indexes, as a user's database has them
    store = Store(url, secret=b"s" * 32)
    try:
        store.add_user("ann", "ann-password-1", [role])
        user, statements = Caller.of(store.user("ann")), []

        def record(conn, cursor, statement, parameters, context, executemany):
            if statement.lstrip().upper().startswith("SELECT") and "mailbox" in statement:
                statements.append((statement, parameters))

        event.listen(store.db, "before_cursor_execute", record)
        Mailbox(store).inbox(user, kind="approval", limit=25, offset=0)
        store.mail_counts(user)
        event.remove(store.db, "before_cursor_execute", record)
        assert len(statements) == 2
        with store.db.connect() as conn:
            plans = [" | ".join(row[-1] for row in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {sql}", params).all()) for sql, params in statements]
        assert "ix_mailbox_list" in plans[0] and "TEMP B-TREE" not in plans[0], plans[0]
        searches = [part for part in plans[1].split(" | ") if "mailbox" in part]
        assert searches and all(part.startswith("SEARCH mailbox USING") and any(
            ix in part for ix in ("ix_mailbox_counts", "ix_mailbox_list", "ix_mailbox_guests"))
            for part in searches), plans[1]
    finally:
        store.close()


def test_user_ids_are_never_reused(store):
    """A token names a user id: an id that came back would hand a deleted user's token
    (and their rights over instances) to the next user created."""
    from sqlalchemy import text
    store.add_user("ann", "ann-password-1")
    gone = store.add_user("bob", "bob-password-1")
    with store.db.begin() as conn:  # deleted by hand, the highest id
        conn.execute(text("DELETE FROM users WHERE id = :i"), {"i": gone})
    assert store.add_user("cid", "cid-password-1") > gone


def test_users_can_be_disabled_and_listed_as_such(store):
    from bpflow.errors import NotFound
    store.add_user("ann", "ann-password-1")
    assert store.disable_user("ann") is True
    assert [(u["username"], u["disabled_at"] is not None) for u in store.list_users()] == \
        [("ann", True)]
    assert store.user("ann") is None and store.authenticate("ann", "ann-password-1") is None
    with pytest.raises(NotFound):
        store.disable_user("nobody")


def test_a_new_password_moves_the_accounts_token_generation_on(store):
    """`users.token_generation` (migration 0013): 0 for an account, one more with every new
    password, as `user`, `authenticate` and a token's `account` see it at once; only the
    store's tenant's users; NotFound for no such user."""
    from bpflow.errors import NotFound
    uid = store.add_user("ann", "ann-password-1")
    assert store.user("ann")["generation"] == 0 and store.account(uid).generation == 0
    assert store.set_password("ann", "ann-password-2") == 1
    assert store.set_password("ann", "ann-password-3") == 2
    assert store.user("ann")["generation"] == 2 and store.account(uid).generation == 2
    assert store.authenticate("ann", "ann-password-2") is None
    assert store.authenticate("ann", "ann-password-3")["generation"] == 2
    with pytest.raises(NotFound):
        store.set_password("nobody", "a-password")
    store.add_tenant("acme")
    with pytest.raises(NotFound):  # another tenant's
        store.of("acme").set_password("ann", "a-password")
    assert store.authenticate("ann", "ann-password-3") is not None


def test_the_sqlite_users_rebuild_keeps_every_row_and_reference(tmp_path):
    """Migration 0005 rebuilds `users` with AUTOINCREMENT on a database in use: the rows,
    the instances and mail that reference them, and the foreign keys all stay."""
    import sqlite3

    from alembic import command

    from bpflow.store.migrate import alembic_config, upgrade
    url = f"sqlite:///{tmp_path / 'old.db'}"
    command.upgrade(alembic_config(url), "0004")
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    db.execute("PRAGMA foreign_keys=ON")
    at = "2026-01-01 00:00:00"
    for uid, name in ((1, "ann"), (2, "bob"), (3, "cid"), (4, "eve")):
        db.execute("INSERT INTO users VALUES (?, ?, 'x', '[\"user\"]', ?)", (uid, name, at))
    db.execute("INSERT INTO templates VALUES (1, 't', 1, '{}', 'd', ?)", (at,))
    db.execute("INSERT INTO instances (id, template_id, template, version, nested_versions,"
               " user_id, user, status, inputs, variables, seq, lock_version, created_at,"
               " updated_at) VALUES ('i1', 1, 't', 1, '{}', 3, '{}', 'running', '{}', '{}',"
               " 0, 0, ?, ?)", (at, at))
    db.execute("INSERT INTO mailbox (kind, sender_id, sender_name, recipient_id, subject,"
               " body, created_at) VALUES ('message', 3, 'cid', 2, 's', 'b', ?)", (at,))
    db.close()
    upgrade(url)
    upgrade(url)  # idempotent
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    try:
        db.execute("PRAGMA foreign_keys=ON")
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'users'").fetchone()[0]
        assert "AUTOINCREMENT" in sql and "disabled_at" in sql
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        assert db.execute("SELECT id, username FROM users").fetchall() == \
            [(1, "ann"), (2, "bob"), (3, "cid"), (4, "eve")]
        head = db.execute("SELECT version_num FROM alembic_version").fetchall()
        assert head and head[0][0] >= "0005"
        with pytest.raises(sqlite3.IntegrityError):  # the references still hold
            db.execute("DELETE FROM users WHERE id = 3")
        db.execute("DELETE FROM users WHERE id = 4")  # the highest id, deleted by hand
        db.execute("INSERT INTO users (username, password_hash, roles, created_at)"
                   " VALUES ('dan', 'x', '[]', ?)", (at,))
        assert db.execute("SELECT id FROM users WHERE username = 'dan'").fetchone() == (5,)
    finally:
        db.close()


@pytest.fixture(params=["sqlite", "postgres"])
def url_at_0007(request, tmp_path, pg_available):
    """A database migrated to 0007 (before tenants); on PostgreSQL in a schema of its own."""
    import os
    import uuid
    from urllib.parse import quote

    from alembic import command
    from sqlalchemy import create_engine, text

    from bpflow.store.migrate import alembic_config
    from tests.conftest import PG_URL
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
        command.upgrade(alembic_config(url), "0007")
        yield url
        return
    if pg_available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI requires PostgreSQL: {pg_available}")
        pytest.skip(f"SKIPPING POSTGRESQL TESTS: {pg_available}")
    schema = f"bpflow_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    url = f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    try:
        command.upgrade(alembic_config(url), "0007")
        yield url
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


TENANT_TABLES = ("users", "templates", "instances", "instance_templates", "circle_states",
                 "task_audience", "events", "mailbox", "template_retirements")


def test_the_tenants_migration_puts_every_row_in_default(url_at_0007):
    """Migration 0008 on a database in use: every row lands in the tenant `default`, the
    references hold (and now name the tenant), the template locks of 0001/0003 still
    refuse changes to a used version, and on SQLite `users` stays AUTOINCREMENT."""
    from alembic import command
    from sqlalchemy import text

    from bpflow.store.connection import make_engine
    from bpflow.store.migrate import alembic_config, upgrade
    url, at = url_at_0007, "2026-01-01 00:00:00"
    db = make_engine(url)
    sqlite = db.dialect.name == "sqlite"
    try:
        with db.begin() as conn:
            for uid, name in ((1, "ann"), (2, "bob"), (3, "cid"), (4, "eve")):
                conn.execute(text("INSERT INTO users (id, username, password_hash, roles,"
                                  " created_at) VALUES (:i, :n, 'x', '[\"user\"]', :at)"),
                             {"i": uid, "n": name, "at": at})
            if not sqlite:  # the ids given by hand, as if the sequence had handed them out
                conn.execute(text("SELECT setval('users_id_seq', 4)"))
            conn.execute(text("DELETE FROM users WHERE id = 4"))  # the highest, by hand
            for tid, name in ((1, "outer"), (2, "inner")):
                conn.execute(text("INSERT INTO templates (id, name, version, body, digest,"
                                  " created_at) VALUES (:i, :n, 1, '{}', 'd', :at)"),
                             {"i": tid, "n": name, "at": at})
            conn.execute(text(
                "INSERT INTO instances (id, template_id, template, version, nested_versions,"
                " user_id, \"user\", status, inputs, variables, seq, lock_version, created_at,"
                " updated_at) VALUES ('i1', 1, 'outer', 1, '{\"inner\": 1}', 1, '{}',"
                " 'running', '{}', '{}', 1, 0, :at, :at)"), {"at": at})
            conn.execute(text("INSERT INTO instance_templates VALUES ('i1', 2)"))
            conn.execute(text("INSERT INTO circle_states (instance_id, circle, state,"
                              " attempts, epoch, people, audience) VALUES"
                              " ('i1', 'c1', 'ready', 0, 0, ' ann ', ' u:ann ')"))
            conn.execute(text("INSERT INTO task_audience VALUES ('i1', 'c1', 'u:ann', :at)"),
                         {"at": at})
            conn.execute(text("INSERT INTO events (instance_id, seq, at, kind) VALUES"
                              " ('i1', 1, :at, 'started')"), {"at": at})
            conn.execute(text("INSERT INTO mailbox (kind, sender_id, sender_name, recipient_id,"
                              " subject, body, instance_id, circle, epoch, created_at) VALUES"
                              " ('approval', 1, 'ann', 2, 's', 'b', 'i1', 'c1', 0, :at)"),
                         {"at": at})
            conn.execute(text("INSERT INTO template_retirements VALUES ('outer', :at, 'ann')"),
                         {"at": at})
        with db.connect() as conn:
            counts = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar()
                      for t in TENANT_TABLES}
        db.dispose()

        upgrade(url)
        upgrade(url)  # idempotent

        with db.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() \
                >= "0008"
            assert conn.execute(text("SELECT name FROM tenants")).all() == [("default",)]
            assert conn.execute(text("SELECT created_at FROM tenants")).scalar() is not None
            for table, count in counts.items():
                assert conn.execute(text(f"SELECT tenant, count(*) FROM {table}"
                                         " GROUP BY tenant")).all() == [("default", count)]
            diff = drift(conn)
            assert diff == []
            if sqlite:
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
                assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
                sql = dict(conn.exec_driver_sql("SELECT name, sql FROM sqlite_master").all())
                assert "AUTOINCREMENT" in sql["users"]
                assert "WHERE people IS NOT NULL" in sql["ix_circle_states_people"]
                assert {"templates_locked_update", "templates_locked_delete"} <= set(sql)

        # The template locks: a version used by an instance, or pinned as nested, is
        # neither changed nor deleted; an unused one still is the admin's.
        for statement in ("UPDATE templates SET body = '{\"x\": 1}' WHERE id = 1",
                          "UPDATE templates SET version = 7 WHERE id = 2",
                          "DELETE FROM templates WHERE id = 2"):
            with pytest.raises(Exception, match="has instances"), db.begin() as conn:
                conn.execute(text(statement))
        with db.begin() as conn:
            conn.execute(text("INSERT INTO templates (id, name, version, body, digest,"
                              " created_at) VALUES (3, 'spare', 1, '{}', 'd', :at)"),
                         {"at": at})
            conn.execute(text("UPDATE templates SET body = '{\"x\": 1}' WHERE id = 3"))
            conn.execute(text("DELETE FROM templates WHERE id = 3"))

        # The references name the tenant: another tenant's row cannot point at these.
        with db.begin() as conn:
            conn.execute(text("INSERT INTO tenants (name, created_at) VALUES ('acme', :at)"),
                         {"at": at})
        with pytest.raises(Exception, match="(?i)foreign key"), db.begin() as conn:
            conn.execute(text("INSERT INTO events (tenant, instance_id, seq, at, kind) VALUES"
                              " ('acme', 'i1', 2, :at, 'stolen')"), {"at": at})
        with pytest.raises(Exception, match="(?i)foreign key"), db.begin() as conn:
            conn.execute(text("DELETE FROM users WHERE id = 1"))  # still referenced

        # Ids are never reused: the highest one, deleted by hand before the migration
        # rebuilt the table, is not handed out again.
        with db.begin() as conn:
            conn.execute(text("INSERT INTO users (tenant, username, password_hash, roles,"
                              " created_at) VALUES ('acme', 'dan', 'x', '[]', :at)"),
                         {"at": at})
            assert conn.execute(text("SELECT id FROM users WHERE username = 'dan'")).scalar() \
                == 5
        db.dispose()

        # Down again: refused while another tenant has rows, then back to 0007 intact.
        refused = alembic_config(url)
        with pytest.raises(Exception, match="other than 'default'"), db.begin() as conn:
            refused.attributes["connection"] = conn  # (env.py's own engine would be left open)
            command.downgrade(refused, "0007")
        with db.begin() as conn:
            conn.execute(text("DELETE FROM users WHERE tenant = 'acme'"))
        db.dispose()
        command.downgrade(alembic_config(url), "0007")
        with db.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM events")).scalar() == 1
            assert conn.execute(text("SELECT id, username FROM users ORDER BY id")).all() == \
                [(1, "ann"), (2, "bob"), (3, "cid")]
            if sqlite:
                assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        with pytest.raises(Exception, match="has instances"), db.begin() as conn:
            conn.execute(text("DELETE FROM templates WHERE id = 2"))
        db.dispose()
        upgrade(url)
        with db.connect() as conn:
            diff = drift(conn)
            assert diff == []
    finally:
        db.dispose()


def test_only_a_crowds_circle_rows_carry_its_batch_and_0010_fills_older_crowds(db_url, store):
    """A step of an instance outside any crowd has no entry of `ix_circle_states_batch`
    to move (its rows' batch is null); a crowd's rows name it, also those written before
    0010 (taken back to 0009 and upgraded again: filled from `instances.batch`)."""
    from alembic import command
    from sqlalchemy import text

    from bpflow.store.migrate import alembic_config, upgrade
    store.put_template({"name": "c", "circles": [
        {"uri": "a", "box": {"form": [{"name": "v", "type": "integer"}]}},
        {"uri": "b", "deps": [["a"]]}]})
    store.add_user("amy", "pw-of-amy-123456", roles=["crowd"])
    store.add_user("bo", "pw-of-bo-1234567", roles=["crowd"])
    single = store.start("c").id
    batch, started = store.start_batch("c", role="crowd")
    assert started == 2

    def rows() -> dict[str, set]:
        with store.db.connect() as conn:
            found: dict[str, set] = {}
            for iid, b in conn.execute(text("SELECT instance_id, batch FROM circle_states")):
                found.setdefault(iid, set()).add(b)
            return found
    before = rows()
    assert before.pop(single) == {None}
    assert len(before) == 2 and all(b == {batch} for b in before.values())
    stats = store.batch_stats(batch)["circles"]
    store.db.dispose()
    cfg = alembic_config(db_url)
    command.downgrade(cfg, "0009")
    upgrade(db_url)
    assert rows() == {single: {None}, **before}
    assert store.batch_stats(batch)["circles"] == stats == {
        "a": {"waiting": 2, "success": 0, "failure": 0, "skipped": 0},
        "b": {"waiting": 2, "success": 0, "failure": 0, "skipped": 0}}


def _keys(store) -> set[tuple[str, tuple[str, ...], str]]:
    """Every foreign key of the database: (table, its columns, the table it points at)."""
    found = inspect(store.db)
    return {(table, tuple(k["constrained_columns"]), k["referred_table"])
            for table in found.get_table_names() for k in found.get_foreign_keys(table)}


def test_postgresql_checks_each_reference_once_and_the_composite_keys_still_hold(
        db_url, store):
    """The one-column keys a composite key implies (`tables._implied`: `instance_id →
    instances` beside `(tenant, instance_id) → instances`, `tenant → tenants` beside a
    never-null composite key) exist on SQLite only (0011); on PostgreSQL a row of another
    tenant, of a missing instance or of a missing tenant is still refused, and deleting
    an instance still takes its rows with it. Taken back to 0010, the keys come back."""
    from alembic import command
    from sqlalchemy import exc, text
    from sqlmodel import SQLModel

    from bpflow.store.migrate import alembic_config, upgrade
    model = {(t.name, tuple(c.name for c in k.columns), k.referred_table.name): k._ddl_if
             for t in SQLModel.metadata.sorted_tables for k in t.foreign_key_constraints}
    implied = {key for key, only in model.items() if only is not None}
    assert ("events", ("tenant",), "tenants") in implied
    assert ("events", ("instance_id",), "instances") in implied
    assert ("events", ("tenant", "instance_id"), "instances") not in implied
    assert ("templates", ("tenant",), "tenants") not in implied  # the chain's end
    assert ("mailbox", ("tenant",), "tenants") not in implied  # its composites may be null
    everything = set(model)
    assert _keys(store) == (everything - implied if store.postgres else everything)

    store.put_template({"name": "c", "circles": [{"uri": "a"}, {"uri": "b", "deps": [["a"]]}]})
    iid = store.start("c").id
    refused = [  # (what, SQL)
        ("another tenant's instance", "INSERT INTO events (tenant, instance_id, seq, at, kind)"
         " VALUES ('nobody', :i, 99, CURRENT_TIMESTAMP, 'x')"),
        ("a missing instance", "INSERT INTO events (tenant, instance_id, seq, at, kind)"
         " VALUES ('default', 'missing', 99, CURRENT_TIMESTAMP, 'x')"),
        ("a circle moved to a missing tenant",
         "UPDATE circle_states SET tenant = 'nobody' WHERE instance_id = :i"),
        ("an instance moved to a missing tenant",
         "UPDATE instances SET tenant = 'nobody' WHERE id = :i"),
    ]
    for what, statement in refused:
        with pytest.raises(exc.IntegrityError), store.db.begin() as conn:
            conn.execute(text(statement), {"i": iid})
            pytest.fail(f"written: {what}")  # not reached when the statement is refused
    with store.db.begin() as conn:
        conn.execute(text("DELETE FROM instances WHERE id = :i"), {"i": iid})
        left = [conn.execute(text(f"SELECT count(*) FROM {t} WHERE instance_id = :i"),
                             {"i": iid}).scalar()
                for t in ("circle_states", "events", "instance_templates")]
    assert left == [0, 0, 0]

    store.db.dispose()
    command.downgrade(alembic_config(db_url), "0010")
    later = ("substitutes", "files", "file_blobs", "drafts", "template_layouts",  # after 0011
             "audit", "operations", "operation_items", "wait_rounds", "wait_buckets",
             "failed_circles")
    assert _keys(store) == {k for k in everything if k[0] not in later}
    upgrade(db_url)
    assert _keys(store) == (everything - implied if store.postgres else everything)


def test_0018_calls_a_task_handed_on_by_assign_a_transfer(tmp_path):
    """Migration 0018: the history events `/assign` recorded as `task_delegated` are
    `task_transferred` (`task_delegated` is a delegation, SPEC §15); a downgrade turns
    them back."""
    from alembic import command
    from sqlalchemy import text

    from bpflow.access import Caller
    from bpflow.moves import claim, transfer
    from bpflow.store import Store
    from bpflow.store.migrate import alembic_config
    from tests.conftest import SECRET, sqlite_database
    url = sqlite_database(tmp_path / "handed.db")
    store = Store(url, secret=SECRET)
    for name in ("ann", "fred", "gina"):
        store.add_user(name, f"{name}-password-1", ["user"])
    store.put_template({"name": "t", "circles": [
        {"uri": "a", "assign": {"users": ["fred", "gina"]}, "box": {"confirm": "ok?"}}]})
    iid = store.start("t", {}, store.user("ann")).id
    fred = Caller.of(store.user("fred"))
    claim(store, fred, iid, "a")
    transfer(store, fred, iid, "a", "gina")
    store.close()

    def kinds() -> list[str]:
        engine = Store(url, secret=SECRET)
        try:
            with engine.db.begin() as conn:
                return [k for (k,) in conn.execute(text(
                    "SELECT kind FROM events WHERE kind LIKE 'task_%' ORDER BY id"))]
        finally:
            engine.close()
    assert kinds() == ["task_claimed", "task_transferred"]
    command.downgrade(alembic_config(url), "0013")
    assert kinds() == ["task_claimed", "task_delegated"]  # as recorded before 0018
    command.upgrade(alembic_config(url), "head")
    assert kinds() == ["task_claimed", "task_transferred"]
