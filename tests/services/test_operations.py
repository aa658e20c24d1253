"""Bulk operations (SPEC §18) on a real store: matched by a filter or by id, applied by
the worker's duty through the moves' services, a result per instance, never twice."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from bpflow import operations
from bpflow.access import Caller
from bpflow.errors import Forbidden, NotFound
from bpflow.store import Store
from bpflow.worker import Worker
from tests.conftest import settled
from tests.services.helpers import FAILING, failed, retried_exactly_once
from tests.services.test_worker import run_worker_process, stop, wait_until


@pytest.fixture
def admin(store: Store) -> Caller:
    store.add_user("root", "pw-root-123456", ["admin"])
    return Caller.of(store.user("root"))


def run(store: Store, op_id: str, rounds: int = 50) -> dict:
    worker = Worker(store, name="w")
    for _ in range(rounds):
        worker.run_duties()
        if store.operation(op_id)["finished_at"] is not None:
            break
    return store.operation(op_id)


def resets(store: Store, iid: str) -> int:
    return len(store.history(iid, ["circle_reset"]))


def test_bulk_retry_resets_each_failed_circle_once_with_a_result_each(store, admin):
    store.put_template(FAILING)
    ids = failed(store, 5)
    running = store.start("claim", {}).id
    started = operations.start(store, admin, "retry", {"status": "failed"})
    assert started["matched"] == 5
    op = run(store, started["operation"])
    assert (op["done"], op["refused"]) == (5, 0)
    for iid in ids:
        assert store.get(iid).circles["a"].state == "waiting"
        assert resets(store, iid) == 1
    assert resets(store, running) == 0
    seen = operations.progress(store, admin, started["operation"])
    assert seen["finished"] and seen["pending"] == 0
    assert sorted(i["instance"] for i in seen["items"]) == sorted(ids)
    kinds = [e["kind"] for e in store.audit_entries()]
    assert kinds[-2:] == ["operation_started", "operation_finished"]


def test_a_move_applied_before_a_crash_is_not_applied_again(store, admin):
    store.put_template(FAILING)
    ids = failed(store, 3)
    started = operations.start(store, admin, "retry", None, ids)
    op = store.operation(started["operation"])
    # the worker moved the first instance, then died before writing its result
    assert operations._apply(store, admin, op, ids[0])[1] == "done"
    op = run(store, started["operation"])
    assert (op["done"], op["refused"]) == (3, 0)
    assert [resets(store, iid) for iid in ids] == [1, 1, 1]


def test_an_instance_the_move_does_not_fit_is_refused_with_the_reason(store, admin):
    store.put_template(FAILING)
    (broken,) = failed(store, 1)
    fine = store.start("claim", {}).id
    started = operations.start(store, admin, "retry", None, [broken, fine])
    op = run(store, started["operation"])
    assert (op["done"], op["refused"]) == (1, 1)
    items = {i["instance"]: i for i in operations.progress(
        store, admin, started["operation"])["items"]}
    assert items[fine]["state"] == "refused" and "no failed circle" in items[fine]["reason"]


def test_suspend_and_resume_many_through_the_flow_moves(store, admin):
    store.put_template(FAILING)
    ids = [store.start("claim", {}).id for _ in range(3)]
    op = run(store, operations.start(store, admin, "suspend", {"template": "claim"})
             ["operation"])
    assert op["done"] == 3 and {store.get(i).status for i in ids} == {"suspended"}
    op = run(store, operations.start(store, admin, "resume", None, ids)["operation"])
    assert op["done"] == 3 and {store.get(i).status for i in ids} == {"running"}


def test_bulk_migrate_moves_through_the_migration_and_its_dry_run(store, admin):
    store.put_template(FAILING)
    ids = [store.start("claim", {}).id for _ in range(2)]
    store.put_template({**FAILING, "circles": FAILING["circles"][:1] + [
        {"uri": "c", "box": {"form": [{"name": "v", "type": "integer"}]}}]})
    params = {"template": "claim", "from": 1, "to": 2, "map": {"b": "c"}}
    dry = run(store, operations.start(store, admin, "migrate", {}, None,
                                      {**params, "dry_run": True})["operation"])
    assert dry["done"] == 2 and {store.get(i).version for i in ids} == {1}
    op = run(store, operations.start(store, admin, "migrate", {}, None, params)["operation"])
    assert op["done"] == 2 and {store.get(i).version for i in ids} == {2}


def test_only_admins_of_the_tenant_start_or_read_operations(store, admin):
    store.put_template(FAILING)
    store.add_user("bob", "pw-bob-1234567", ["user"])
    bob = Caller.of(store.user("bob"))
    with pytest.raises(Forbidden):
        operations.start(store, bob, "abort", {"template": "claim"})
    op_id = operations.start(store, admin, "abort", {"template": "claim"})["operation"]
    with pytest.raises(Forbidden):
        operations.progress(store, bob, op_id)
    store.add_tenant("other")
    other = store.of("other")
    other.add_user("admin2", "pw-admin2-12345", ["admin"])
    with pytest.raises(NotFound):
        operations.progress(other, Caller.of(other.user("admin2")), op_id)


def test_incidents_group_failed_circles_by_template_circle_and_reason(store, admin):
    store.put_template(FAILING)
    five = failed(store, 5, "HTTP 503")
    two = failed(store, 2, "timeout")
    groups = store.incidents(shown=3)
    assert [(g["template"], g["circle"], g["reason"], g["count"]) for g in groups] == [
        ("claim", "a", "HTTP 503", 5), ("claim", "a", "timeout", 2)]
    assert set(groups[0]["instances"]) <= set(five) and len(groups[0]["instances"]) == 3
    assert sorted(groups[1]["instances"]) == sorted(two)
    rows, total = store.operation_instances({"circle": "a", "reason": "timeout"})
    assert total == 2 and {r["id"] for r in rows} == set(two)


def test_the_triggers_know_the_statuses_the_reads_call_open():
    """Migration 0023's triggers write the statuses not over as SQL of their own (a
    migration stays as written): they must say what the store's reads say."""
    import importlib
    import re

    from bpflow.store.operations import OPEN
    migration = importlib.import_module(
        "bpflow.store.migrations.versions.0023_failed_circles")
    assert set(re.findall(r"'(\w+)'", migration.OPEN)) == set(OPEN)


