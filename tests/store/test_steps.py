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
