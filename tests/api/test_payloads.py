"""What every endpoint answers is what its OpenAPI response model describes: the body
validates against the route's declared model and has exactly the model's keys (nested
models too). The instance answers are built by hand and not checked per request, so this
is where they are held to their models; on the short path and off it."""

from __future__ import annotations

import types
import typing
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter

from bpflow.api import create_app
from bpflow.api.routes import ROUTERS
from bpflow.api.schemas import InstanceOut, InstanceSummary, summary_payload
from bpflow.auth import issue_token
from bpflow.store import Store
from bpflow.worker import Worker
from tests.conftest import SECRET, run_async

FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer", "required": True}]}},
    {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "t", "type": "string"}]}},
    {"uri": "end", "deps": [["b"]]}]}
FEEDS = {"name": "feeds", "circles": [  # a form that feeds an action (mail)
    {"uri": "q", "box": {"form": [{"name": "to", "type": "string"}],
                         "action": {"type": "mail", "to": "${form.to}", "subject": "hi"}}},
    {"uri": "end", "deps": [["q"]]}]}
ASK = {"name": "ask", "circles": [
    {"uri": "ok", "box": {"action": {"type": "approval", "to": "ann", "subject": "please"}}}]}
SIGNAL = {"name": "signal", "circles": [
    {"uri": "s", "box": {"action": {"type": "signal", "name": "paid", "key": "k"}}}]}
ROUTES = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]


def route_of(method: str, path: str) -> APIRoute:
    found = [r for r in ROUTES if method in r.methods and r.path_regex.match(path)]
    assert len(found) == 1, (method, path)
    return found[0]


def exact_keys(tp: Any, value: Any, where: str) -> None:
    """Every object in `value` that a model describes has exactly that model's keys."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        for i, item in enumerate(value):
            exact_keys(args[0], item, f"{where}[{i}]")
    elif origin is dict:
        for key, item in value.items():
            exact_keys(args[1], item, f"{where}.{key}")
    elif origin in (typing.Union, types.UnionType):
        if value is not None:
            exact_keys(next(a for a in args if a is not type(None)), value, where)
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        keys = {name: field.alias or name for name, field in tp.model_fields.items()}
        assert set(value) == set(keys.values()), f"{where}: {sorted(value)}"
        for name, field in tp.model_fields.items():
            exact_keys(field.annotation, value[keys[name]], f"{where}.{name}")


class Client:
    """Requests to the app in-process, each answer checked against its route's model."""

    def __init__(self, store: Store, app):
        self.store, self.app, self.checked = store, app, set()

    def __call__(self, who: str | None, method: str, path: str, json: Any = None,
                 expect: int = 200, files: Any = None, **params) -> Any:
        headers = {"Authorization": "Bearer " + issue_token(self.store.user(who), SECRET)} \
            if who else {}

        async def send():
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.request(method, path, json=json, headers=headers,
                                       params=params or None, files=files)
        r = run_async(send())
        assert r.status_code == expect, r.text
        route = route_of(method, path)
        self.checked.add((method, route.path))
        if r.status_code == 204:  # no content
            assert r.content == b""
            return None
        if route.response_model is None:  # bytes (a file): given as an attachment
            assert r.headers["content-disposition"].startswith("attachment")
            return r.content
        TypeAdapter(route.response_model).validate_json(r.content)
        exact_keys(route.response_model, r.json(), f"{method} {route.path}")
        return r.json()


@pytest.fixture
def store(db_url):
    s = Store(db_url, secret=SECRET)
    for name, roles in {"admin": ["admin"], "alice": ["user"], "ann": ["approver"]}.items():
        s.add_user(name, f"pw-{name}", roles)
    yield s
    s.close()


