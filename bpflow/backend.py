"""Process-wide services of the web backend: one Store, the database prepared on start,
and the in-process worker beside the requests (more workers can run with `bpflow worker`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from typing import NoReturn

from bpflow import logs, metrics, tracing
from bpflow.access import Caller
from bpflow.heartbeat import lease_seconds
from bpflow.memory import settle_memory
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
