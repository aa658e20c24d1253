"""`stop_at` (SPEC §11), on SQLite and PostgreSQL, with a clock the test moves: no start of
a template version after its `stop_at` (the store, the API's async start, the worker's
view alike), and the worker's expiry duty terminating its instances still running, failed
or suspended then, reason `expired`, of every tenant, a bounded batch a round."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import select

from bpflow import operations
from bpflow.api import create_app
from bpflow.auth import issue_token
from bpflow.errors import Conflict
from bpflow.expiry import expire
from bpflow.store import Store
from bpflow.store.tables import templates_t
from bpflow.worker import Worker
from tests.conftest import SECRET, run_async

STOP = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def stopping(at: str | None = "2030-01-01T13:00:00+01:00") -> dict:
    body = {"name": "offer", "circles": [
        {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
        {"uri": "b", "deps": [["a"]]}]}
    return body if at is None else {**body, "stop_at": at}


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(STOP - timedelta(hours=1))


@pytest.fixture
def store(db_url, clock):
    s = Store(db_url, secret=SECRET, clock=clock)
    s.add_tenant("acme")
    for tenant, name in (("default", "alice"), ("acme", "zed")):
        s.of(tenant).add_user(name, f"pw-{name}", ["user"])
        s.of(tenant).put_template(stopping())
    yield s
    s.close()


def test_no_start_after_stop_at(store, clock):
    alice = store.user("alice")
    with store.reader() as conn:  # the body's time, in UTC, in its column
        assert conn.execute(select(templates_t.c.stop_at).where(
            templates_t.c.tenant == "default")).scalar() == STOP
    store.start("offer", {}, alice)  # before: fine
    clock.now = STOP
    with pytest.raises(Conflict) as refused:
        store.start("offer", {}, alice)
    assert str(refused.value) == ("template 'offer' stopped taking starts at"
                                  " 2030-01-01T12:00:00+00:00 (its stop_at)")
    with pytest.raises(Conflict):
        run_async(store.start_async("offer", {}, alice))
    app = create_app(lambda: store)

    async def post(body):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.post("/api/instances", json=body, headers={
                "Authorization": "Bearer " + issue_token(alice, SECRET)})
    r = run_async(post({"template": "offer"}))
    assert r.status_code == 409 and "stopped taking starts at" in r.json()["detail"]
    # a new version without stop_at takes starts again; version 1 still refuses them
    assert store.put_template(stopping(None)) == (2, True)
    assert store.start("offer", {}, alice).version == 2
    r = run_async(post({"template": "offer", "version": 1}))
    assert r.status_code == 409, r.text


def test_a_stop_at_without_time_zone_is_refused_on_upload(store):
    with pytest.raises(Exception) as refused:
        store.put_template(stopping("2030-01-01T12:00:00"))
    assert "time zone" in str(refused.value)


def test_the_worker_terminates_expired_instances_of_every_tenant(store, clock):
    alice, zed = store.user("alice"), store.of("acme").user("zed")
    running = store.start("offer", {}, alice)
    suspended = store.suspend(store.start("offer", {}, alice).id)
    failing = store.start("offer", {}, alice)
    failed = store.fail(failing.id, "a", store.engine.bookmark(failing, "a"), "no")
    assert (suspended.status, failed.status) == ("suspended", "failed")
    done = store.start("offer", {}, alice)
    done = store.complete(done.id, "a", store.engine.bookmark(done, "a"), {"n": 1})
    assert done.status == "completed"
    theirs = store.of("acme").start("offer", {}, zed)
    store.put_template(stopping(None))
    later = store.start("offer", {}, alice)  # version 2: no stop_at

    worker = Worker(store)
    worker.duties.remove(operations.fold_waits)  # it counts history folded, not expiries
    assert worker.run_duties() == 0  # not yet
    clock.now = STOP + timedelta(seconds=1)
    assert expire(worker, limit=2) == 2  # a bounded batch
    assert worker.run_duties() == 2
    assert worker.run_duties() == 0
    expired = [running, suspended, failed]
    for inst in expired:
        now = store.get(inst.id)
        assert (now.status, now.reason) == ("terminated", "expired")
        [event] = [e for e in store.history(inst.id) if e["kind"] == "instance_terminated"]
        assert event["actor"] == "worker"
    now = store.of("acme").get(theirs.id)
    assert (now.status, now.reason) == ("terminated", "expired")
    assert store.get(done.id).status == "completed"
    assert store.get(later.id).status == "running"


def test_expiry_closes_the_approval_mail_of_an_expired_instance(db_url, clock):
    s = Store(db_url, secret=SECRET, clock=clock)
    try:
        s.add_user("alice", "pw-alice", ["user"])
        s.add_user("ann", "pw-ann", ["approver"])
        s.put_template({"name": "ask", "stop_at": "2030-01-01T12:00:00Z", "circles": [
            {"uri": "ok", "box": {"action": {"type": "approval", "to": "ann",
                                             "subject": "please"}}}]})
        inst = s.start("ask", {}, s.user("alice"))
        worker = Worker(s)
        worker.duties.remove(operations.fold_waits)  # it counts history folded, not expiries
        worker.run_once()
        assert len(s.open_approvals(inst.id)) == 1
        clock.now = STOP
        assert worker.run_duties() == 1
        assert s.get(inst.id).status == "terminated"
        assert s.open_approvals(inst.id) == []
    finally:
        s.close()