def test_incidents_follow_each_write_of_a_circle_or_an_instance(db_url, store, admin):
    """The failed circles' rows the incident groups are counted from (migration 0023's
    triggers) follow every write: a failed circle is an incident, still when its
    instance is suspended; retried, aborted or deleted it is none; reasons longer than
    the indexed key are grouped and listed by the whole of them; an upgrade finds the
    same rows the triggers wrote."""
    from alembic import command
    from sqlalchemy import delete

    from bpflow.moves import flow
    from bpflow.store.migrate import alembic_config, upgrade
    from bpflow.store.tables import REASON_KEY, failed_circles_t, instances_t

    store.put_template(FAILING)
    first, second = "x" * REASON_KEY + " first", "x" * REASON_KEY + " second"
    ones, twos, short = failed(store, 4, first), failed(store, 2, second), failed(store, 1)

    def seen() -> list[tuple]:
        return [(g["reason"], g["count"], g["instances"]) for g in store.incidents()]

    def newest(ids: list[str]) -> list[str]:
        return sorted(ids, key=lambda i: (store.get(i).created_at, i), reverse=True)

    assert seen() == [(first, 4, newest(ones)), (second, 2, newest(twos)),
                      ("HTTP 503", 1, short)]
    flow.control(store, admin, ones[0], "suspend")
    flow.retry(store, admin, ones[1])
    flow.control(store, admin, ones[2], "abort")
    with store.db.begin() as conn:
        conn.execute(delete(instances_t).where(instances_t.c.id == short[0]))
    assert seen() == [(first, 2, newest([ones[0], ones[3]])), (second, 2, newest(twos))]
    # the list by circle and reason: every instance with that failed circle, over or not
    rows, total = store.operation_instances({"circle": "a", "reason": first})
    assert total == 3 and {r["id"] for r in rows} == {ones[0], ones[2], ones[3]}
    assert store.operation_instances({"reason": first[:REASON_KEY]})[1] == 0
    assert store.operation_instances({"template": "claim", "reason": second})[1] == 2

    def rows_now() -> list[tuple]:
        with store.reader() as conn:
            return sorted(tuple(r) for r in conn.execute(select(failed_circles_t)))
    before = rows_now()
    assert len(before) == 5 and sum(r[-1] for r in before) == 4  # ones[2]: aborted
    store.db.dispose()
    command.downgrade(alembic_config(db_url), "0022")
    upgrade(db_url)
    assert rows_now() == before


