"""The hot paths' queues folded into prometheus_client's objects (bpflow.metrics.fold):
the same figures as counting each request and step on its own."""

from __future__ import annotations

import os
import random
import subprocess
import sys

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bpflow import metrics


def figures(registry) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples if not s.name.endswith("_created")}


def test_a_histogram_folded_at_once_equals_one_observed_value_by_value():
    values = [random.uniform(0, 12) for _ in range(500)] + [0.0, 0.005, 0.01, 10, 10.5]
    values += list(metrics.SECONDS)  # on each bound: its own bucket (v <= bound)
    one, folded = CollectorRegistry(), CollectorRegistry()
    by_one = Histogram("h", "h", buckets=metrics.SECONDS, registry=one)
    at_once = Histogram("h", "h", buckets=metrics.SECONDS, registry=folded)
    for v in values:
        by_one.observe(v)
    metrics._observe(at_once, metrics.SECONDS, values)
    a, b = figures(one), figures(folded)
    assert a.keys() == b.keys() and len(a) == len(metrics.SECONDS) + 3  # buckets, count, sum
    for key, value in a.items():
        assert abs(b[key] - value) < 1e-6, key


def series(name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return figures(metrics.REGISTRY).get(key, 0.0)


def test_requests_and_steps_are_counted_once_folded_and_not_before(monkeypatch):
    route = "/api/test-fold/{x}"
    asked = ("bpflow_http_requests_total", )
    before = series(*asked, route=route, method="POST", status="201")
    steps = series("bpflow_steps_total", tenant="fold-tenant")
    commits = series("bpflow_db_commit_duration_seconds_count")
    for _ in range(7):
        metrics.request(route, "POST", 201, 0.002)
    metrics.request(route, "BREW", 418, 0.3)  # a method of no list: "other"
    metrics._stepped(["fold-tenant", "fold-tenant"], 0.0004)
    metrics._stepped(["fold-tenant"], None)  # a start: no commit time of its own
    metrics.fold()
    assert series(*asked, route=route, method="POST", status="201") - before == 7
    assert series(*asked, route=route, method="other", status="418") == 1
    assert series("bpflow_http_request_duration_seconds_bucket", route=route,
                  le="0.005") >= 7
    assert series("bpflow_http_request_duration_seconds_count", route=route) >= 8
    assert series("bpflow_steps_total", tenant="fold-tenant") - steps == 3
    assert series("bpflow_db_commit_duration_seconds_count") - commits == 1
    metrics.fold()  # nothing left to fold: nothing counted twice
    assert series("bpflow_steps_total", tenant="fold-tenant") - steps == 3


def test_a_process_that_counts_folds_by_itself_within_the_fold_interval(tmp_path):
    """A process never scraped (a worker scaled out) still reaches the shared folder."""
    code = (
        "import time\n"
        "from bpflow import metrics\n"
        "metrics.start()\n"
        "metrics.request('/api/x', 'GET', 200, 0.001)\n"
        "time.sleep(metrics.FOLD_SECONDS * 3)\n"
        "import glob, os\n"
        "from prometheus_client import CollectorRegistry, generate_latest\n"
        "from prometheus_client.multiprocess import MultiProcessCollector\n"
        "r = CollectorRegistry(); MultiProcessCollector(r)\n"
        "print(generate_latest(r).decode())\n"
        "os._exit(0)\n")  # no exit handler: the thread folded it
    env = {**os.environ, metrics.MULTIPROC_ENV: str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert 'bpflow_http_requests_total{method="GET",route="/api/x",status="200"} 1.0' in out
