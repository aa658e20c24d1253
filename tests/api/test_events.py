"""The event feed and webhooks over the API (SPEC §11), on SQLite and PostgreSQL: admins
only, the feed paged by cursors, bad input answered 422 with a reason (the egress guard
among them), a webhook's secret never shown, another tenant's webhook 404."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from bpflow.api import create_app
from bpflow.auth import issue_token
from bpflow.store import Store
from tests.conftest import SECRET, run_async

FLOW = {"name": "flow", "circles": [
    {"uri": "a", "enter": {"hello": 1}, "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "b", "deps": [["a"]], "leave": ["done"]}]}
HOOK_SECRET = "a-secret-of-the-receiver-0123"
HOOK = {"url": "http://127.0.0.1:9/hook", "events": ["circle.left", "instance.completed"],
        "secret": HOOK_SECRET}


class Client:
    def __init__(self, store: Store):
        self.store, self.app = store, create_app(lambda: store)

    def __call__(self, who: str | None, method: str, path: str, body: Any = None,
                 **params: Any) -> httpx.Response:
        headers = {"Authorization": "Bearer " + issue_token(self.store.user(who), SECRET)} \
            if who else {}

        async def send():
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.request(method, path, json=body, headers=headers,
                                       params=params or None)
        return run_async(send())


@pytest.fixture
def call(db_url):
    store = Store(db_url, secret=SECRET)
    for name, roles in {"admin": ["admin"], "alice": ["user"]}.items():
        store.add_user(name, f"pw-{name}", roles)
    store.put_template(FLOW)
    yield Client(store)
    store.close()


def start_and_finish(store: Store) -> str:
    iid = store.start("flow", {}, store.user("alice")).id
    store.complete(iid, "a", store.engine.bookmark(store.get(iid), "a"), {"n": 1},
                   actor="alice")
    return iid


def read_feed(call, limit: int, want: int, after: str | None = None) -> tuple[list, str]:
    """Pages until `want` items came (PostgreSQL holds back rows of transactions newer
    than the oldest running on the server, other tests' too)."""
    items, deadline = [], time.monotonic() + 60
    while True:
        r = call("admin", "GET", "/api/events", limit=limit,
                 **({"after": after} if after else {}))
        assert r.status_code == 200, r.text
        page = r.json()
        items += page["items"]
        if page["next"] == after:
            assert page["items"] == []
            if len(items) >= want or time.monotonic() > deadline:
                return items, after
            time.sleep(0.05)
        after = page["next"]


def test_an_admin_reads_the_feed_page_by_page(call):
    iid = start_and_finish(call.store)
    items, end = read_feed(call, 2, 6)
    assert [(i["type"], i["uri"]) for i in items] == [
        ("instance.started", None), ("circle.entered", "a"), ("circle.left", "a"),
        ("circle.entered", "b"), ("circle.left", "b"), ("instance.completed", None)]
    assert {i["instance"] for i in items} == {iid} and {i["template"] for i in items} == {
        "flow"}
    assert items[1]["data"]["enter"] == {"hello": 1}
    assert items[4]["data"]["leave"] == ["done"]
    assert set(items[0]) == {"id", "cursor", "type", "instance", "template", "uri", "at",
                             "data"}
    # an item's cursor reads on after it
    r = call("admin", "GET", "/api/events", after=items[2]["cursor"], limit=1)
    assert [i["id"] for i in r.json()["items"]] == [items[3]["id"]]
    # nothing new: next is after
    r = call("admin", "GET", "/api/events", after=end)
    assert r.json() == {"items": [], "next": end}
    more = start_and_finish(call.store)
    again, _ = read_feed(call, 100, 6, end)
    assert {i["instance"] for i in again} == {more}


def test_the_feed_is_for_admins_and_refuses_bad_input(call):
    assert call(None, "GET", "/api/events").status_code == 401
    assert call("alice", "GET", "/api/events").status_code == 403
    for params in ({"limit": 0}, {"limit": 1001}, {"limit": "x"}, {"after": "nope"},
                   {"after": "1.2.3"}, {"after": "9" * 40}, {"after": "x" * 100}):
        r = call("admin", "GET", "/api/events", **params)
        assert r.status_code == 422, (params, r.text)
        assert "Traceback" not in r.text and r.json()["detail"]
    r = call("admin", "GET", "/api/events", after="nope")
    assert "not a cursor" in r.json()["detail"]


def test_webhooks_are_created_listed_and_deleted_and_the_secret_never_shown(call):
    r = call("admin", "POST", "/api/webhooks", HOOK)
    assert r.status_code == 201, r.text
    hook = r.json()
    assert hook["url"] == HOOK["url"] and hook["events"] == HOOK["events"]
    assert hook["state"] == "active" and hook["created_by"] == "admin"
    assert hook["deliveries"] == {"pending": 0, "delivered": 0, "failed": 0}
    seen = [r.text]
    for path in ("/api/webhooks", f"/api/webhooks/{hook['id']}",
                 f"/api/webhooks/{hook['id']}/deliveries"):
        r = call("admin", "GET", path)
        assert r.status_code == 200, r.text
        seen.append(r.text)
    assert call("admin", "GET", "/api/webhooks").json() == [hook]
    assert call("admin", "GET", f"/api/webhooks/{hook['id']}/deliveries").json() == []
    r = call("admin", "DELETE", f"/api/webhooks/{hook['id']}")
    assert r.status_code == 200 and r.json()["id"] == hook["id"]
    seen.append(r.text)
    assert not any(HOOK_SECRET in text or "secret" in text for text in seen)
    assert call("admin", "GET", f"/api/webhooks/{hook['id']}").status_code == 404
    assert call("admin", "DELETE", f"/api/webhooks/{hook['id']}").status_code == 404
    assert call("admin", "GET", "/api/webhooks").json() == []


def test_webhooks_are_for_admins(call):
    hook = call("admin", "POST", "/api/webhooks", HOOK).json()
    for method, path, body in (("POST", "/api/webhooks", HOOK), ("GET", "/api/webhooks", None),
                               ("GET", f"/api/webhooks/{hook['id']}", None),
                               ("GET", f"/api/webhooks/{hook['id']}/deliveries", None),
                               ("DELETE", f"/api/webhooks/{hook['id']}", None)):
        assert call(None, method, path, body).status_code == 401
        assert call("alice", method, path, body).status_code == 403, (method, path)
    assert len(call.store.webhooks()) == 1


BAD = [
    ({"url": "ftp://127.0.0.1/x"}, "only http and https"),
    ({"url": "file:///etc/passwd"}, "only http and https"),
    ({"url": "javascript:alert(1)"}, "only http and https"),
    ({"url": "http://"}, "no host"),
    ({"url": "http://10.1.2.3/hook"}, "private"),
    ({"url": "http://192.168.0.1/hook"}, "private"),
    ({"url": "http://169.254.169.254/latest/meta-data"}, "link-local"),
    ({"url": "http://[::1]:8080/hook"}, "loopback"),
    ({"url": "http://0.0.0.0/hook"}, "unspecified"),
    ({"url": "http://127.0.0.1:99999/hook"}, "url"),
    ({"url": "http://" + "a" * 2100 + ".com/"}, "2000"),
    ({"url": ""}, "url"),
    ({"events": []}, "events"),
    ({"events": ["circle.exploded"]}, "events"),
    ({"events": "circle.left"}, "events"),
    ({"secret": "short"}, "secret"),
    ({"secret": "s" * 201}, "secret"),
    ({"secret": None}, "secret"),
]


def test_a_bad_webhook_is_refused_with_the_reason(call):
    for change, words in BAD:
        r = call("admin", "POST", "/api/webhooks", {**HOOK, **change})
        assert r.status_code == 422, (change, r.text)
        assert words in r.text and "Traceback" not in r.text, (change, r.text)
    assert call.store.webhooks() == []


def test_loopback_needs_the_allow_list(call, monkeypatch):
    monkeypatch.delenv("BPFLOW_EGRESS_ALLOW", raising=False)
    r = call("admin", "POST", "/api/webhooks", HOOK)
    assert r.status_code == 422 and "loopback" in r.json()["detail"], r.text
    assert "BPFLOW_EGRESS_ALLOW" in r.json()["detail"]
    monkeypatch.setenv("BPFLOW_EGRESS_ALLOW", "127.0.0.0/8")
    assert call("admin", "POST", "/api/webhooks", HOOK).status_code == 201


def test_a_tenant_has_a_limited_number_of_webhooks(call):
    from bpflow.store.feed import MAX_WEBHOOKS
    for _ in range(MAX_WEBHOOKS):
        assert call("admin", "POST", "/api/webhooks", HOOK).status_code == 201
    r = call("admin", "POST", "/api/webhooks", HOOK)
    assert r.status_code == 409 and "delete one" in r.json()["detail"]


def test_webhook_ids_out_of_range_are_422_and_unknown_ones_404(call):
    for bad in ("0", "-1", "x", str(2 ** 40)):
        assert call("admin", "GET", f"/api/webhooks/{bad}").status_code == 422
    assert call("admin", "GET", "/api/webhooks/12345").status_code == 404
    assert call("admin", "GET", "/api/webhooks/12345/deliveries").status_code == 404
    hook = call("admin", "POST", "/api/webhooks", HOOK).json()
    for bad in (0, 501, "x"):
        r = call("admin", "GET", f"/api/webhooks/{hook['id']}/deliveries", limit=bad)
        assert r.status_code == 422


def test_a_new_webhook_starts_at_the_end_of_the_feed(call):
    start_and_finish(call.store)
    read_feed(call, 100, 6)  # (PostgreSQL: wait until the start's rows are out)
    hook = call("admin", "POST", "/api/webhooks", HOOK).json()
    assert call.store.of(None).hand_out() == 0  # the past is not delivered
    start_and_finish(call.store)
    deadline = time.monotonic() + 60
    handed = 0
    while handed < 3 and time.monotonic() < deadline:
        handed += call.store.of(None).hand_out()
        time.sleep(0.02)
    assert handed == 3  # circle.left of a and b, instance.completed
    r = call("admin", "GET", f"/api/webhooks/{hook['id']}/deliveries")
    assert [d["type"] for d in r.json()] == ["instance.completed", "circle.left",
                                             "circle.left"]
    assert all(d["state"] == "pending" and d["attempts"] == 0 for d in r.json())
    assert call("admin", "GET", f"/api/webhooks/{hook['id']}").json()["deliveries"][
        "pending"] == 3
