"""Two backends and two workers on one PostgreSQL database: a completion storm across both
backends is applied once, a worker killed mid-action leaves its work to the other, and a
backend killed leaves the other serving the same token. The backend kill comes last: the
module's cluster is not whole after it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import text

from tests.http_server import LocalServer
from tests.scaled.conftest import LEASE_S, Cluster, kill
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

    def attempt(i: int) -> int:
        base = cluster.a if i % 2 else cluster.b
        return httpx.post(base + path, json={"bookmark": mark, "result": {"n": i}},
                          headers=token, timeout=30).status_code

    with ThreadPoolExecutor(24) as pool:
        codes = list(pool.map(attempt, range(24)))
    assert sorted(codes) == [200] + [409] * 23
    history = cluster.store.history(inst["id"])
    completions = [e for e in history
                   if e["kind"] == "circle_succeeded" and e["circle"] == "fill"]
    assert len(completions) == 1
    done = httpx.get(f"{cluster.b}/api/instances/{inst['id']}", headers=token, timeout=30)
    assert done.json()["status"] == "completed"


def lease_owner_pid(cluster: Cluster, instance_id: str) -> int | None:
    """The pid of the worker holding the instance's lease (owner `host:pid:random`)."""
    with cluster.store.db.connect() as conn:
        owner = conn.execute(text("select lease_owner from instances where id = :i"),
                             {"i": instance_id}).scalar()
    return int(owner.split(":")[1]) if owner else None


def test_worker_killed_mid_action_leaves_it_to_the_other(cluster, token):
    with LocalServer() as server:
        # the first call is held 30 s; the one after the lease expires answers at once
        cluster.store.put_template(slow_call(f"{server.url}/slow-once/30"))
        iid = start(cluster.b, token, "call")["id"]
        wait_until(lambda: server.recorder.seen("/slow-once/30") == 1, 30,
                   "a worker to call the server")
        pid = lease_owner_pid(cluster, iid)
        doomed = next(w for w in cluster.workers if w.pid == pid)
        kill(doomed)
        doomed.wait(timeout=10)
        assert cluster.store.get(iid).circles["call"].state == "waiting"
        wait_until(lambda: cluster.store.get(iid).status == "completed", LEASE_S + 20,
                   "the other worker to pick the instance up")
        # the second call carried the first one's idempotency key
        assert server.recorder.keys() == {f"{iid}:call:0": 2}
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
