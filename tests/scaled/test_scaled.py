"""Two backends and two workers on one PostgreSQL database: a completion storm across both
backends is applied once (each answer naming the backend that served it), a worker keeps
its lease while its action runs and, killed mid-action, leaves the action to the other,
which sends it again within the lease, and a backend killed leaves the other serving the
same token. The backend kill comes last: the module's cluster is not whole after it."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import httpx
import pytest
from sqlalchemy import text

from tests.http_server import LocalServer
from tests.scaled.conftest import LEASE_S, Cluster
from tests.servers import kill
from tests.services.test_worker import wait_until

STORM = {"name": "storm", "circles": [
    {"uri": "fill", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["fill"]]}]}


def slow_call(url: str) -> dict:
    return {"name": "call", "circles": [
        {"uri": "call", "box": {"action": {"type": "http", "method": "POST", "url": url}}},
        {"uri": "end", "deps": [["call"]]}]}


@pytest.fixture(scope="module")
def token(cluster: Cluster) -> dict[str, str]:
    """alice's bearer header, issued by backend A."""
    cluster.store.add_user("alice", "pw-alice", ["user"])
    r = httpx.post(f"{cluster.a}/api/auth/token",
                   json={"username": "alice", "password": "pw-alice"}, timeout=30)
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


def start(base: str, token: dict[str, str], template: str) -> dict:
    r = httpx.post(f"{base}/api/instances", json={"template": template}, headers=token,
                   timeout=30)
    assert r.status_code == 201, r.text
    return r.json()


def test_completion_storm_across_both_backends_is_applied_once(cluster, token):
    cluster.store.put_template(STORM)
    inst = start(cluster.a, token, "storm")
    mark = inst["circles"]["fill"]["bookmark"]
    path = f"/api/instances/{inst['id']}/circles/fill/complete"

    def attempt(i: int) -> tuple[int, str, str | None]:
        base, name = (cluster.a, "backend-a") if i % 2 else (cluster.b, "backend-b")
        r = httpx.post(base + path, json={"bookmark": mark, "result": {"n": i}},
                       headers=token, timeout=30)
        return r.status_code, name, r.headers.get("X-Bpflow-Backend")

    with ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(attempt, range(24)))
    assert sorted(code for code, _, _ in answers) == [200] + [409] * 23
    assert all(served == name for _, name, served in answers)  # each names its backend
    history = cluster.store.history(inst["id"])
    completions = [e for e in history
                   if e["kind"] == "circle_succeeded" and e["circle"] == "fill"]
    assert len(completions) == 1
    done = httpx.get(f"{cluster.b}/api/instances/{inst['id']}", headers=token, timeout=30)
    assert done.json()["status"] == "completed"


def lease_of(cluster: Cluster, instance_id: str) -> tuple[int | None, datetime | None]:
    """The pid of the worker holding the instance's lease (owner `host:pid:random`) and
    when the lease ends."""
    with cluster.store.db.connect() as conn:
        owner, until = conn.execute(text("select lease_owner, lease_until from instances "
                                         "where id = :i"), {"i": instance_id}).one()
    return (int(owner.split(":")[1]) if owner else None), until


def test_worker_killed_mid_action_leaves_it_to_the_other(cluster, token):
    with LocalServer() as server:
        # the first call is held 30 s; the one sent again after the takeover answers at once
        cluster.store.put_template(slow_call(f"{server.url}/slow-once/30"))
        iid = start(cluster.b, token, "call")["id"]
        wait_until(lambda: server.recorder.seen("/slow-once/30") == 1, 30,
                   "a worker to call the server")
        pid, first_until = lease_of(cluster, iid)
        assert pid is not None and first_until is not None
        # past the lease it was claimed with, the call still runs: its worker renewed it
        wait_until(lambda: cluster.store.clock() > first_until + timedelta(seconds=1),
                   LEASE_S + 5, "the first lease to be over")
        assert server.recorder.seen("/slow-once/30") == 1
        assert lease_of(cluster, iid)[0] == pid
        doomed = next(w for w in cluster.workers if w.pid == pid)
        kill(doomed)
        killed = time.monotonic()
        doomed.wait(timeout=10)
        assert cluster.store.get(iid).circles["call"].state == "waiting"
        wait_until(lambda: server.recorder.seen("/slow-once/30") == 2, 20,
                   "the other worker to send the call again")
        print(f"sent again {time.monotonic() - killed:.1f} s after the kill")
        wait_until(lambda: cluster.store.get(iid).status == "completed", 10,
                   "the other worker to record the answer")
        # the second call carried the first one's idempotency key
        assert server.recorder.keys() == {f"{iid}:call:0": 2}
    assert lease_of(cluster, iid) == (None, None)
    assert any(w.poll() is None for w in cluster.workers)


def test_backend_killed_leaves_the_other_serving_the_same_token(cluster, token):
    cluster.store.put_template(STORM)
    inst = start(cluster.a, token, "storm")
    kill(cluster.backends[0])
    cluster.backends[0].wait(timeout=10)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{cluster.a}/api/health", timeout=5)
    url = f"{cluster.b}/api/instances/{inst['id']}"
    seen = httpx.get(url, headers=token, timeout=30)
    assert seen.status_code == 200
    mark = seen.json()["circles"]["fill"]["bookmark"]
    done = httpx.post(f"{url}/circles/fill/complete", json={"bookmark": mark,
                                                            "result": {"n": 1}},
                      headers=token, timeout=30)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    assert cluster.backends[1].poll() is None
