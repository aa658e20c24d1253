"""Prometheus metrics (SPEC §18): what `GET /metrics` answers, in the text format of
`prometheus_client`.

Counters and histograms are counted where the work happens (the API's guard for
requests, the store's committed steps, the worker's actions, timers and webhook
deliveries); the gauges of what the database holds (instances by status, open and
overdue tasks) are read from it at each scrape. No label takes a value a user supplied:
routes are the API's templates (`/api/instances/{instance_id}`), methods and action types
come from fixed lists, tenants are named by the installation's operator.

A request and a step, the hot paths, only append what they count to a queue of the
process (`_requests`, `_steps`: `deque.append`, safe from any thread and ~0.1 µs, where
prometheus_client's locked objects took ~6 µs a request); `fold` moves the queue into
prometheus_client's objects, a route's or a tenant's numbers at once: at each scrape of
this process, and every `FOLD_SECONDS` in a thread of its own (`start`; at exit too), so
the other processes' counts reach a scrape within that time.

Scaled out (several backends and workers, SPEC §14), each process writes its counts to
`PROMETHEUS_MULTIPROC_DIR` (set for all of them, emptied before they start:
`bpflow.scaled`) and a scrape of any backend sums them.

`/metrics` answers a bearer `BPFLOW_METRICS_TOKEN` when one is set, else only requests
from the loopback interface.
"""

from __future__ import annotations

import atexit
import bisect
import hmac
import ipaddress
import os
import threading
import time
from collections import Counter as Tally
from collections import defaultdict, deque
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from bpflow.store import Store
from engine.kinds import WORKER_RUN
from engine.runtime import utcnow

TOKEN_ENV = "BPFLOW_METRICS_TOKEN"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
ACTION_TYPES = frozenset(WORKER_RUN)
UNMATCHED = "unmatched"  # a request no route took (404, or refused by the guard first)
OUTCOMES = ("completed", "failed", "pending")
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
LATENESS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900)
FOLD_SECONDS = 1.0  # the most a count waits in its queue before a scrape of another process

REGISTRY = CollectorRegistry(auto_describe=True)  # bpflow's own (not the process's default)
requests = Counter("bpflow_http_requests", "HTTP requests answered under /api",
                   ["route", "method", "status"], registry=REGISTRY)
request_seconds = Histogram("bpflow_http_request_duration_seconds",
                            "Seconds to answer an HTTP request under /api", ["route"],
                            buckets=SECONDS, registry=REGISTRY)
steps = Counter("bpflow_steps", "Steps committed (an instance's atomic change)", ["tenant"],
                registry=REGISTRY)
timer_lateness = Histogram("bpflow_timer_lateness_seconds",
                           "Seconds after its due time a due instance was taken up",
                           buckets=LATENESS, registry=REGISTRY)
worker_actions = Counter("bpflow_worker_actions", "Actions the workers ran, by outcome",
                         ["type", "outcome"], registry=REGISTRY)
webhook_deliveries = Counter("bpflow_webhook_deliveries", "Webhook delivery attempts",
                             ["outcome"], registry=REGISTRY)
commit_seconds = Histogram("bpflow_db_commit_duration_seconds",
                           "Seconds a step's commit took", buckets=SECONDS,
                           registry=REGISTRY)

for _kind in sorted(ACTION_TYPES):  # every series from the start, at 0 (alerts see a rate)
    for _outcome in OUTCOMES:
        worker_actions.labels(_kind, _outcome)
for _outcome in ("delivered", "failed"):
    webhook_deliveries.labels(_outcome)
steps.labels("default")


def enabled() -> bool:
    """Metrics are counted unless `BPFLOW_METRICS=0` (the bench compares both)."""
    return os.environ.get("BPFLOW_METRICS", "1") != "0"


def watch(store: Store) -> None:
    """Count the steps `store` commits and the time their commits take."""
    if enabled():
        start()
        store.on_steps(_stepped)


# what the hot paths counted since the last fold: (route, method, status, seconds) and
# (tenants, seconds | None)
_requests: deque[tuple[str, str, int, float]] = deque()
_steps: deque[tuple[list[str], float | None]] = deque()
_folding = threading.Lock()
_folder: list[int] = []  # the pid whose folding thread runs (`start`)


def _stepped(tenants: list[str], seconds: float | None) -> None:
    _steps.append((tenants, seconds))  # seconds None: a start, timed with its request


