"""The garbage collector's settings of a long-running process (a server, a `bpflow
worker`): what it loaded at start and what survives the collector's older generations are
kept out of its walks, so a full collection does not pause the process for the whole
instance cache."""

from __future__ import annotations

import gc
import sys
import time

WALK_ALL_S = 600.0  # at most this long between walks of every object (and the time to
# the next full collection after it)


def settle_memory() -> None:
    """Once the server (or a `bpflow worker`) has started: move what is loaded so far
    (modules, the app, the templates) out of the garbage collector's sight, so a full
    collection walks only what requests keep alive and its pause stays out of the
    latency tail (a worker's reminders: 120-190 ms pauses before); and after
    every full collection, what survived it too (`_after_collection`). And let a thread
    waiting for the GIL (the SQLite commit thread, coming back from the disk) get it
    within 1 ms rather than Python's default 5 ms while the event loop is busy: with 5
    ms, that hand-back alone reached 4-19 ms at the 99th percentile under load."""
    global _walked_at
    gc.collect()
    gc.freeze()
    _walked_at = time.monotonic()
    if _after_collection not in gc.callbacks:
        gc.callbacks.append(_after_collection)
    sys.setswitchinterval(0.001)


_walked_at = 0.0  # (monotonic) when a full collection last walked every object
_walk_all = False  # everything is unfrozen for the next full collection, which walks it all


def _after_collection(phase: str, info: dict) -> None:
    """After a collection of the middle generation or a full one, move its survivors
    out of the collector's sight as `settle_memory` does at start, so a full collection
    walks only what was promoted since the last such collection: next to nothing. The
    instance cache holds up to ~10,000 instances (~17 tracked objects each), which
    every full collection walked again: 30-50 ms pauses under a signal load when only a
    full collection's survivors were frozen, the largest part of the p99 at 500
    signals/s. Frozen objects are still freed when no longer referenced (the cache's
    instances form no reference cycles: tests/store/test_memory.py says so, and a
    server taking 500 signals/s made no cyclic garbage in any generation). A cycle among
    them is freed by the walk of every object that a full collection makes again at
    least every WALK_ALL_S: everything is unfrozen (`gc.unfreeze`) and stays so until
    that collection has run."""
    global _walked_at, _walk_all
    generation = info.get("generation")
    if phase != "stop" or generation == 0:
        return
    if generation == 2 and _walk_all:  # the walk of everything has run
        _walk_all, _walked_at = False, time.monotonic()
    if _walk_all:
        return
    if time.monotonic() - _walked_at >= WALK_ALL_S:
        _walk_all = True
        gc.unfreeze()  # the next full collection walks everything
        return
    gc.freeze()