def test_the_operations_reads_are_index_searches(tmp_path):
    """At any size: the incident groups are counted from `ix_failed_circles_incidents`
    alone and each group's newest are its top; the list by failed circle and reason is
    the top of `ix_failed_circles_list` (no sort of them all); the overdue tasks are the
    top of `ix_circle_states_overdue`."""
    from sqlalchemy import event

    from bpflow.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'plan.db'}"
    upgrade(url)  # the migrations' indexes, as a user's database has them
    store = Store(url, secret=b"s" * 32)
    try:
        store.put_template(FAILING)
        failed(store, 2)
        failed(store, 1, "timeout")
        statements: list[tuple[str, object]] = []

        def record(conn, cursor, statement, parameters, context, executemany):
            if statement.lstrip().upper().startswith("SELECT"):
                statements.append((statement, parameters))

        event.listen(store.db, "before_cursor_execute", record)
        store.incidents()
        store.operation_instances({"template": "claim", "circle": "a", "reason": "HTTP 503"})
        store.overdue_tasks()
        event.remove(store.db, "before_cursor_execute", record)
        with store.db.connect() as conn:
            plans = [" | ".join(row[-1] for row in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {sql}", params).all()) for sql, params in statements]
        groups, tops, page, count, overdue, overdue_count = plans
        assert groups == ("SEARCH failed_circles USING COVERING INDEX "
                          "ix_failed_circles_incidents (tenant=? AND active=?)"), groups
        assert tops.count("SEARCH failed_circles USING COVERING INDEX "
                          "ix_failed_circles_incidents (tenant=? AND active=? AND template=? "
                          "AND circle=? AND reason_key=?)") == 2, tops
        walk = ("SEARCH failed_circles USING COVERING INDEX ix_failed_circles_list (tenant=? "
                "AND circle=? AND reason_key=?)")
        for plan in (page, count):  # the failed circles in order, each its instance's key
            assert walk in plan and plan.index(walk) < plan.index("SEARCH instances"), plan
        for plan in (tops, page, overdue, overdue_count):
            assert "TEMP B-TREE" not in plan, plan
        for plan in (overdue, overdue_count):
            assert "ix_circle_states_overdue" in plan, plan
    finally:
        store.close()


def test_filters_by_starter_status_and_waiting_time(store, admin):
    store.put_template(FAILING)
    mine = store.start("claim", {}, admin.as_user()).id
    store.start("claim", {})
    rows, total = store.operation_instances({"starter": "root", "status": "running"})
    assert [r["id"] for r in rows] == [mine] and total == 1
    assert store.operation_instances({"waiting_hours": 1})[1] == 0
    assert store.operation_instances({"waiting_hours": 0})[1] == 2


def test_a_bulk_retry_of_1000_survives_its_worker_killed_midway(db_url, store, admin):
    """The acceptance of SPEC §18: the worker applying a bulk retry of 1,000 failed
    instances is killed (SIGKILL) midway and another started: every instance is retried
    exactly once, the operation finishes with a result for each."""
    store.put_template(FAILING)
    ids = failed(store, 1000)
    op_id = operations.start(store, admin, "retry", {"status": "failed"})["operation"]
    doomed = run_worker_process(db_url, "--poll", "0.05", "--lease", "1")
    try:
        wait_until(lambda: store.operation(op_id)["done"] >= 150, 60, "the retry to begin")
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
    finally:
        stop(doomed)
    assert store.operation(op_id)["finished_at"] is None  # stopped midway
    rescuer = run_worker_process(db_url, "--poll", "0.05", "--lease", "1")
    try:
        wait_until(lambda: store.operation(op_id)["finished_at"] is not None, 60,
                   "the operation to finish")
    finally:
        stop(rescuer)
    retried_exactly_once(store, op_id, ids)


def test_durations_are_folded_from_the_history_once(db_url):
    now = [datetime(2026, 3, 1, 9, tzinfo=UTC)]
    s = Store(db_url, secret=b"durations-test-secret-0123456789", clock=lambda: now[0])
    try:
        s.put_template(FAILING)
        for minutes in range(1, 11):  # `a` waits 1..10 minutes, `b` one
            inst = s.start("claim", {})
            now[0] += timedelta(minutes=minutes)
            inst = s.complete(inst.id, "a", s.engine.bookmark(inst, "a"), {"v": 1})
            now[0] += timedelta(minutes=1)
            s.complete(inst.id, "b", s.engine.bookmark(inst, "b"), {"v": 1})
        s.start("claim", {})  # waiting: no round ended
        # on PostgreSQL the history is read as the event feed reads it, up to the oldest
        # transaction still open anywhere (other tests' too): fold until all is seen
        def folded():
            while s.fold_waits(limit=7):
                pass
            return s.durations("claim")
        got = settled(folded, lambda got: got["instances"]["count"] == 10)
        a, b, whole = got["circles"]["a"], got["circles"]["b"], got["instances"]
        assert (a["count"], a["max"]) == (10, 600.0)
        assert 300 / 1.1 <= a["p50"] <= 300 and 600 / 1.1 <= a["p95"] <= 600
        assert (b["count"], b["p50"], b["max"]) == (10, 60.0, 60.0)
        assert (whole["count"], whole["max"]) == (10, 660.0)
        s.fold_waits()
        assert s.durations("claim") == got  # folded once
        assert s.durations("claim", version=2)["circles"] == {}
        assert s.durations("claim", since=now[0] + timedelta(days=1))["instances"][
            "count"] == 0
    finally:
        s.close()