@pytest.mark.parametrize("short_path", [True, False])
def test_every_answer_has_exactly_its_models_keys(store, short_path):
    app = create_app(lambda: store)
    if not short_path:
        app.hot = None
    call = Client(store, app)
    call(None, "GET", "/api/health")
    call(None, "POST", "/api/auth/token", {"username": "alice", "password": "pw-alice"})
    for body in (FORM, FEEDS, ASK):
        call("admin", "POST", "/api/templates", body, expect=201)
    call("alice", "GET", "/api/templates")
    call("alice", "GET", "/api/templates/simple")
    call("alice", "GET", "/api/templates/simple/stats")
    assert call("admin", "POST", "/api/templates/feeds/retire")["retired"] is True
    assert call("admin", "POST", "/api/templates/feeds/restore")["retired"] is False

    inst = call("alice", "POST", "/api/instances", {"template": "simple"}, expect=201)
    base = f"/api/instances/{inst['id']}"
    call("alice", "GET", "/api/instances")
    call("alice", "GET", base)
    inst = call("alice", "POST", f"{base}/circles/a/complete",
                {"bookmark": inst["circles"]["a"]["bookmark"], "result": {"n": 1}})
    call("alice", "POST", f"{base}/circles/b/fail",
         {"bookmark": inst["circles"]["b"]["bookmark"], "reason": "no"})
    call("alice", "GET", f"{base}/reset-preview", uri="b")
    call("alice", "POST", f"{base}/reset", {"uri": "b"})
    call("alice", "POST", f"{base}/suspend")
    call("alice", "POST", f"{base}/resume")
    call("alice", "POST", f"{base}/abort", {"reason": "stop"})
    call("alice", "GET", f"{base}/history")

    feeds = call("alice", "POST", "/api/instances", {"template": "feeds"}, expect=201)
    sent = call("alice", "POST", f"/api/instances/{feeds['id']}/circles/q/complete",
                {"bookmark": feeds["circles"]["q"]["bookmark"], "result": {"to": "ann"}})
    assert sent["circles"]["q"]["pending"] == {"form_submitted": True}
    assert sent["circles"]["q"]["bookmark"] is None  # bpflow sends the mail

    asked = [store.start("ask", {}, store.user("alice")) for _ in range(2)]
    Worker(store).run_once()
    seen = call("alice", "GET", f"/api/instances/{asked[0].id}")
    assert seen["circles"]["ok"]["pending"] and seen["circles"]["ok"]["bookmark"] is None
    mark = store.engine.bookmark(store.get(asked[0].id), "ok")
    call("admin", "POST", f"/api/instances/{asked[0].id}/circles/ok/complete",
         {"bookmark": mark, "result": {"by": "hand"}})
    mail = call("ann", "GET", "/api/mailbox", kind="approval", status="pending")
    call("ann", "POST", f"/api/mailbox/{mail[0]['id']}/decision", {"decision": "approved"})
    third = store.start("ask", {}, store.user("alice"))
    Worker(store).run_once()
    [mine] = [m for m in call("ann", "GET", "/api/mailbox", kind="approval", status="pending")
              if m["instance"] == third.id]
    moved = call("ann", "POST", f"/api/mailbox/{mine['id']}/transfer",
                 {"to": "admin", "comment": "yours"})
    if store.user("dora") is None:
        store.add_user("dora", "pw-dora", ["user"])
    call("admin", "POST", f"/api/mailbox/{moved['id']}/delegate", {"to": "dora"})
    call(None, "POST", "/api/guest/messages", {"name": "Eve", "subject": "s", "body": "b"},
         expect=201)
    call(None, "POST", "/api/guest/default/messages", {"name": "Eve", "subject": "s",
                                                        "body": "b"}, expect=201)

    two = call("alice", "POST", "/api/instances", {"template": "simple"}, expect=201)
    base = f"/api/instances/{two['id']}"
    [task] = call("alice", "GET", "/api/tasks", assigned="me")
    assert task["uri"] == "a" and task["assignee"] == "alice"
    call("alice", "POST", f"{base}/circles/a/unclaim")
    call("alice", "POST", f"{base}/circles/a/claim")
    call("admin", "POST", f"{base}/circles/a/assign", {"to": "alice"})
    call("alice", "POST", f"{base}/circles/a/delegate", {"to": "ann", "comment": "have a look"})
    two = call("alice", "POST", f"{base}/circles/a/complete",
               {"bookmark": task["bookmark"], "result": {"n": 2}})
    assert two["circles"]["b"]["candidates"] == {"users": ["alice"], "roles": []}
    back = call("alice", "POST", f"{base}/circles/b/withdraw")
    assert back["circles"]["a"]["returned"]["kind"] == "withdrawn"
    call("alice", "POST", f"{base}/circles/a/complete",
         {"bookmark": back["circles"]["a"]["bookmark"], "result": {"n": 3}})
    assert [t["to"] for t in call("alice", "GET", f"{base}/circles/b/return-targets")] == [
        "a", "@start"]
    back = call("alice", "POST", f"{base}/circles/b/return", {"to": "a", "comment": "again"})
    assert back["circles"]["a"]["returned"]["answer"] == {"n": 3}

    [at_a] = call("alice", "GET", "/api/templates/simple/circles/a/instances", state="ready")
    assert at_a["id"] == two["id"]
    call("admin", "POST", "/api/templates", {**FORM, "title": "two"}, expect=201)
    moved = call("admin", "POST", "/api/templates/simple/migrate",
                 {"from": 1, "to": 2, "dry_run": True})
    assert moved["migrated"] == [two["id"]] and moved["refused"] == []

    hook = call("admin", "POST", "/api/webhooks", {"url": "http://127.0.0.1:9/h", "secret":
                                                   "s" * 16, "events": ["circle.left"]},
                expect=201)
    call("alice", "POST", f"{base}/abort", {"reason": "for the webhook"})
    store.of(None).hand_out()  # its deliveries (PostgreSQL: unless still held back)
    call("admin", "GET", "/api/events", limit=1000)
    call("admin", "GET", "/api/webhooks")
    call("admin", "GET", f"/api/webhooks/{hook['id']}")
    call("admin", "GET", f"/api/webhooks/{hook['id']}/deliveries")
    call("admin", "DELETE", f"/api/webhooks/{hook['id']}")

    call("admin", "POST", "/api/templates", SIGNAL, expect=201)
    call("alice", "POST", "/api/instances", {"template": "signal"}, expect=201)
    assert call("admin", "POST", "/api/signals/paid", {"key": "k", "data": {"x": 1}}) == {
        "delivered": 1}

    crowd = call("admin", "POST", "/api/instances/bulk", {"template": "simple",
                                                          "users": ["alice", "ann"]}, expect=201)
    assert crowd["started"] == 2
    assert call("admin", "GET", f"/api/batches/{crowd['batch']}/stats")["started"] == 2

    reset = call("admin", "POST", "/api/users/ann/password", {"password": "ann-new-password"})
    assert reset == {"username": "ann", "sessions_ended": True}
    call("alice", "POST", "/api/auth/password", {"current_password": "pw-alice",
                                                 "new_password": "alice-new-password"})

    # approvals as teams run them (SPEC §15): signers, copies, urges, comments, files,
    # substitutes
    round_of = store.start("ask", {}, store.user("alice"))
    Worker(store).run_once()
    [asked_ann] = [m for m in call("ann", "GET", "/api/mailbox", kind="approval",
                                   status="pending") if m["instance"] == round_of.id]
    call("ann", "POST", f"/api/mailbox/{asked_ann['id']}/signers",
         {"users": ["admin"], "where": "with", "comment": "you too"})
    call("alice", "DELETE", f"/api/mailbox/{asked_ann['id']}/signers", {"users": ["admin"]})
    here = f"/api/instances/{round_of.id}"
    call("alice", "POST", f"{here}/cc", {"users": ["dora"], "comment": "for your files"})
    call("alice", "GET", f"{here}/cc")
    call("alice", "POST", f"{here}/urge", {"comment": "please"})
    call("alice", "POST", f"{here}/comments", {"text": "the receipt is attached"}, expect=201)
    call("alice", "GET", f"{here}/comments")
    call("alice", "GET", f"{here}/files")
    pdf = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
    kept = call("alice", "POST", "/api/files", files={"file": ("receipt.pdf", pdf,
                                                                 "application/pdf")},
                expect=201)
    assert call("alice", "GET", f"/api/files/{kept['id']}") == pdf
    now = datetime.now(UTC)
    away = {"to": "admin", "from": now.isoformat(),
            "until": (now + timedelta(days=1)).isoformat()}
    call("ann", "PUT", "/api/me/substitute", away)
    call("ann", "GET", "/api/me/substitute")
    call("ann", "DELETE", "/api/me/substitute", expect=204)
    call("admin", "PUT", "/api/users/ann/substitute", {**away, "to": "dora"})
    call("admin", "GET", "/api/users/ann/substitute")
    call("admin", "DELETE", "/api/users/ann/substitute", expect=204)
    draft = call("admin", "POST", "/api/drafts", {"template": "simple"}, expect=201)
    call("admin", "GET", "/api/drafts")
    call("admin", "PUT", f"/api/drafts/{draft['id']}", {"body": {**FORM, "title": "t"}})
    call("admin", "GET", f"/api/drafts/{draft['id']}")
    call("admin", "POST", f"/api/drafts/{draft['id']}/publish", expect=201)
    draft = call("admin", "POST", "/api/drafts", {"body": {"name": "half"}}, expect=201)
    call("admin", "DELETE", f"/api/drafts/{draft['id']}", expect=204)
    tried = {"name": "tried", "circles": [*FEEDS["circles"][:1],
                                          {"uri": "ok", "deps": [["q"]], **ASK["circles"][0]},
                                          {"uri": "w", "deps": [["ok"]], "box": {"action": {
                                              "type": "timer", "delay": 60}}}]}
    draft = call("admin", "POST", "/api/drafts", {"body": tried}, expect=201)
    here = f"/api/drafts/{draft['id']}/try"  # Try it (SPEC §16)
    call("admin", "POST", here, {}, expect=201)
    call("admin", "POST", f"{here}/circles/q/fill", {"values": {"to": "ann"}})
    call("admin", "POST", f"{here}/circles/q/answer", {})
    call("admin", "GET", f"{here}/circles/ok/return-targets")
    call("admin", "POST", f"{here}/circles/ok/decide", {"decision": "approved"})
    call("admin", "POST", f"{here}/circles/w/fire")
    call("admin", "GET", here)
    call("admin", "DELETE", here, expect=204)
    call("admin", "GET", "/api/audit")  # the audit log (SPEC §18)
    # operations (SPEC §18): lists, a bulk operation and its progress, durations
    call("admin", "GET", "/api/operations/lists/instances", status="running", limit=5)
    call("admin", "GET", "/api/operations/lists/incidents")
    call("admin", "GET", "/api/operations/lists/overdue")
    started = call("admin", "POST", "/api/operations",
                   {"action": "suspend", "filter": {"template": "simple",  # times as sent
                                                    "started_after": "2000-01-01T00:00:00Z"}},
                   expect=202)
    Worker(store).run_duties()
    call("admin", "GET", f"/api/operations/{started['operation']}")
    call("admin", "GET", "/api/templates/simple/durations")

    assert call.checked == {(m, r.path) for r in ROUTES for m in r.methods}
    if short_path:
        assert app.hot.served == 10  # the four starts, five completions and the signal


def test_summary_payload_is_the_models_fields_in_iso_time(store):
    store.put_template(FORM)
    inst = store.start("simple", {}, store.user("alice"))
    record = inst.to_dict()
    record["created_at"] = inst.created_at  # a row from the database has datetimes
    out = summary_payload(record)
    assert list(out) == list(InstanceSummary.model_fields)
    assert out["created_at"] == inst.created_at.isoformat()
    InstanceSummary.model_validate(out)
    assert set(InstanceOut.model_fields) - set(InstanceSummary.model_fields) == {
        "variables", "circles", "history_url"}
