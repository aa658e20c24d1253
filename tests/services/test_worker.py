"""The worker: time passing (timers, timeouts) and actions run against a real local HTTP
server, exactly-once across two worker processes, and a worker killed mid-item whose work
is picked up again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from bpflow.store import Store
from bpflow.worker import Worker
from tests.conftest import SECRET
from tests.services.helpers import ROOT, drain, http_flow


def test_worker_runs_http_and_records_the_outcome(store, server):
    store.put_template(http_flow(f"{server.url}/ok", "good"))
    store.put_template(http_flow(f"{server.url}/status/500", "bad"))
    store.put_template(http_flow("http://127.0.0.1:9/refused", "refused"))
    store.put_template(http_flow(f"{server.url}/text", "text"))
    good, bad = store.start("good", {"n": 5}), store.start("bad", {"n": 1})
    refused, text = store.start("refused", {"n": 1}), store.start("text", {"n": 1})
    worker = Worker(store, name="w")
    assert worker.run_once() == 4
    done = store.get(good.id)
    assert done.status == "completed"
    assert done.circles["call"].result == {"ok": True, "echo": {"n": 5}}  # number stayed
    assert "HTTP 500" in store.get(bad.id).circles["call"].reason
    assert "failed" in store.get(refused.id).circles["call"].reason
    assert store.get(text.id).circles["call"].result == "plain answer"
    keys = server.recorder.keys()
    assert keys[f"{good.id}:call:0"] == 1
    assert worker.run_once() == 0  # nothing left due


def test_a_fresh_worker_works_on_instances_of_templates_it_has_not_read(db_url, store,
                                                                       server):
    """A worker's first batch holds instances of three templates its store has not read:
    their rows are read for it, and the whole batch is worked on."""
    ids = []
    for name in ("one", "two", "three"):
        store.put_template(http_flow(f"{server.url}/ok", name))
        ids.append(store.start(name, {"n": 1}).id)
    fresh = Store(db_url, secret=SECRET)  # no template cached
    try:
        assert Worker(fresh, name="fresh").run_once() == 3
    finally:
        fresh.close()
    assert [store.get(i).status for i in ids] == ["completed"] * 3


# The worker processes' own secret: at least 32 bytes (SPEC §13), unlike the short one the
# test stores are given. Nothing these tests check is signed across processes (a worker
# makes and uses its own bookmarks).
WORKER_SECRET = "worker-process-test-secret-0123456789"


def run_worker_process(db_url: str, *args: str, **env: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": db_url, "BPFLOW_SECRET": WORKER_SECRET, **env}
    return subprocess.Popen([sys.executable, "-m", "bpflow.cli", "worker", *args], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=20)


def test_two_worker_processes_run_each_item_exactly_once(db_url, store, server):
    store.put_template(http_flow(f"{server.url}/slow/0.02"))
    ids = [store.start("call", {"n": i}).id for i in range(40)]
    workers = [run_worker_process(db_url, "--poll", "0.05", "--lease", "30") for _ in range(2)]
    try:
        wait_until(lambda: all(store.get(i).status == "completed" for i in ids), 120,
                   "all instances to complete")
    finally:
        for w in workers:
            stop(w)
    keys = server.recorder.keys()
    assert sorted(keys) == sorted(f"{i}:call:0" for i in ids)
    assert set(keys.values()) == {1}, "some item ran twice"


def test_worker_killed_mid_item_leaves_it_to_be_picked_up_again(db_url, store, server):
    store.put_template(http_flow(f"{server.url}/slow-once/30"))
    iid = store.start("call", {"n": 1}).id
    doomed = run_worker_process(db_url, "--poll", "0.05", "--lease", "2")
    try:
        wait_until(lambda: server.recorder.seen("/slow-once/30") == 1, 60,
                   "the first worker to call the server")
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
    finally:
        stop(doomed)
    assert store.get(iid).circles["call"].state == "waiting"  # nothing recorded yet
    rescuer = Worker(Store(db_url, secret=SECRET), name="rescuer", lease=10)
    assert rescuer.run_once() == 0  # the dead worker's lease still holds
    wait_until(lambda: rescuer.run_once() == 1, 10, "the lease to expire")
    final = store.get(iid)
    assert final.status == "completed"
    # the retried call carries the same idempotency key, so a receiver can de-duplicate
    assert server.recorder.keys()[f"{iid}:call:0"] == 2
    rescuer.store.close()


def test_in_process_worker_wakes_on_new_work_without_waiting_for_its_poll(store, server):
    from bpflow.worker import start_in_thread
    store.put_template(http_flow(f"{server.url}/ok"))
    _, stop = start_in_thread(store, poll=10, name="inproc")
    try:
        time.sleep(0.3)  # the worker is idle now and would poll again only in 10 s
        iid = store.start("call", {"n": 3}).id
        began = time.monotonic()
        wait_until(lambda: store.get(iid).status == "completed", 8, "the HTTP action")
        assert time.monotonic() - began < 2
    finally:
        stop.set()


def test_timeout_policy_terminate_ends_the_instance(store):
    store.put_template({"name": "wait", "circles": [
        {"uri": "w", "box": {"form": [{"name": "x"}]},
         "timeout": {"seconds": 0.2, "policy": "TIME_OUT_WF"}}]})
    iid = store.start("wait").id
    time.sleep(0.25)
    Worker(store).run_once()
    final = store.get(iid)
    assert final.status == "terminated" and "timed out" in final.reason


def test_timer_fires_through_the_worker(store):
    store.put_template({"name": "nap", "circles": [
        {"uri": "t", "box": {"action": {"type": "timer", "delay": 0.3}}}]})
    iid = store.start("nap").id
    worker = Worker(store)
    worker.run_once()
    assert store.get(iid).status == "running"
    drain(worker, lambda: store.get(iid).status == "completed")
    result = store.get(iid).circles["t"].result
    assert result["fired_at"] >= result["due_at"]


def test_duties_that_can_wait_step_aside_while_instances_fall_due(store, monkeypatch):
    """While due instances keep the worker busy (`pressed`), expiry and the durations'
    fold run at most once a DUTY_EVERY and the fold takes a short chunk; once the worker
    is idle they run every round and the fold catches up."""
    import bpflow.worker as worker_module
    from bpflow import operations
    monkeypatch.setattr(worker_module, "DUTY_EVERY", 0.2)
    monkeypatch.setattr(operations, "FOLD_PRESSED", 3)
    store.put_template({"name": "form", "circles": [
        {"uri": "a", "box": {"form": [{"name": "x"}]}}]})
    for _ in range(10):  # more history than two short folds read
        store.start("form")
    # PostgreSQL: history is read below the oldest transaction still open in the cluster
    # (feed.PG_XMIN), which another test's database may hold back for a moment
    deadline = time.monotonic() + 20
    while len(store.feed(limit=3)[0]) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = Worker(store)
    calls: list[bool] = []

    def duty(w: Worker) -> int:
        calls.append(w.pressed)
        return 0
    worker.duties.append(duty)
    worker.waiting.add(duty)
    folded: list[int] = []

    def fold(w: Worker) -> int:
        folded.append(operations.fold_waits(w))
        return folded[-1]
    worker.duties[worker.duties.index(operations.fold_waits)] = fold
    worker.waiting.add(fold)
    worker.run_duties(pressed=True)
    worker.run_duties(pressed=True)  # within DUTY_EVERY: neither runs again
    assert calls == [True] and folded == [3]
    time.sleep(0.25)
    worker.run_duties(pressed=True)
    assert calls == [True, True] and folded == [3, 3]
    worker.run_duties(pressed=False)  # idle: every round, the whole backlog
    worker.run_duties(pressed=False)
    assert calls == [True, True, False, False]
    assert folded[2] > 3 and folded[3] == 0


def test_a_busy_round_presses_the_duties_of_the_rounds_after_it(store, monkeypatch):
    import bpflow.worker as worker_module
    monkeypatch.setattr(worker_module, "DUTY_EVERY", 0.5)
    store.put_template({"name": "nap", "circles": [
        {"uri": "t", "box": {"action": {"type": "timer", "delay": 0.05}}}]})
    worker, seen = Worker(store), []
    worker.duties = [lambda w: seen.append(w.pressed) or 0]
    store.start("nap")
    stop_ = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop_, 0.02))
    thread.start()
    try:
        wait_until(lambda: len(seen) >= 3 and seen[-1] is True, 5, "a pressed round")
        wait_until(lambda: seen[-1] is False, 5, "the rounds after DUTY_EVERY idle")
    finally:
        stop_.set()
        thread.join(5)
