"""Every answer names the backend process that served it (`X-Bpflow-Backend`, SPEC §14a):
the short path's, the framework's, errors and refusals alike; `host:pid` unless the
process is named (`BPFLOW_PROCESS`). Backends in processes of their own: tests/scaled."""

from __future__ import annotations

import os
import socket

from bpflow.api import create_app
from tests.api.helpers import Client


def test_every_answer_names_the_backend_process(sqlite_store, monkeypatch):
    monkeypatch.delenv("BPFLOW_PROCESS", raising=False)
    app = create_app(lambda: sqlite_store)
    call = Client(sqlite_store, app)
    started = call("POST", "/api/instances", '{"template": "simple"}')
    assert started.status_code == 201 and app.hot is not None and app.hot.served == 1
    answers = [started, call("GET", f"/api/instances/{started.json()['id']}"),
               call("GET", "/api/instances/nope"), call("GET", "/api/health", who=None),
               call("POST", "/api/instances", "[" * 300), call("GET", "/api/templates",
                                                                who=None)]
    assert [r.status_code for r in answers] == [201, 200, 404, 200, 422, 401]
    here = f"{socket.gethostname()}:{os.getpid()}"
    assert [r.headers.get("X-Bpflow-Backend") for r in answers] == [here] * len(answers)


def test_a_named_backend_answers_with_its_name(sqlite_store, monkeypatch):
    monkeypatch.setenv("BPFLOW_PROCESS", "backend-east-{pid}")
    r = Client(sqlite_store, create_app(lambda: sqlite_store))("GET", "/api/health")
    assert r.headers["X-Bpflow-Backend"] == f"backend-east-{os.getpid()}"
