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

from bpflow.access import Caller
from bpflow.security import SecretError, load_secret
from bpflow.store import Store
from bpflow.store.migrate import upgrade
from bpflow.tenancy import TEMPLATES, current_frames
from bpflow.worker import start_in_thread

log = logging.getLogger("bpflow")
_store: Store | None = None
_lock = threading.Lock()
EXIT_SECRET = 2  # the exit code of a server refusing to start for its secret (as the CLI)


def get_store() -> Store:
    global _store
    with _lock:
        if _store is None:
            _store = Store()
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
        print(f"bpflow: the server cannot start: {exc}", file=sys.stderr, flush=True)
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


WALK_ALL_EVERY = 50  # full collections: every this many, one walks every object again


def settle_memory() -> None:
    """Once the server has started: move what is loaded so far (modules, the app, the
    templates) out of the garbage collector's sight, so a full collection walks only
    what requests keep alive and its pause stays out of the latency tail; and after
    every full collection, what survived it too (`_after_collection`). And let a thread
    waiting for the GIL (the SQLite commit thread, coming back from the disk) get it
    within 1 ms rather than Python's default 5 ms while the event loop is busy: with 5
    ms, that hand-back alone reached 4-19 ms at the 99th percentile under load."""
    gc.collect()
    gc.freeze()
    if _after_collection not in gc.callbacks:
        gc.callbacks.append(_after_collection)
    sys.setswitchinterval(0.001)


_full_collections = 0


def _after_collection(phase: str, info: dict) -> None:
    """After a full collection, move its survivors out of the collector's sight as
    `settle_memory` does at start. The instance cache holds up to ~10,000 instances (a
    few hundred thousand objects), which every full collection walked again: 40-320 ms
    pauses under a signal load. Frozen objects are still freed when no longer referenced
    (the cache's instances form no reference cycles: tests/services say so); a cycle
    among them is freed by the walk of every object that every WALK_ALL_EVERY-th full
    collection makes again (`gc.unfreeze` first)."""
    global _full_collections
    if phase != "stop" or info.get("generation") != 2:
        return
    _full_collections += 1
    if _full_collections % WALK_ALL_EVERY == WALK_ALL_EVERY - 1:
        gc.unfreeze()  # the next full collection walks everything
    else:
        gc.freeze()


@contextlib.asynccontextmanager
async def lifespan():
    """Reflex lifespan task: check the secret, prepare the database, then run the
    in-process worker."""
    import asyncio
    check_secret()
    store = await asyncio.to_thread(prepare)
    settle_memory()
    stop = None
    if os.environ.get("BPFLOW_INPROCESS_WORKER", "1") != "0":
        _, stop = start_in_thread(store)
    try:
        yield
    finally:
        if stop is not None:
            stop.set()
