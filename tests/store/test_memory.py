"""What the server's garbage-collector settings rely on (`bpflow.memory.settle_memory`):
the survivors of every collection of the middle generation and of every full one are
frozen, which frees no reference cycle among them until a later walk of everything, so
the store's instances (read, stepped, cached, dropped) must form none; and the freezing
itself, and the walk of everything every WALK_ALL_S."""

from __future__ import annotations

import gc
import threading

from bpflow import memory
from bpflow.store import Store
from bpflow.store.migrate import upgrade
from tests.conftest import SECRET, run_async

WAITS = {"name": "order", "inputs": {"order": "integer"}, "circles": [
    {"uri": "paid", "box": {"action": {"type": "signal", "name": "payment",
                                       "key": "${workflow.input.order}"}}},
    {"uri": "ship", "deps": [["paid"]], "box": {"form": [{"name": "ok", "type": "boolean"}]}}]}


def test_instances_read_stepped_and_dropped_leave_no_cycles(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url)
    writer = Store(url, secret=SECRET)
    writer.put_template(WAITS)
    writer.add_user("ann", "pw-ann-123456")
    writer.add_user("gate", "pw-gate-123456", ["integration"])
    ids = [writer.start("order", {"order": i}, writer.user("ann")).id for i in range(60)]
    writer.close()
    store = Store(url, secret=SECRET)  # another process's view: nothing cached
    try:
        store.of(None)._load_many(ids[:2])  # templates read and built once
        # a server's settings (an app's lifespan in an earlier test) off while we look,
        # and the garbage of earlier tests gone
        saved = _unsettled()
        # a worker of an earlier test renews its leases on a thread that ends a lease
        # after its last one, dropping that worker's store: garbage that is not ours
        for thread in threading.enumerate():
            if thread.name.startswith("bpflow-heartbeat-"):
                thread.join(timeout=30)
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            loaded = store.of(None)._load_many(ids[:20])  # read through sqlite3
            del loaded

            async def signals():
                for order in range(20, 40):  # read, stepped, kept in the cache
                    assert await store.signal_async("payment", order, {"n": order}) == 1
            run_async(signals())
            for order in range(40, 60):
                assert store.signal("payment", order, None) == 1
            store._cache.clear()  # every cached instance dropped
            gc.collect()
            # the store's and the engine's objects (threads of other tests may drop
            # garbage of their own meanwhile)
            cycles = [o for o in gc.garbage
                      if type(o).__module__.split(".")[0] in ("bpflow", "engine")]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            _resettle(saved)
        assert cycles == [], {type(o).__name__ for o in cycles}
    finally:
        store.close()


def _unsettled():
    """The server's callback taken off (an app's lifespan in an earlier test may have
    added it), with its state, to be put back by `_resettle`."""
    settled = [c for c in gc.callbacks if c is memory._after_collection]
    for c in settled:
        gc.callbacks.remove(c)
    gc.unfreeze()
    return settled, memory._walked_at, memory._walk_all


def _resettle(saved) -> None:
    settled, memory._walked_at, memory._walk_all = saved
    while memory._after_collection in gc.callbacks:
        gc.callbacks.remove(memory._after_collection)
    gc.callbacks.extend(settled)
    gc.unfreeze()


def _frozen(objects: list) -> int:
    """How many of `objects` the collector no longer sees (frozen: in no generation)."""
    seen = {id(o) for o in gc.get_objects()}
    return sum(id(o) not in seen for o in objects)


def test_survivors_of_a_full_or_a_middle_collection_are_frozen():
    saved = _unsettled()
    gc.disable()  # only the collections made here (the callbacks still run)
    try:
        memory.settle_memory()
        kept = [[i] for i in range(10_000)]  # lists: always tracked
        gc.collect()  # a full collection: its survivors frozen afterwards
        assert _frozen(kept) == len(kept)
        more = [[i] for i in range(10_000)]
        gc.collect(1)  # the middle generation: its survivors frozen too
        assert _frozen(more) == len(more)
        young = [[i] for i in range(10_000)]
        gc.collect(0)  # the youngest: nothing frozen
        assert _frozen(young) == 0
    finally:
        gc.enable()
        _resettle(saved)


def test_everything_is_walked_again_after_walk_all_s():
    saved = _unsettled()
    gc.disable()
    try:
        memory.settle_memory()
        memory._walked_at -= memory.WALK_ALL_S + 1  # the last walk of all is due
        kept = [[i] for i in range(10_000)]
        gc.collect(1)  # everything unfrozen for the next full collection
        assert memory._walk_all and gc.get_freeze_count() == 0
        more = [[i] for i in range(10_000)]
        gc.collect(1)  # meanwhile nothing is frozen
        assert gc.get_freeze_count() == 0
        gc.collect()  # the walk of everything; its survivors frozen again afterwards
        assert not memory._walk_all
        assert _frozen(kept + more) == len(kept) + len(more)
        assert memory.time.monotonic() - memory._walked_at < 5
    finally:
        gc.enable()
        _resettle(saved)


def test_a_worker_process_settles_its_memory_as_the_server_does(monkeypatch, tmp_path):
    """`bpflow worker` keeps an instance cache as a server does: without the settings, a
    full collection walked it and paused the worker's rounds 120-190 ms (reminders late,
    bench/reminders.py)."""
    from bpflow.cli import worker as cli_worker
    from bpflow.worker import Worker
    from tests.conftest import sqlite_database
    calls = []
    monkeypatch.setattr(memory, "settle_memory", lambda: calls.append("settled"))
    monkeypatch.setattr(Worker, "run_forever",
                        lambda self, stop=None, poll=0.5: calls.append("worked"))
    monkeypatch.setenv("BPFLOW_SECRET", "a-worker-test-secret-of-32-bytes-at-least")
    assert cli_worker.run_worker(sqlite_database(tmp_path / "w.db"), False, 0.1, None) == 0
    assert calls == ["settled", "worked"]
