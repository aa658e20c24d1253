"""The body-size limit (SPEC §13): a request body over `BPFLOW_MAX_BODY` bytes (1 MiB by
default) is answered 413 on every endpoint, whether Content-Length announces it or it
comes in chunks and is counted as it is read; nothing of it is stored."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from fastapi.routing import APIRoute

from bpflow import limits
from bpflow.api import create_app
from bpflow.api.routes import ROUTERS
from tests.api.helpers import JSON, Client, secured
from tests.conftest import run_async

LIMIT = 1000
UPLOAD = ("POST", "/api/files")  # its own limit: a file (test_an_upload_has_its_own_limit)
ROUTES = sorted((method, route.path) for router in ROUTERS for route in router.routes
                if isinstance(route, APIRoute) for method in route.methods
                if (method, route.path) != UPLOAD)


@pytest.fixture
def small_app(sqlite_store, monkeypatch):
    monkeypatch.setenv("BPFLOW_MAX_BODY", str(LIMIT))
    return create_app(lambda: sqlite_store)


def padded(size: int) -> str:
    """A JSON object of exactly `size` bytes."""
    head = '{"template": "simple", "inputs": {"pad": "'
    return head + "x" * (size - len(head) - 3) + '"}}'


@pytest.mark.parametrize("method, path", ROUTES + [("GET", "/api/docs")])
def test_every_endpoint_refuses_a_body_over_the_limit(sqlite_store, small_app, method, path):
    inst = sqlite_store.start("simple", {}, sqlite_store.user("alice"))
    count = sqlite_store.list_instances(None, None, None, 1, 0)[1]
    path = re.sub(r"\{[a-z_]+\}", lambda m: {"{instance_id}": inst.id, "{uri}": "a",
                                             "{mail_id}": "1"}.get(m[0], "simple"), path)
    r = Client(sqlite_store, small_app)(method, path, padded(LIMIT + 1), "admin")
    assert r.status_code == 413, r.text
    assert r.json() == {"detail": f"the request body is larger than {LIMIT} bytes"}
    assert secured(r)
    assert sqlite_store.list_instances(None, None, None, 1, 0)[1] == count


def test_an_upload_has_its_own_limit(sqlite_store, monkeypatch):
    """`POST /api/files` takes a file of `BPFLOW_MAX_FILE_BYTES` and its form's fields
    (64 KiB), not more; nothing of a larger one is read or kept."""
    from bpflow.api import UPLOAD_FORM
    monkeypatch.setenv("BPFLOW_MAX_BODY", str(LIMIT))
    monkeypatch.setenv("BPFLOW_MAX_FILE_BYTES", "5000")
    app = create_app(lambda: sqlite_store)
    big = "x" * (5000 + UPLOAD_FORM + 1)
    r = Client(sqlite_store, app)(*UPLOAD, big, "alice")
    assert r.status_code == 413
    assert r.json() == {"detail": f"the request body is larger than {5000 + UPLOAD_FORM} bytes"}
    assert secured(r)
    r = Client(sqlite_store, app)(*UPLOAD, "x" * 3000, "alice")  # over BPFLOW_MAX_BODY
    assert r.status_code == 422  # read, then refused as no multipart upload


@pytest.mark.parametrize("short_path", [True, False])
@pytest.mark.parametrize("size, status", [(LIMIT, 201), (LIMIT + 1, 413)])
def test_a_chunked_body_is_counted_as_it_is_read(sqlite_store, small_app, short_path, size,
                                                 status):
    if not short_path:
        small_app.hot = None
    count = sqlite_store.list_instances(None, None, None, 1, 0)[1]
    body = padded(size).encode()
    headers = {**JSON, **Client(sqlite_store, small_app).auth("alice")}

    async def chunks():
        for i in range(0, len(body), 100):
            yield body[i:i + 100]

    async def send():
        transport = httpx.ASGITransport(app=small_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.post("/api/instances", content=chunks(), headers=headers)
    r = run_async(send())
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in r.request.headers
    assert r.status_code == status, r.text
    now = sqlite_store.list_instances(None, None, None, 1, 0)[1]
    assert now == count + (1 if status == 201 else 0)


def test_the_limit_is_one_mebibyte_unless_configured(monkeypatch, sqlite_store):
    monkeypatch.delenv("BPFLOW_MAX_BODY", raising=False)
    assert limits.max_body() == 1 << 20
    assert create_app(lambda: sqlite_store).max_body == 1 << 20
    monkeypatch.setenv("BPFLOW_MAX_BODY", "2048")
    assert create_app(lambda: sqlite_store).max_body == 2048
    for bad in ("lots", "0", "-5", "1e6", "\u0661\u0662"):
        monkeypatch.setenv("BPFLOW_MAX_BODY", bad)
        with pytest.raises(ValueError, match="BPFLOW_MAX_BODY"):
            create_app(lambda: sqlite_store)


def test_twenty_megabytes_of_inputs_over_http_are_refused(api):
    """Over real HTTP (uvicorn): the client that sends 20 MB gets its 413, and nothing
    reaches the database; then 2 MiB in chunks; a body just under 1 MiB is read."""
    inputs = {"blob": "x" * (20 << 20)}
    with api.client("alice") as c:
        r = c.post("/api/instances", json={"template": "simple", "inputs": inputs})
        assert r.status_code == 413 and "larger than 1048576 bytes" in r.json()["detail"]
        assert secured(r)
        chunked = c.post("/api/instances", headers=JSON, content=iter(
            [b'{"template": "simple", "inputs": {"blob": "'] + [b"x" * 65536] * 32 + [b'"}}']))
        assert chunked.status_code == 413
        under = c.post("/api/guest/messages", headers=JSON,
                       content=json.dumps({"name": "n", "subject": "s",
                                           "body": ["y" * 60000] * 17}))
        assert under.status_code == 422 and "string" in json.dumps(under.json())
        assert c.get("/api/instances").headers["X-Total-Count"] == "0"
