"""GET /metrics (SPEC §18) from a real server process in multi-process mode: guarded by
the metrics token, parsed by prometheus_client's own parser, every name of §18 present,
the counters moving with the work, no label from user input."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bpflow.store import Store
from bpflow.store.migrate import upgrade
from tests.conftest import SECRET
from tests.store.test_crash import Server

NAMES = {"bpflow_http_requests", "bpflow_http_request_duration_seconds", "bpflow_steps",
         "bpflow_instances", "bpflow_tasks_open", "bpflow_tasks_overdue",
         "bpflow_timer_lateness_seconds", "bpflow_worker_actions",
         "bpflow_webhook_deliveries", "bpflow_db_commit_duration_seconds"}
FORM = {"name": "form", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}}]}


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(server: Server, token: str = "metrics-token-0123") -> tuple[set[str], dict]:
    r = httpx.get(f"{server.base}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    names = {f.name for f in text_string_to_metric_families(r.text)}
    return names, samples(r.text)


def test_a_scrape_has_every_name_and_counts_the_work(tmp_path):
    url = f"sqlite:///{tmp_path / 'bpflow.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET)
    store.add_user("admin", "pw-admin", ["admin"])
    store.put_template(FORM)
    (tmp_path / "prom").mkdir()
    server = Server(url, tmp_path)
    server.env.update(PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"),
                      BPFLOW_METRICS_TOKEN="metrics-token-0123")
    server.start()
    try:
        assert httpx.get(f"{server.base}/metrics").status_code == 403  # no token
        assert httpx.get(f"{server.base}/metrics", headers={
            "Authorization": "Bearer wrong"}).status_code == 403
        names, before = scrape(server)
        assert NAMES <= names
        token = httpx.post(f"{server.base}/api/auth/token", json={
            "username": "admin", "password": "pw-admin"}).json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        for _ in range(3):
            r = httpx.post(f"{server.base}/api/instances", json={"template": "form"},
                           headers=auth)
            assert r.status_code == 201
        iid = r.json()["id"]
        inst = httpx.get(f"{server.base}/api/instances/{iid}", headers=auth).json()
        bookmark = inst["circles"]["a"]["bookmark"]
        assert httpx.post(f"{server.base}/api/instances/{iid}/circles/a/complete", json={
            "bookmark": bookmark, "result": {"n": 1}}, headers=auth).status_code == 200
        assert httpx.get(f"{server.base}/api/instances/{iid}", headers=auth).status_code == 200
        assert httpx.get(f"{server.base}/api/instances/nope-{'x' * 20}",
                         headers=auth).status_code == 404
        _, after = scrape(server)
    finally:
        server.kill()
        store.close()
    started = ("bpflow_http_requests_total", (("method", "POST"), ("route", "/api/instances"),
                                              ("status", "201")))
    assert after[started] - before.get(started, 0) == 3
    read = ("bpflow_http_requests_total", (("method", "GET"),
                                           ("route", "/api/instances/{instance_id}"),
                                           ("status", "200")))
    assert after[read] == 2
    routes = {dict(k[1]).get("route") for k in after if k[0] == "bpflow_http_requests_total"}
    assert not any(r and "nope" in r for r in routes)  # routes as templates, never paths
    steps = ("bpflow_steps_total", (("tenant", "default"),))
    assert after[steps] - before.get(steps, 0) == 4  # 3 starts, 1 completion
    assert after[("bpflow_instances", (("status", "running"), ("tenant", "default")))] == 2
    assert after[("bpflow_instances", (("status", "completed"), ("tenant", "default")))] == 1
    commits = ("bpflow_db_commit_duration_seconds_count", ())
    assert after[commits] - before.get(commits, 0) == 1
