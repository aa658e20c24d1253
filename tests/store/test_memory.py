"""What the server's garbage-collector settings rely on (`bpflow.backend.settle_memory`):
the survivors of every full collection are frozen, which frees no reference cycle among
them until a later walk of everything, so the store's instances (read, stepped, cached,
dropped) must form none; and the freezing itself."""

from __future__ import annotations

import gc

from bpflow import backend
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
        settled = [c for c in gc.callbacks if c is backend._after_collection]
        for c in settled:
            gc.callbacks.remove(c)
        gc.unfreeze()
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
            gc.callbacks.extend(settled)
        assert cycles == [], {type(o).__name__ for o in cycles}
    finally:
        store.close()


def test_survivors_of_a_full_collection_are_frozen():
    settled = [c for c in gc.callbacks if c is backend._after_collection]
    for c in settled:
        gc.callbacks.remove(c)
    gc.unfreeze()
    counted = backend._full_collections
    backend._full_collections = 0  # far from the full collection that unfreezes
    try:
        backend.settle_memory()
        frozen = gc.get_freeze_count()
        kept = [[i] for i in range(10_000)]  # lists: always tracked
        gc.collect()  # a full collection: its survivors frozen afterwards
        assert gc.get_freeze_count() >= frozen + len(kept)
    finally:
        gc.callbacks.remove(backend._after_collection)
        gc.callbacks.extend(settled)
        backend._full_collections = counted
        gc.unfreeze()
