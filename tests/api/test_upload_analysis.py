"""A template upload is analysed off the event loop, and the analysis stops when the
client goes away (SPEC §13: analysis is bounded; nothing runs on for nobody)."""

from __future__ import annotations

import json
import time

from bpflow.api import create_app
from bpflow.auth import issue_token
from tests.conftest import run_async

CIRCLES = 100_000  # seconds of analysis: long enough to leave in the middle


def big_template() -> dict:
    circles = [{"uri": f"c{i}", "deps": [[f"c{i - 1}"]] if i else []}
               for i in range(CIRCLES)]
    return {"name": "big", "circles": circles}


def upload_and_leave(store, body: bytes) -> tuple[int | None, float]:
    """POST /api/templates through the ASGI app, the client gone once the body is sent:
    the status the app answered (None if it never did) and how long it took."""
    store.add_user("root", "pw-root-upload", ["admin"])
    token = issue_token(store.user("root"), store.secret)
    app = create_app(lambda: store)
    sent = []

    async def main() -> None:
        delivered = False

        async def receive():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.start":
                sent.append(message["status"])
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": "/api/templates",
                 "raw_path": b"/api/templates", "query_string": b"", "root_path": "",
                 "headers": [(b"content-type", b"application/json"),
                             (b"content-length", str(len(body)).encode()),
                             (b"authorization", f"Bearer {token}".encode())],
                 "client": ("127.0.0.1", 5000), "server": ("bpflow.test", 80)}
        await app(scope, receive, send)
    began = time.monotonic()
    run_async(main())
    return (sent[0] if sent else None), time.monotonic() - began


def test_an_upload_whose_client_left_is_not_analysed_to_the_end(sqlite_store, monkeypatch):
    body = json.dumps(big_template()).encode()
    monkeypatch.setenv("BPFLOW_MAX_BODY", str(len(body)))  # a server configured for it
    status, took = upload_and_leave(sqlite_store, body)
    assert "big" not in sqlite_store.template_versions()  # stopped: nothing stored
    assert status == 422


def test_the_analysis_stops_when_asked(sqlite_store):
    from dataclasses import replace

    from engine.analysis import analyze
    from engine.limits import DEFAULT_LIMITS

    small = {"name": "small", "circles": [{"uri": "a"}, {"uri": "b", "deps": [["a"]]}]}
    report = analyze(small, limits=replace(DEFAULT_LIMITS, stop=lambda: True))
    assert not report.valid
    assert [e["code"] for e in report.errors] == ["too_large"]
    assert "stopped" in report.errors[0]["message"]
