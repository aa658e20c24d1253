"""Steps through the store: where an operation runs when it is applied from an event loop."""

from __future__ import annotations

import threading

import pytest

from engine.errors import TransitionError
from tests.conftest import run_async

PLAIN = {"name": "plain", "kind": "linear", "circles": [
    {"uri": "a", "box": {"form": [{"name": "v", "type": "integer"}]}}, {"uri": "b"}]}
GUARDED = {"name": "guarded", "circles": [
    {"uri": "a", "box": {"form": [{"name": "v", "type": "integer"}]}},
    {"uri": "b", "deps": [["a"]], "when": "${a.v} > 1"}]}


def _thread_of_step(store, name: str) -> tuple[int, int]:
    """(the event loop's thread, the thread the operation ran on) for an async step."""
    async def main():
        inst = await store.start_async(name, {}, {"id": None, "username": "ann"})
        seen = {}

        def op(engine, i):
            seen["thread"] = threading.get_ident()
            engine.complete(i, "a", engine.bookmark(i, "a"), {"v": 2})
            return i
        done = await store.apply_async(inst.id, op)
        assert done.circles["a"].state == "success"
        return threading.get_ident(), seen["thread"]
    return run_async(main())


def test_a_step_that_may_evaluate_expressions_runs_off_the_event_loop(store):
    store.put_template(GUARDED)
    loop_thread, op_thread = _thread_of_step(store, "guarded")
    assert op_thread != loop_thread
    assert store.get(store.list_instances()[0][0]["id"]).circles["b"].state == "success"


def test_a_step_without_expressions_stays_on_the_event_loop(store):
    store.put_template(PLAIN)
    loop_thread, op_thread = _thread_of_step(store, "plain")
    assert op_thread == loop_thread


def test_a_refusal_off_the_loop_is_the_same_refusal(store):
    """A bookmark refused by the engine on a thread reaches the caller as on the loop."""
    store.put_template(GUARDED)

    async def main():
        inst = await store.start_async("guarded", {}, {"id": None, "username": "ann"})
        stale = store.engine.bookmark(inst, "a")
        await store.apply_async(inst.id, lambda e, i: e.complete(i, "a", stale, {"v": 0}))
        with pytest.raises(TransitionError):
            await store.apply_async(inst.id, lambda e, i: e.complete(i, "a", stale, {"v": 5}))
    run_async(main())


def test_a_template_not_analysed_yet_is_analysed_off_the_event_loop(store, db_url):
    """The first start of a template in a process analyses it: never on the loop."""
    from bpflow.store import Store
    store.put_template(PLAIN)
    fresh = Store(db_url, secret=store.secret)  # a process that has not built it yet
    seen = []
    build = fresh._build

    def spy(row, pinned):
        seen.append(threading.get_ident())
        return build(row, pinned)
    fresh._build = spy
    try:
        async def main():
            await fresh.start_async("plain", {}, {"id": None, "username": "ann"})
            return threading.get_ident()
        loop_thread = run_async(main())
    finally:
        fresh.close()
    assert seen and loop_thread not in seen


def test_a_naive_time_is_refused_by_the_sqlite_writer_as_by_sqlalchemy():
    from datetime import datetime

    from bpflow.store.sqlite.forms import sql_time
    with pytest.raises(ValueError, match="naive"):
        sql_time(datetime(2026, 1, 1))


CHAIN = {"name": "chain", "kind": "linear", "circles": [
    {"uri": f"s{i}", "box": {"form": [{"name": "v", "type": "integer"}]}} for i in range(3)]}


def test_a_step_sets_the_status_and_due_time_only_when_it_changes_them(tmp_path):
    """SQLite rewrites the entry of every index on a column an UPDATE sets, even to the
    value it holds: a step that keeps the instance's status and due time leaves them out
    of its compare-and-set; the step that completes the instance sets them. Either way
    the row holds what the engine says, as another store reads it. (SQLite's writer
    only: PostgreSQL compares the values itself.)"""
    from bpflow.store import Store
    from tests.conftest import SECRET, sqlite_database

    db_url = sqlite_database(tmp_path / "steps.db")
    store = Store(db_url, secret=SECRET)
    store.put_template(CHAIN)
    inst = store.start("chain", {}, {"id": None, "username": "ann"})

    def step(uri: str) -> list[str]:
        """The instance row's UPDATE of the step completing `uri`, as sent to SQLite."""
        sent: list[str] = []
        for conn in store.driver._conns:
            conn.set_trace_callback(sent.append)
        store.apply(inst.id, lambda e, i: e.complete(i, uri, e.bookmark(i, uri), {"v": 1}))
        for conn in store.driver._conns:
            conn.set_trace_callback(None)
        return [s for s in sent if s.startswith("UPDATE instances")][:1]

    step("s0")  # (the writer's connection made)
    [kept] = step("s1")
    assert "status=" not in kept and "due_at=" not in kept and "lock_version=" in kept
    assert store.get(inst.id).status == "running"
    [done] = step("s2")
    assert "status='completed'" in done and "due_at=" in done
    other = Store(db_url, secret=SECRET)
    try:
        assert other.get(inst.id).status == "completed"
        assert other.get(inst.id).circles["s2"].state == "success"
    finally:
        other.close()
        store.close()