def request(route: str, method: str, status: int, seconds: float) -> None:
    _requests.append((route, method, status, seconds))


def start() -> None:
    """Fold the queues every `FOLD_SECONDS` in a thread of this process (once a process),
    and at its exit."""
    with _folding:
        if _folder == [os.getpid()]:
            return
        _folder[:] = [os.getpid()]
    threading.Thread(target=_fold_every, args=(os.getpid(),), name="bpflow-metrics",
                     daemon=True).start()
    atexit.register(fold)


def _forked() -> None:
    """In a child forked from a process that folded: its own thread (the parent's did
    not come with it)."""
    if _folder:
        _folder.clear()
        start()


os.register_at_fork(after_in_child=_forked)


def _fold_every(pid: int) -> None:
    while _folder == [pid]:
        time.sleep(FOLD_SECONDS)
        fold()


def fold() -> None:
    """Move what the hot paths counted into prometheus_client's objects: a series' count
    and a histogram's buckets added once for all its observations."""
    with _folding:
        asked: Tally[tuple[str, str, int]] = Tally()
        timed: dict[str, list[float]] = defaultdict(list)
        for _ in range(len(_requests)):
            route, method, status, seconds = _requests.popleft()
            asked[route, method if method in METHODS else "other", status] += 1
            timed[route].append(seconds)
        stepped: Tally[str] = Tally()
        commits: list[float] = []
        for _ in range(len(_steps)):
            tenants, commit = _steps.popleft()
            stepped.update(tenants)
            if commit is not None:
                commits.append(commit)
        for (route, method, status), n in asked.items():
            requests.labels(route, method, str(status)).inc(n)
        for route, values in timed.items():
            _observe(request_seconds.labels(route), SECONDS, values)
        for tenant, n in stepped.items():
            steps.labels(tenant).inc(n)
        _observe(commit_seconds, SECONDS, commits)


def _observe(histogram: Any, bounds: tuple[float, ...], values: list[float]) -> None:
    """`histogram.observe(v)` for each of `values`, its buckets and sum added once
    (prometheus_client's own fields, checked against `observe` by a test)."""
    if not values:
        return
    buckets, total = getattr(histogram, "_buckets", None), getattr(histogram, "_sum", None)
    if buckets is None or total is None or len(buckets) != len(bounds) + 1:
        for value in values:  # another prometheus_client: one at a time
            histogram.observe(value)
        return
    counts = Tally(bisect.bisect_left(bounds, v) for v in values)  # v <= bound: its bucket
    for index, n in counts.items():
        buckets[index].inc(n)
    total.inc(sum(values))


def action(kind: str, outcome: str) -> None:
    worker_actions.labels(kind if kind in ACTION_TYPES else "other", outcome).inc()


def delivery(outcome: str) -> None:
    webhook_deliveries.labels(outcome).inc()


def late(seconds: float) -> None:
    timer_lateness.observe(max(seconds, 0.0))


class Database(Collector):
    """The gauges read from the database at each scrape (every tenant's)."""

    def __init__(self, store: Store):
        self.store = store

    def collect(self) -> Iterator[Any]:
        seen = self.store.of(None).observed(utcnow())
        instances = GaugeMetricFamily("bpflow_instances", "Instances by status",
                                      labels=["tenant", "status"])
        for tenant, status, n in seen["instances"]:
            instances.add_metric([tenant, status], n)
        yield instances
        for name, what in (("tasks_open", "Open tasks"),
                           ("tasks_overdue", "Open tasks past their due time")):
            family = GaugeMetricFamily(f"bpflow_{name}", what, labels=["tenant"])
            for tenant, n in seen[name]:
                family.add_metric([tenant], n)
            yield family


def exposition(store: Store) -> tuple[bytes, str]:
    """The text of a scrape and its content type: this process's counts (every
    process's in multi-process mode) and the database's gauges."""
    fold()
    registry = CollectorRegistry()
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(registry)
    else:
        registry.register(_Own())
    registry.register(Database(store))
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Own(Collector):
    def collect(self) -> Iterator[Any]:
        yield from REGISTRY.collect()


def allowed(authorization: str | None, client: str | None) -> bool:
    """Whether a scrape may read: the bearer metrics token when one is set, else a
    client on the loopback interface."""
    token = os.environ.get(TOKEN_ENV, "")
    if token:
        given = (authorization or "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), token.encode())
    try:
        return client is not None and ipaddress.ip_address(client).is_loopback
    except ValueError:
        return False
