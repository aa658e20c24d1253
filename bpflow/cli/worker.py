"""`bpflow worker`: a worker process beside the web backend's own (SPEC §7, §14): due
timers, retries, timeouts and HTTP actions, until SIGINT or SIGTERM (or one batch)."""

from __future__ import annotations

import argparse

from bpflow.cli.common import EXIT_OK, Subparsers, add_url, command


def register(sub: Subparsers) -> None:
    work = command(sub, "worker", _run, "run due timers, retries, timeouts and HTTP actions")
    add_url(work)
    work.add_argument("--once", action="store_true", help="one batch, then exit")
    work.add_argument("--poll", type=float, default=0.5, help="idle poll interval (s)")
    work.add_argument("--lease", type=float, default=60.0, help="lease per instance (s)")


def _run(args: argparse.Namespace) -> int:
    return run_worker(args.url, args.once, args.poll, args.lease)


def run_worker(url: str | None, once: bool, poll: float, lease: float) -> int:
    import logging
    import signal
    import threading

    from bpflow.store import Store
    from bpflow.worker import Worker
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    store = Store(url)
    worker = Worker(store, lease=lease)
    if once:
        print(f"worked on {worker.run_once()} instance(s)")
        return EXIT_OK
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    worker.run_forever(stop, poll)
    store.close()
    return EXIT_OK
