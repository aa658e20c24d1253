"""Traces (SPEC §18): OpenTelemetry's SDK is not loaded unless
OTEL_EXPORTER_OTLP_ENDPOINT is set; once set up, a request has its span (named by its
route's template), each step its span inside what made it, and an HTTP action carries
the action span's `traceparent`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bpflow import tracing
from bpflow.store import Store
from bpflow.worker import Worker
from tests.conftest import SECRET
from tests.services.helpers import http_flow


def test_nothing_of_opentelemetry_is_loaded_when_unset():
    """The SDK and the exporter, that is (FastAPI itself imports the bare API package when
    it is installed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    code = ("import sys, bpflow.api, bpflow.worker, bpflow.webhooks;"
            "from bpflow.api import create_app; create_app(lambda: None);"
            "print(sorted(m for m in sys.modules if m.startswith(("
            "'opentelemetry.sdk', 'opentelemetry.exporter'))))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.fixture
def spans():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    tracing.setup(exporter)
    yield exporter
    tracing.shutdown()


def test_an_http_action_has_its_span_and_sends_its_traceparent(spans, tmp_path, server):
    from bpflow.store.migrate import upgrade
    url = f"sqlite:///{tmp_path / 'bpflow.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET)
    try:
        tracing.watch(store)
        store.put_template(http_flow(f"{server.url}/ok"))
        iid = store.start("call", {"n": 1}).id
        Worker(store).run_once()
        assert store.get(iid).status == "completed"
    finally:
        store.close()
    (action,) = [s for s in spans.get_finished_spans() if s.name == "action http"]
    assert action.attributes["bpflow.instance"] == iid
    steps = [s for s in spans.get_finished_spans() if s.name == "step"]
    assert steps and {s.attributes["bpflow.instance"] for s in steps} == {iid}
    # the action's result committed as a step inside the action's span
    assert action.context.span_id in {s.parent.span_id for s in steps if s.parent}
    sent = server.recorder.requests[-1]["headers"]
    trace_id = format(action.context.trace_id, "032x")
    assert sent["traceparent"].split("-")[1] == trace_id


def test_a_request_has_its_span_named_by_its_route_template(spans, tmp_path):
    from fastapi.testclient import TestClient

    from bpflow.api import create_app
    from bpflow.store.migrate import upgrade
    url = f"sqlite:///{tmp_path / 'bpflow.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET)
    try:
        tracing.watch(store)
        store.add_user("admin", "pw-admin-0123", ["admin"])
        store.put_template({"name": "one", "circles": [{"uri": "a"}, {"uri": "b",
                                                                      "deps": [["a"]]}]})
        with TestClient(create_app(lambda: store)) as client:
            token = client.post("/api/auth/token", json={
                "username": "admin", "password": "pw-admin-0123"}).json()["access_token"]
            auth = {"Authorization": f"Bearer {token}"}
            iid = client.post("/api/instances", json={"template": "one"},
                              headers=auth).json()["id"]
            assert client.get(f"/api/instances/{iid}", headers=auth).status_code == 200
    finally:
        store.close()
    named = {s.name: s for s in spans.get_finished_spans()}
    read = named["HTTP GET /api/instances/{instance_id}"]
    assert read.attributes["http.route"] == "/api/instances/{instance_id}"
    assert read.attributes["http.response.status_code"] == 200
    assert iid not in read.name
    assert "HTTP POST /api/instances" in named
