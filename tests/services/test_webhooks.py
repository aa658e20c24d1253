"""Webhook deliveries by the worker (SPEC §11) to a real local HTTP receiver, on SQLite
and PostgreSQL: signed bodies, the event id stable across retries (a receiver can
de-duplicate), a 500 retried after the back-off and then delivered, a webhook disabled
after repeated failures with the reason shown, two workers handing out each event once;
and the egress guard: internal addresses refused unless allowed, for webhooks and for
`http` actions."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from bpflow import egress
from bpflow.actions import run_http
from bpflow.store import Store
from bpflow.webhooks import Deliverer, Settings
from bpflow.worker import Worker
from tests.conftest import SECRET
from tests.http_server import LocalServer

FLOW = {"name": "flow", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}, "leave": {"x": 1}},
    {"uri": "b", "deps": [["a"]]}]}
HOOK_SECRET = "receiver-secret-0123456789"


class Receiver:
    """A local HTTP server recording every POST; answers from `script` in turn (then
    `default`)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[int] = []
        self.default = 200
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.requests.append({"headers": dict(self.headers), "body": raw,
                                              "path": self.path})
                    status = receiver.script.pop(0) if receiver.script else receiver.default
                data = b'{"ok": true}' if status < 300 else b"receiver is down"
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def ids(self) -> list[str]:
        with self.lock:
            return [r["headers"]["X-Bpflow-Event-Id"] for r in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def pass_(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def hub(db_url, clock) -> Iterator[Store]:
    store = Store(db_url, secret=SECRET, clock=clock)
    store.add_user("alice", "pw-alice-1", ["user"])
    store.put_template(FLOW)
    yield store
    store.close()


def run_flow(store: Store) -> str:
    iid = store.start("flow", {}, store.user("alice")).id
    store.complete(iid, "a", store.engine.bookmark(store.get(iid), "a"), {"n": 1},
                   actor="alice")
    return iid


def rounds(deliverer: Deliverer, store: Store, until, seconds: float = 60) -> None:
    """Rounds of the duty until `until()` (PostgreSQL hands out rows only once no older
    transaction on the server is running: other tests' may delay them)."""
    deadline = time.monotonic() + seconds
    while not until():
        assert time.monotonic() < deadline, "the deliveries did not come"
        deliverer.run(store.of(None))
        time.sleep(0.02)


def test_every_event_is_posted_signed_with_its_id(hub, receiver):
    hook = hub.add_webhook(receiver.url, ["circle.left", "instance.completed"], HOOK_SECRET)
    iid = run_flow(hub)
    deliverer = Deliverer()
    try:
        rounds(deliverer, hub, lambda: len(receiver.requests) >= 3)
        assert deliverer.run(hub.of(None)) == 0  # nothing more to do
    finally:
        deliverer.close()
    assert len(receiver.requests) == 3
    bodies = []
    for r in receiver.requests:
        h = r["headers"]
        want = hmac.new(HOOK_SECRET.encode(), r["body"], hashlib.sha256).hexdigest()
        assert h["X-Bpflow-Signature"] == f"sha256={want}"
        assert h["Content-Type"] == "application/json"
        body = json.loads(r["body"])
        assert h["X-Bpflow-Event-Id"] == str(body["id"])
        bodies.append(body)
    bodies.sort(key=lambda b: b["id"])  # posted concurrently: in any order
    assert [(b["type"], b["uri"]) for b in bodies] == [
        ("circle.left", "a"), ("circle.left", "b"), ("instance.completed", None)]
    assert all(b["instance"] == iid and b["template"] == "flow" for b in bodies)
    assert bodies[0]["data"]["leave"] == {"x": 1}
    assert bodies == [i for i in hub.feed(None, 100)[0] if i["type"] in hook["events"]]
    log = hub.deliveries(hook["id"])
    assert [(d["state"], d["attempts"], d["status_code"]) for d in log] == [
        ("delivered", 1, 200)] * 3
    assert hub.webhook(hook["id"])["deliveries"] == {"pending": 0, "delivered": 3,
                                                     "failed": 0}


def test_a_500_is_retried_after_the_backoff_with_the_same_id_and_body(hub, receiver, clock):
    hook = hub.add_webhook(receiver.url, ["instance.completed"], HOOK_SECRET)
    run_flow(hub)
    receiver.script = [500]
    deliverer = Deliverer(Settings(backoff_base=5))
    try:
        rounds(deliverer, hub, lambda: len(receiver.requests) >= 1)
        [first] = hub.deliveries(hook["id"])
        assert (first["state"], first["attempts"], first["status_code"]) == (
            "pending", 1, 500)
        assert "HTTP 500" in first["error"] and "receiver is down" in first["error"]
        assert first["next_at"] == clock.now + timedelta(seconds=5)
        assert hub.webhook(hook["id"])["state"] == "failing"
        assert deliverer.run(hub.of(None)) == 0  # not before its time
        clock.pass_(5)
        assert deliverer.run(hub.of(None)) == 1
    finally:
        deliverer.close()
    one, two = receiver.requests
    assert one["headers"]["X-Bpflow-Event-Id"] == two["headers"]["X-Bpflow-Event-Id"]
    assert one["body"] == two["body"]  # byte for byte: a receiver de-duplicates by id
    assert one["headers"]["X-Bpflow-Signature"] == two["headers"]["X-Bpflow-Signature"]
    [done] = hub.deliveries(hook["id"])
    assert (done["state"], done["attempts"], done["status_code"], done["error"]) == (
        "delivered", 2, 200, None)
    assert hub.webhook(hook["id"])["state"] == "active"


def test_a_webhook_failing_again_and_again_is_disabled_with_the_reason(hub, receiver,
                                                                       clock):
    hook = hub.add_webhook(receiver.url, ["circle.left"], HOOK_SECRET)
    run_flow(hub)
    receiver.default = 503
    deliverer = Deliverer(Settings(backoff_base=1, failure_limit=3))
    try:
        rounds(deliverer, hub, lambda: len(receiver.requests) >= 2)  # both circles
        for _ in range(2):
            clock.pass_(3600)
            deliverer.run(hub.of(None))
        state = hub.webhook(hook["id"])
        assert state["state"] == "disabled" and state["disabled_at"] is not None
        assert "3 consecutive failed deliveries" in state["disabled_reason"]
        assert "HTTP 503" in state["disabled_reason"]
        assert {d["state"] for d in hub.deliveries(hook["id"])} == {"failed"}
        posted = len(receiver.requests)
        assert posted == 6  # two events, three rounds
        run_flow(hub)  # a disabled webhook gets nothing more
        clock.pass_(3600)
        for _ in range(3):
            deliverer.run(hub.of(None))
        assert len(receiver.requests) == posted
        assert len(hub.deliveries(hook["id"])) == 2
    finally:
        deliverer.close()


def test_two_workers_hand_out_and_post_each_event_once(db_url, receiver):
    stores = [Store(db_url, secret=SECRET) for _ in range(2)]
    try:
        stores[0].add_user("alice", "pw-alice-1", ["user"])
        stores[0].put_template(FLOW)
        stores[0].add_webhook(receiver.url, ["circle.entered", "circle.left"], HOOK_SECRET)
        for _ in range(10):
            run_flow(stores[0])
        deliverers = [Deliverer(Settings(batch=7, concurrency=4)) for _ in stores]
        stop = time.monotonic() + 60

        def work(d: Deliverer, s: Store) -> None:
            while len(receiver.requests) < 40 and time.monotonic() < stop:
                d.run(s.of(None))
        threads = [threading.Thread(target=work, args=pair) for pair in zip(
            deliverers, stores, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for d in deliverers:
            d.close()
        ids = receiver.ids()
        assert len(ids) == 40 and len(set(ids)) == 40  # 10 × (2 entered + 2 left)
    finally:
        for s in stores:
            s.close()


def test_a_worker_delivers_webhooks_as_one_of_its_duties(hub, receiver):
    hub.add_webhook(receiver.url, ["instance.completed"], HOOK_SECRET)
    worker = Worker(hub)
    run_flow(hub)
    deadline = time.monotonic() + 60
    while not receiver.requests and time.monotonic() < deadline:
        worker.run_duties()
        time.sleep(0.02)
    assert json.loads(receiver.requests[0]["body"])["type"] == "instance.completed"
    worker.webhooks.close()


# ------------------------------------------------------------------ the egress guard
@pytest.mark.parametrize("url, words", [
    ("http://127.0.0.1/x", "loopback"),
    ("http://127.1.2.3:8080/x", "loopback"),
    ("http://[::1]/x", "loopback"),
    ("http://[::ffff:127.0.0.1]/x", "loopback"),
    ("http://localhost:8080/x", "resolves to"),
    ("http://10.0.0.1/x", "private"),
    ("http://172.16.5.4/x", "private"),
    ("http://192.168.1.1/x", "private"),
    ("http://[fd00::1]/x", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/x", "link-local"),
    ("http://224.0.0.1/x", "multicast"),
    ("http://0.0.0.0/x", "unspecified"),
    ("http://240.0.0.1/x", "reserved"),
    ("http://100.64.0.1/x", "shared"),
    ("ftp://93.184.216.34/x", "only http and https"),
    ("file:///etc/passwd", "only http and https"),
    ("gopher://93.184.216.34/", "only http and https"),
    ("http:///x", "no host"),
    ("http://nonexistent.invalid/x", "does not resolve"),
])
def test_internal_and_odd_urls_are_refused_without_the_allow_list(monkeypatch, url, words):
    monkeypatch.delenv(egress.ALLOW_ENV, raising=False)
    reason = egress.refusal(url)
    assert reason is not None and words in reason, reason


def test_public_addresses_pass_and_the_allow_list_opens_what_it_names(monkeypatch):
    monkeypatch.delenv(egress.ALLOW_ENV, raising=False)
    assert egress.refusal("https://93.184.216.34/hook") is None
    assert egress.refusal("http://[2606:4700:4700::1111]/") is None
    monkeypatch.setenv(egress.ALLOW_ENV, "127.0.0.1, 10.0.0.0/8,hooks.internal")
    assert egress.refusal("http://127.0.0.1:9000/x") is None
    assert egress.refusal("http://10.20.30.40/x") is None
    assert "private" in egress.refusal("http://192.168.1.1/x")
    assert "loopback" in egress.refusal("http://127.0.0.2/x")  # the address, not /8
    monkeypatch.setenv(egress.ALLOW_ENV, "localhost")
    assert egress.refusal("http://localhost:8080/x") is None  # by name
    assert egress.refusal("http://127.0.0.1:8080/x") is not None


def test_a_delivery_to_a_host_no_longer_allowed_is_refused_not_posted(hub, receiver,
                                                                      monkeypatch):
    hook = hub.add_webhook(receiver.url, ["instance.completed"], HOOK_SECRET)
    run_flow(hub)
    monkeypatch.delenv(egress.ALLOW_ENV, raising=False)
    deliverer = Deliverer()
    try:
        rounds(deliverer, hub, lambda: hub.deliveries(hook["id"])
               and hub.deliveries(hook["id"])[0]["attempts"] == 1)
    finally:
        deliverer.close()
    [d] = hub.deliveries(hook["id"])
    assert d["state"] == "pending" and "refused" in d["error"] and "loopback" in d["error"]
    assert receiver.requests == []


def test_an_http_action_to_a_refused_host_fails_its_circle_with_the_reason(hub,
                                                                         monkeypatch):
    with LocalServer() as server:
        action = {"type": "http", "method": "POST", "url": f"{server.url}/ok"}
        assert run_http(action, "k1").ok  # allowed by the tests' allow-list
        monkeypatch.delenv(egress.ALLOW_ENV, raising=False)
        out = run_http(action, "k2")
        assert out.ok is False and "refused" in out.reason and "loopback" in out.reason
        hub.put_template({"name": "call", "circles": [{"uri": "c", "box": {
            "action": action}}]})
        iid = hub.start("call", {}, hub.user("alice")).id
        Worker(hub).run_once()
        run = hub.get(iid).circles["c"]
        assert run.state == "failure" and "loopback" in run.reason
        assert server.recorder.seen("/ok") == 1  # only the allowed call above
