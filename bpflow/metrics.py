"""Prometheus metrics (SPEC §18): what `GET /metrics` answers, in the text format of
`prometheus_client`.

Counters and histograms are counted where the work happens (the API's guard for
requests, the store's committed steps, the worker's actions, timers and webhook
deliveries); the gauges of what the database holds (instances by status, open and
overdue tasks) are read from it at each scrape. No label takes a value a user supplied:
routes are the API's templates (`/api/instances/{instance_id}`), methods and action types
come from fixed lists, tenants are named by the installation's operator.

Scaled out (several backends and workers, SPEC §14), each process writes its counts to
`PROMETHEUS_MULTIPROC_DIR` (set for all of them, emptied before they start:
`bpflow.scaled`) and a scrape of any backend sums them.

`/metrics` answers a bearer `BPFLOW_METRICS_TOKEN` when one is set, else only requests
from the loopback interface.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
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
        store.on_steps(_stepped)


def _stepped(tenants: list[str], seconds: float | None) -> None:
    for tenant in tenants:
        steps.labels(tenant).inc()
    if seconds is not None:  # None: a start (its commit is timed with the request)
        commit_seconds.observe(seconds)


_answered: dict[tuple[str, str, int], tuple[Any, Any]] = {}  # a request's two series


def request(route: str, method: str, status: int, seconds: float) -> None:
    method = method if method in METHODS else "other"
    series = _answered.get((route, method, status))
    if series is None:  # once for each (route template, method, status): a bounded set
        series = _answered[route, method, status] = (
            requests.labels(route, method, str(status)), request_seconds.labels(route))
    series[0].inc()
    series[1].observe(seconds)


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
