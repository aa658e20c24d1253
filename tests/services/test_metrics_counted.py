"""The work the worker does is counted (SPEC §18): HTTP actions by outcome against a real
local HTTP server, webhook deliveries to it, how late a timer was taken up, and open tasks
past their due time; read as a scrape is, with prometheus_client's own parser."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bpflow import metrics
from bpflow.store import Store
from bpflow.webhooks import Deliverer
from bpflow.worker import Worker
from tests.conftest import SECRET
from tests.services.helpers import http_flow

TIMER_S = 60
TICK = {"name": "tick", "circles": [
    {"uri": "wait", "box": {"action": {"type": "timer", "delay": TIMER_S}}},
    {"uri": "end", "deps": [["wait"]]}]}
TASK = {"name": "ask", "circles": [
    {"uri": "ask", "assign": {"users": ["root"]}, "due": 60,
     "box": {"form": [{"name": "n", "type": "integer"}]}}]}


class Clock:
    """Two hours ago, then as the test moves it: a task due a minute after it opened is
    overdue by the real time a scrape counts with."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)

    def __call__(self) -> datetime:
        return self.now


def scrape(store: Store) -> dict[tuple[str, tuple], float]:
    text, _ = metrics.exposition(store)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode())
            for s in family.samples}


def moved(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0) - before.get(key, 0)


@pytest.fixture
def counted(db_url, monkeypatch):
    monkeypatch.delenv(metrics.MULTIPROC_ENV, raising=False)  # this process's counts
    clock = Clock()
    store = Store(db_url, secret=SECRET, clock=clock)
    metrics.watch(store)
    yield store, clock
    store.on_steps(None)
    store.close()


def test_actions_deliveries_timers_and_overdue_tasks_move_their_metrics(counted, server):
    store, clock = counted
    store.add_user("root", "pw-root-0123", ["admin"])
    store.put_template(http_flow(f"{server.url}/ok"))
    store.put_template(http_flow(f"{server.url}/status/500", name="broken"))
    store.put_template(TICK)
    store.put_template(TASK)
    store.add_webhook(f"{server.url}/hook", ["instance.completed"], "s" * 20, "root")
    before = scrape(store)
    root = store.user("root")
    called = store.start("call", {"n": 1}, root).id
    broken = store.start("broken", {"n": 2}, root).id
    ticking = store.start("tick", {}, root).id
    store.start("ask", {}, root)
    worker = Worker(store)
    worker.run_once()
    assert store.get(called).status == "completed" and store.get(broken).status == "failed"
    clock.now += timedelta(seconds=TIMER_S + 30)  # taken up 30 s after it was due
    worker.run_once()
    assert store.get(ticking).status == "completed"
    # the worker's rounds may have delivered them already; on PostgreSQL the feed hands a
    # commit out once no older transaction is open (bpflow/store/feed.py): wait for both
    deliverer, deadline = Deliverer(), time.monotonic() + 20
    while server.recorder.seen("/hook") < 2 and time.monotonic() < deadline:
        deliverer.run(store.of(None))
        time.sleep(0.05)
    assert server.recorder.seen("/hook") == 2  # the call's and the timer's completions
    after = scrape(store)

    def by(name: str, **labels: str) -> float:
        return moved(before, after, name, **labels)

    assert by("bpflow_worker_actions_total", type="http", outcome="completed") == 1
    assert by("bpflow_worker_actions_total", type="http", outcome="failed") == 1
    assert by("bpflow_webhook_deliveries_total", outcome="delivered") == 2
    assert by("bpflow_webhook_deliveries_total", outcome="failed") == 0
    # every due instance taken up: the two calls at once, the timer 30 s late
    assert by("bpflow_timer_lateness_seconds_count") == 3
    assert by("bpflow_timer_lateness_seconds_sum") == pytest.approx(30, abs=1)
    assert by("bpflow_timer_lateness_seconds_bucket", le="10.0") == 2
    assert by("bpflow_timer_lateness_seconds_bucket", le="30.0") == 3
    assert after[("bpflow_tasks_overdue", (("tenant", "default"),))] == 1
    assert after[("bpflow_tasks_open", (("tenant", "default"),))] == 1
