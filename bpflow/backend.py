"""Process-wide services of the web backend: one Store, the database prepared on start,
and the in-process worker beside the requests (more workers can run with `bpflow worker`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import threading
import time
from typing import NoReturn

from bpflow import logs, metrics, tracing
from bpflow.access import Caller
from bpflow.heartbeat import lease_seconds
from bpflow.security import SecretError, load_secret
from bpflow.store import Store
from bpflow.store.public import upgrade
from bpflow.tenancy import TEMPLATES, current_frames
from bpflow.worker import start_in_thread

log = logging.getLogger("bpflow")
_store: Store | None = None
_lock = threading.Lock()
EXIT_SECRET = 2  # the exit code of a server refusing to start (as the CLI's for a secret)


def get_store() -> Store:
    global _store
    with _lock:
        if _store is None:
            _store = Store()
            metrics.watch(_store)
            tracing.watch(_store)
        return _store


def store_for(caller: Caller) -> Store:
    """The store seen from the caller's tenant: what a page reads and writes for them."""
    return get_store().of(caller.tenant)


def check_secret() -> None:
    """A server refuses to start with a secret that is too short or not private, or
    when none can be made: it says why on stderr and exits (no traceback)."""
    try:
        load_secret()
    except SecretError as exc:
        cannot_start(exc)


def cannot_start(problem: object) -> NoReturn:
    """Say on stderr why the server does not start, and exit (no traceback)."""
    print(f"bpflow: the server cannot start: {problem}", file=sys.stderr, flush=True)
    logging.shutdown()
    os._exit(EXIT_SECRET)  # from inside the server's start-up: no exception may escape


def prepare(store: Store | None = None) -> Store:
    """Migrate the schema and add the templates of upload/workflow/ whose names are
    unknown (both no-ops when up to date): a restart never replaces what an admin
    uploaded with the shipped file (SPEC §6)."""
    for attempt in range(5):  # several backend processes may start at once
        try:
            upgrade(os.environ.get("DATABASE_URL"))
            break
        except Exception:
            if attempt == 4:
                raise
            log.warning("schema upgrade raced with another process; trying again")
            time.sleep(1 + attempt)
    store = store or get_store()
    if TEMPLATES.is_dir():
        for name, version, created in store.import_dir(TEMPLATES, only_new=True):
            if created:
                log.info("imported template %s version %s", name, version)
        current_frames(store, TEMPLATES)
    return store


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


@contextlib.asynccontextmanager
async def lifespan():
    """Reflex lifespan task: check the secret, prepare the database, then run the
    in-process worker."""
    import asyncio
    logs.setup("backend")
    check_secret()
    inprocess = os.environ.get("BPFLOW_INPROCESS_WORKER", "1") != "0"
    try:
        lease = lease_seconds() if inprocess else None
    except ValueError as exc:
        cannot_start(exc)
    store = await asyncio.to_thread(prepare)
    settle_memory()
    stop = None
    if inprocess:
        _, stop = start_in_thread(store, lease=lease)
    try:
        yield
    finally:
        if stop is not None:
            stop.set()
