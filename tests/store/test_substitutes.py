"""The substitutes' rows (SPEC §15) on SQLite and PostgreSQL: one per user, replaced by a
new one, cleared; an account carries whom it stands in for (not yet ended ones only), at
once in this process; a user's rows go with them. And a task list read with substitutes
present stays a search of the audience index (no scan of the tasks)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import event, text

from bpflow.store import Store
from bpflow.store.migrate import upgrade


def _ids(store, *names):
    return [store.add_user(n, f"pw-{n}-123", ["user"]) for n in names]


def test_one_row_per_user_replaced_cleared_and_seen_by_the_account(store):
    bob, ann, cid = _ids(store, "bob", "ann", "cid")
    now = store.clock()
    assert store.account(ann).stands_for == ()
    store.put_substitute(bob, ann, now - timedelta(hours=1), now + timedelta(days=1), None,
                         "bob")
    [one] = store.account(ann).stands_for  # at once, though accounts are reused 2 s
    assert (one.user_id, one.username, one.templates, one.active(now)) == \
        (bob, "bob", None, True)
    got = store.substitute_of(bob)
    assert (got["user"], got["to"], got["to_id"], got["set_by"]) == ("bob", "ann", ann, "bob")
    store.put_substitute(bob, cid, now + timedelta(hours=1), now + timedelta(days=1),
                         ["a", "b"], "root")
    assert store.account(ann).stands_for == ()
    [later] = store.account(cid).stands_for
    assert (later.templates, later.active(now), later.covers("a"), later.covers("z")) == \
        (("a", "b"), False, True, False)
    assert store.substitute_ids([bob, ann]) == {bob: cid}
    with store.db.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM substitutes")).scalar() == 1
    assert store.clear_substitute(bob) is True and store.clear_substitute(bob) is False
    assert store.substitute_of(bob) is None and store.account(cid).stands_for == ()


def test_an_ended_substitution_is_not_carried(store):
    bob, ann = _ids(store, "bob", "ann")
    now = store.clock()
    store.put_substitute(bob, ann, now - timedelta(days=2), now - timedelta(days=1), None, "x")
    assert store.account(ann).stands_for == ()
    assert store.substitute_of(bob) is not None  # kept, shown as ended


def test_a_task_list_with_substitutes_is_read_from_the_audience_index(tmp_path):
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    upgrade(url)
    store = Store(url, secret=b"s" * 32)
    try:
        bob, ann, cid = _ids(store, "bob", "ann", "cid")
        now = store.clock()
        store.put_substitute(bob, ann, now - timedelta(hours=1), now + timedelta(days=1),
                             None, "bob")
        store.put_substitute(cid, ann, now - timedelta(hours=1), now + timedelta(days=1),
                             ["errand"], "cid")
        statements = []

        def record(conn, cursor, statement, parameters, context, executemany):
            if "task_audience" in statement:
                statements.append((statement, parameters))
        event.listen(store.db, "before_cursor_execute", record)
        rows, total = store.tasks(store.account(ann), "all", None, 50, 0)
        event.remove(store.db, "before_cursor_execute", record)
        assert (rows, total) == ([], 0) and statements
        with store.db.connect() as conn:
            for sql, params in statements:
                plan = " | ".join(r[-1] for r in conn.exec_driver_sql(
                    f"EXPLAIN QUERY PLAN {sql}", params).all())
                assert "ix_task_audience_who" in plan or "sqlite_autoindex_task_audience" \
                    in plan, plan
                assert "SCAN task_audience" not in plan, plan
    finally:
        store.close()
