"""A worker's heartbeat: its leases are renewed while it works (a slow HTTP call keeps its
instance past the lease's length), a lease taken by another worker is noticed, and the
result of an action whose lease was lost is left to the new holder, which sends the action
again with the same Idempotency-Key and records it once. And the lease's setting, which
stops the worker and the server when it is not a duration."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from sqlalchemy import update

from bpflow.cli import main
from bpflow.heartbeat import DEFAULT_LEASE_S, LEASE_ENV, Heartbeat, lease_seconds
from bpflow.store import Store
from bpflow.store.tables import instances_t
from bpflow.worker import Worker
from tests.services.helpers import http_flow
from tests.services.test_security import start_backend
from tests.services.test_worker import WORKER_SECRET, wait_until


def lease_of(store: Store, iid: str) -> tuple[str | None, object]:
    with store.reader() as conn:
        row = conn.execute(instances_t.select().where(instances_t.c.id == iid)).one()
    return row.lease_owner, row.lease_until


def taken_over(store: Store, iid: str, owner: str) -> None:
    """What another worker's claim of an expired lease does to the row (its lease is
    left expired here, so that worker's next round may claim it for real)."""
    with store.db.begin() as conn:
        conn.execute(update(instances_t).where(instances_t.c.id == iid).values(
            lease_owner=owner, lease_until=store.clock() - timedelta(seconds=1)))


def test_a_slow_action_keeps_its_lease_past_the_lease_length(store, server):
    store.put_template(http_flow(f"{server.url}/slow/2.2"))
    iid = store.start("call", {"n": 1}).id
    holder, other = Worker(store, name="holder", lease=1.0), Worker(store, name="other",
                                                                    lease=1.0)
    working = threading.Thread(target=holder.run_once)
    working.start()
    try:
        wait_until(lambda: server.recorder.seen("/slow/2.2") == 1, 10, "the call")
        first_until = lease_of(store, iid)[1]  # the lease as claimed, a second long
        wait_until(lambda: store.clock() > first_until + timedelta(seconds=0.4), 5,
                   "the first lease to be over")
        assert other.run_once() == 0  # renewed: still the holder's
        owner, until = lease_of(store, iid)
        assert owner == "holder" and until > store.clock()
    finally:
        working.join(10)
    assert store.get(iid).status == "completed"
    assert server.recorder.keys() == {f"{iid}:call:0": 1}  # sent once
    assert lease_of(store, iid) == (None, None)  # released


def test_a_lease_taken_by_another_worker_is_found_lost(store):
    store.put_template(http_flow("http://127.0.0.1:9/never"))
    iid = store.start("call", {"n": 1}).id
    (claimed,) = store.claim_due("mine", 10, 0.6)
    beat = Heartbeat(store, "mine", 0.6)
    beat.hold([claimed])
    try:
        wait_until(lambda: lease_of(store, iid)[1] > store.clock() + timedelta(seconds=0.45),
                   5, "a renewal")
        assert not beat.lost(iid)
        taken_over(store, iid, "theirs")
        wait_until(lambda: beat.lost(iid), 5, "the heartbeat to find the lease lost")
        assert lease_of(store, iid)[0] == "theirs"  # not renewed for the loser
    finally:
        beat.drop([claimed])
    assert not beat.lost(iid)


def test_a_result_whose_lease_was_lost_is_left_to_the_new_holder(store, server, caplog):
    store.put_template(http_flow(f"{server.url}/slow-once/1.5"))
    iid = store.start("call", {"n": 1}).id
    first, second = Worker(store, name="first", lease=0.6), Worker(store, name="second",
                                                                   lease=5)
    working = threading.Thread(target=first.run_once)
    caplog.set_level(logging.WARNING, "bpflow.worker")
    working.start()
    try:
        wait_until(lambda: server.recorder.seen("/slow-once/1.5") == 1, 10, "the first call")
        taken_over(store, iid, "second")  # the first worker stalled past its lease
        wait_until(lambda: first.heartbeat.lost(iid), 5, "the loss to be noticed")
        assert second.run_once() == 1  # sends the action again, records its result
    finally:
        working.join(10)
    assert server.recorder.keys() == {f"{iid}:call:0": 2}  # the same key both times
    history = store.history(iid)
    assert [e["kind"] for e in history if e.get("circle") == "call"].count(
        "circle_succeeded") == 1
    assert store.get(iid).status == "completed"
    assert any("the lease was lost while the action ran" in r.getMessage()
               for r in caplog.records)


def test_the_lease_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(LEASE_ENV, raising=False)
    assert lease_seconds() == DEFAULT_LEASE_S == 15
    monkeypatch.setenv(LEASE_ENV, "4.5")
    assert lease_seconds() == 4.5
    for bad in ("0", "-3", "soon", "nan", "inf"):
        monkeypatch.setenv(LEASE_ENV, bad)
        with pytest.raises(ValueError, match=f"{LEASE_ENV} must be a positive number"):
            lease_seconds()


def test_a_lease_that_is_not_a_duration_stops_the_worker_with_a_message(tmp_path, monkeypatch,
                                                                        capsys):
    url = f"sqlite:///{tmp_path / 'never.db'}"
    monkeypatch.setenv("BPFLOW_SECRET", WORKER_SECRET)
    monkeypatch.setenv(LEASE_ENV, "soon")
    assert main(["worker", "--once", "--url", url]) == 2
    assert capsys.readouterr().err == \
        f"bpflow: {LEASE_ENV} must be a positive number of seconds, not 'soon'\n"
    with pytest.raises(SystemExit) as refused:
        main(["worker", "--lease", "0", "--url", url])
    assert refused.value.code == 2
    assert "argument --lease: the value must be a positive number of seconds, not '0'" in \
        capsys.readouterr().err
    assert not (tmp_path / "never.db").exists()


def test_a_lease_that_is_not_a_duration_stops_the_server_with_a_message(tmp_path):
    done = start_backend(**{"BPFLOW_SECRET": WORKER_SECRET, LEASE_ENV: "-1",
                            "DATABASE_URL": f"sqlite:///{tmp_path / 'never.db'}"})
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"bpflow: the server cannot start: {LEASE_ENV} must be a positive " \
        "number of seconds, not '-1'\n"
    assert "started" not in done.stdout and not (tmp_path / "never.db").exists()
