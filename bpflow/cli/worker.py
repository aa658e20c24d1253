"""`bpflow worker`: a worker process beside the web backend's own (SPEC §7, §14): due
timers, retries, timeouts and HTTP actions, until SIGINT or SIGTERM (or one batch)."""

from __future__ import annotations

import argparse

from bpflow import metrics, tracing
from bpflow.cli.common import EXIT_OK, EXIT_UNREADABLE, Subparsers, add_url, command, refuse


def register(sub: Subparsers) -> None:
    work = command(sub, "worker", _run, "run due timers, retries, timeouts and HTTP actions")
    add_url(work)
    work.add_argument("--once", action="store_true", help="one batch, then exit")
    work.add_argument("--poll", type=_seconds, default=0.5, help="idle poll interval (s)")
    work.add_argument("--lease", type=_seconds, default=None,
                      help="lease per instance (s), renewed while the worker works on it "
                           "(default: $BPFLOW_LEASE_SECONDS, else 15)")


def _seconds(text: str) -> float:
    from bpflow.heartbeat import seconds
    try:
        return seconds(text, "the value")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    return run_worker(args.url, args.once, args.poll, args.lease)


def run_worker(url: str | None, once: bool, poll: float, lease: float | None) -> int:
    import signal
    import threading

    from bpflow import logs
    from bpflow.heartbeat import lease_seconds
    from bpflow.memory import settle_memory
    from bpflow.store import Store
    from bpflow.worker import Worker
    try:
        lease = lease_seconds() if lease is None else lease
    except ValueError as exc:
        return refuse(exc, EXIT_UNREADABLE)
    logs.setup("worker")
    store = Store(url)
    metrics.watch(store)
    tracing.watch(store)
    worker = Worker(store, lease=lease)
    if once:
        print(f"worked on {worker.run_once()} instance(s)")
        return EXIT_OK
    settle_memory()  # its instance cache out of full collections' walks, as a server's
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    worker.run_forever(stop, poll)
    store.close()
    return EXIT_OK
