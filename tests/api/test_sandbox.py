"""Trying a draft (SPEC §16 "Try it") over HTTP, in-process: a sandbox driven circle by
circle (forms, an approval, HTTP answers, a signal, timers fired), in no list, count,
feed, webhook, quota, task list or mailbox, never touched by the worker, and deleted a
day after it started."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bpflow.access import Caller
from bpflow.api import create_app
from bpflow.store import Store
from bpflow.worker import Worker
from tests.api.helpers import Client
from tests.conftest import SECRET
from tests.http_server import LocalServer

START = json.dumps({"inputs": {"who": "me"}})


def flow(url: str) -> dict:
    """A form (reminded every 10 minutes, assigned to bob), an HTTP call retried once, an
    approval by ann, an hour's timer, a signal, the end."""
    return {"name": "expense", "inputs": {"who": "string"}, "circles": [
        {"uri": "claim", "assign": {"users": ["bob"]}, "remind": {"every": 600},
         "box": {"form": [{"name": "amount", "type": "integer", "required": True}]}},
        {"uri": "book", "deps": [["claim"]], "retry": [5],
         "box": {"action": {"type": "http", "method": "POST", "url": url,
                            "json": {"amount": "${claim.amount}"}}}},
        {"uri": "ok", "deps": [["book"]],
         "box": {"action": {"type": "approval", "to": "ann", "subject": "please"}}},
        {"uri": "wait", "deps": [["ok"]], "box": {"action": {"type": "timer", "delay": 3600}}},
        {"uri": "paid", "deps": [["wait"]],
         "box": {"action": {"type": "signal", "name": "paid", "key": "k"}}},
        {"uri": "end", "deps": [["paid"]]}]}


@pytest.fixture
def world(db_url):
    store = Store(db_url, secret=SECRET)
    for name, roles in {"admin": ["admin"], "dee": ["designer"], "dan": ["designer"],
                        "bob": ["user"], "ann": ["approver"]}.items():
        store.add_user(name, f"pw-{name}", roles)
    with LocalServer() as server:
        yield store, Client(store, create_app(lambda: store)), server
    store.close()


def draft(call, body: dict, who: str = "dee") -> int:
    r = call("POST", "/api/drafts", json.dumps({"body": body}), who)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def move(call, here: str, uri: str, verb: str, body: dict | None = None,
         status: int = 200) -> dict:
    r = call("POST", f"{here}/circles/{uri}/{verb}", json.dumps(body or {}), "dee")
    assert r.status_code == status, r.text
    return r.json()


def test_a_draft_is_tried_circle_by_circle_and_nothing_leaves(world):
    store, call, server = world
    here = f"/api/drafts/{draft(call, flow(server.url + '/ok'))}/try"
    r = call("POST", here, json.dumps({"inputs": {"who": "me"}}), "dee")
    assert r.status_code == 201, r.text
    state = r.json()
    assert state["circles"]["claim"]["can"] == ["fill", "fire"]
    assert state["circles"]["book"]["can"] == [] and state["status"] == "running"
    # the reminder fires at once (recorded; nobody is mailed), then the form is filled
    state = move(call, here, "claim", "fire")
    assert [e["data"] for e in store.history(state["instance"], ["urge_sent"])] == [
        {"users": ["bob"], "remind": True}]
    assert move(call, here, "claim", "fill", {"values": {"amount": "x"}}, 422)
    state = move(call, here, "claim", "fill", {"values": {"amount": 40}})
    assert state["circles"]["book"]["can"] == ["answer"]
    # the HTTP call: a 500 the designer gives is a failure, retried when fired; then a 2xx
    state = move(call, here, "book", "answer", {"status": 500, "body": {"e": "down"}})
    book = state["circles"]["book"]
    assert (book["state"], book["can"], book["attempts"]) == ("waiting", ["fire"], 1)
    state = move(call, here, "book", "fire")
    state = move(call, here, "book", "answer", {"status": 201, "body": {"booked": 7}})
    assert state["circles"]["book"]["result"] == {"booked": 7}
    assert state["circles"]["ok"]["can"] == ["decide"]
    move(call, here, "ok", "decide", {"decision": "maybe"}, 422)
    move(call, here, "ok", "fill", {"values": {}}, 409)
    state = move(call, here, "ok", "decide", {"decision": "approved", "comment": "fine"})
    assert state["circles"]["ok"]["result"] == {"approved": True, "decisions": [
        {"approver": "dee", "decision": "approved", "comment": "fine"}]}
    wait = state["circles"]["wait"]
    assert wait["can"] == ["fire"] and wait["fires_at"] > datetime.now(UTC).isoformat()
    state = move(call, here, "wait", "fire")
    assert state["circles"]["wait"]["state"] == "success"
    state = move(call, here, "paid", "answer", {"body": {"amount": 40}})
    assert (state["status"], state["circles"]["paid"]["result"]) == ("completed",
                                                                     {"amount": 40})
    assert [(s["uri"], s["state"]) for s in state["path"]] == [
        ("claim", "success"), ("book", "waiting"), ("book", "success"), ("ok", "success"),
        ("wait", "success"), ("paid", "success"), ("end", "success")]
    assert call("GET", here, None, "dee").json() == state
    # nothing was sent: the worker has nothing to do and the server heard no request
    Worker(store).run_once()
    assert server.recorder.requests == []
    assert [m for who in ("ann", "bob") for m in store.mail_page(
        Caller.of(store.user(who)), None, None, 50, 0)] == []
    assert call("DELETE", here, None, "dee").status_code == 204
    assert call("GET", here, None, "dee").status_code == 404


def test_a_sandbox_is_in_no_list_count_feed_or_quota(world):
    store, call, _ = world
    store.put_template({**flow("http://127.0.0.1:9/x"), "name": "real"})
    hook = call("POST", "/api/webhooks", json.dumps(
        {"url": "http://127.0.0.1:9/hook", "events": ["instance.started", "circle.entered"],
         "secret": "s" * 16}), "admin")
    assert hook.status_code == 201, hook.text
    before = store.usage()
    here = f"/api/drafts/{draft(call, flow('http://127.0.0.1:9/x'))}/try"
    r = call("POST", here, START, "dee")
    assert r.status_code == 201, r.text
    iid = r.json()["instance"]
    store.start_sandbox("other", {**flow("http://127.0.0.1:9/x"), "name": "real"},
                        {"who": "me"}, store.user("dee"))  # named as a template: no version of it
    assert store.usage() == before
    for who in ("admin", "dee"):
        for path in ("/api/instances", "/api/instances?q=expense", "/api/tasks",
                     "/api/templates", "/api/mailbox", "/api/events",
                     "/api/templates/real/stats"):
            r = call("GET", path, None, who)
            assert r.status_code in (200, 403) and iid not in r.text and "~try" not in r.text, \
                (who, path, r.text)
        for path in (f"/api/instances/{iid}", f"/api/instances/{iid}/history"):
            assert call("GET", path, None, who).status_code == 404
    assert call("GET", "/api/templates/real", None, "admin").json()["version"] == 1
    assert call("GET", "/api/tasks?assigned=all", None, "bob").json() == []
    assert store.taking_part(Caller.of(store.user("bob"))) == []
    assert store.stats("real")["instances"] == {}
    assert store.list_instances(limit=100)[1] == 0
    # the worker: not due, no webhook delivery; a signal reaches no sandbox
    worker = Worker(store)
    assert worker.run_once() == 0
    worker.run_duties()
    assert call("GET", f"/api/webhooks/{hook.json()['id']}/deliveries", None,
                "admin").json() == []
    assert store.waiting("paid", "k") == []
    assert call("GET", here, None, "dee").json()["status"] == "running"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_who_may_try_and_clear_refusals(world):
    store, call, _ = world
    body = flow("http://127.0.0.1:9/x")
    here = f"/api/drafts/{draft(call, body)}/try"
    assert call("GET", here, None, "dee").status_code == 404  # not being tried
    assert call("POST", here, START, "bob").status_code == 403
    assert call("POST", here, START, "dan").status_code == 404  # someone else's draft
    assert call("POST", here, START, "admin").status_code == 201  # the tenant's admin
    assert call("GET", here, None, "dan").status_code == 404
    move(call, here, "nowhere", "fill", {"values": {}}, 404)
    move(call, here, "book", "answer", {"body": {}}, 409)
    r = call("POST", f"{here}/circles/end/fire", "{}", "dee", headers={"Accept-Language": "zh-CN"})
    assert (r.status_code, r.json()["detail"]) == (409, "节点“end”现在没有待触发的定时")
    move(call, here, "end", "fire", None, 409)
    move(call, here, "book", "answer", {"status": 99}, 422)
    move(call, here, "claim", "fill", {"values": {"x": "y" * 70000}}, 422)
    broken = draft(call, {"name": "broken", "circles": [{"uri": "a", "deps": [["b"]]}]})
    r = call("POST", f"/api/drafts/{broken}/try", None, "dee")
    assert r.status_code == 422 and r.json()["detail"]["errors"], r.text


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_sandbox_is_deleted_a_day_after_it_started(world):
    store, call, _ = world
    here = f"/api/drafts/{draft(call, flow('http://127.0.0.1:9/x'))}/try"
    r = call("POST", here, START, "dee")
    assert r.status_code == 201, r.text
    iid = r.json()["instance"]
    worker = Worker(store)
    worker.run_duties()
    assert call("GET", here, None, "dee").status_code == 200
    later = datetime.now(UTC) + timedelta(days=1, minutes=1)
    store.clock = lambda: later  # the worker's view shares it
    store.of(None).clock = store.clock
    worker.run_duties()
    assert call("GET", here, None, "dee").status_code == 404
    assert store.get_many([iid]) == {}
    assert not any(n.startswith("~") for n in store.template_versions())


def test_a_try_started_on_one_backend_is_driven_from_another(world, db_url):
    """Scaled out (SPEC §14): two backends, each its own store, on one database. A try
    started on one is driven from the other; tried again after an edit (its row
    replaced, on SQLite perhaps under the same id), each backend runs the new body."""
    store, call, _ = world
    other = Store(db_url, secret=SECRET)
    try:
        there = Client(other, create_app(lambda: other))
        first = {"name": "twice", "circles": [
            {"uri": "ask", "box": {"form": [{"name": "n", "type": "integer"}]}},
            {"uri": "ok", "deps": [["ask"]],
             "box": {"action": {"type": "approval", "to": "ann"}}},
            {"uri": "end", "deps": [["ok"]]}]}
        draft_id = draft(call, first)
        here = f"/api/drafts/{draft_id}/try"
        assert call("POST", here, None, "dee").status_code == 201
        move(there, here, "ask", "fill", {"values": {"n": 1}})  # the other backend
        assert call("GET", here, None, "dee").json()["circles"]["ok"]["can"] == ["decide"]
        # edited and tried again on this backend, once the other knows the first body
        second = {**first, "circles": [
            {"uri": "form", "box": {"form": [{"name": "m", "type": "string"}]}},
            {"uri": "fin", "deps": [["form"]]}]}
        r = call("PUT", f"/api/drafts/{draft_id}", json.dumps({"body": second}), "dee")
        assert r.status_code == 200, r.text
        assert call("POST", here, None, "dee").status_code == 201
        for backend in (there, call):
            assert set(backend("GET", here, None, "dee").json()["circles"]) == {"form", "fin"}
        state = move(there, here, "form", "fill", {"values": {"m": "x"}})
        assert state["status"] == "completed"
        assert [(s["uri"], s["state"]) for s in state["path"]] == [("form", "success"),
                                                                   ("fin", "success")]
        # and back: the other backend starts the first body again, this one drives it
        r = call("PUT", f"/api/drafts/{draft_id}", json.dumps({"body": first}), "dee")
        assert there("POST", here, None, "dee").status_code == 201
        assert move(call, here, "ask", "fill", {"values": {"n": 3}})["circles"]["ok"][
            "can"] == ["decide"]
        assert call("DELETE", here, None, "dee").status_code == 204
        assert there("GET", here, None, "dee").status_code == 404
    finally:
        other.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_an_approval_is_sent_back_to_any_earlier_step_with_a_comment(world):
    """As a real flow's (SPEC §15): the steps it may go back to, listed by their
    descriptions in the reader's language, the return made to the one chosen, the
    comment kept; nobody is mailed."""
    store, call, _ = world
    body = {"name": "chain", "circles": [
        {"uri": "ask", "description": {"en": "Ask", "zh-CN": "申请"},
         "box": {"form": [{"name": "n", "type": "integer"}]}},
        {"uri": "check", "deps": [["ask"]], "box": {"form": [{"name": "ok", "type": "boolean"}]}},
        {"uri": "sign", "deps": [["check"]],
         "box": {"action": {"type": "approval", "to": ["ann", "bob"], "quorum": "any"}}},
        {"uri": "end", "deps": [["sign"]]}]}
    here = f"/api/drafts/{draft(call, body)}/try"
    assert call("POST", here, None, "dee").status_code == 201
    move(call, here, "ask", "fill", {"values": {"n": 1}})
    r = call("GET", f"{here}/circles/sign/return-targets", None, "dee")
    assert r.status_code == 409, r.text  # nothing to decide there yet
    move(call, here, "check", "fill", {"values": {"ok": True}})
    r = call("GET", f"{here}/circles/sign/return-targets", None, "dee",
             headers={"Accept-Language": "zh-CN"})
    assert r.status_code == 200, r.text
    assert r.json() == [{"to": "ask", "description": "申请"},
                        {"to": "check", "description": "check"},
                        {"to": "@start", "description": "申请"}]
    assert call("GET", f"{here}/circles/sign/return-targets", None, "dan").status_code == 404
    move(call, here, "sign", "decide", {"decision": "returned", "to": "end"}, 422)
    move(call, here, "sign", "decide", {"decision": "approved", "to": "ask"}, 422)
    state = move(call, here, "sign", "decide",
                 {"decision": "returned", "to": "ask", "comment": "the amount is wrong"})
    assert state["circles"]["ask"]["can"] == ["fill"]
    assert state["circles"]["check"]["state"] == state["circles"]["sign"]["state"] == "waiting"
    assert [(s["uri"], s["state"]) for s in state["path"]][-3:] == [
        ("ask", "waiting"), ("check", "waiting"), ("sign", "waiting")]
    [back] = store.history(state["instance"], ["circle_returned"])
    assert (back["actor"], back["data"]["comment"], back["data"]["back_to"]) == (
        "dee", "the amount is wrong", ["ask"])
    move(call, here, "ask", "fill", {"values": {"n": 2}})
    move(call, here, "check", "fill", {"values": {"ok": True}})
    state = move(call, here, "sign", "decide", {"decision": "approved", "comment": "fine now"})
    assert state["status"] == "completed" and state["circles"]["sign"]["result"][
        "decisions"] == [{"approver": "dee", "decision": "approved", "comment": "fine now"}]
    assert [m for who in ("ann", "bob") for m in store.mail_page(
        Caller.of(store.user(who)), None, None, 50, 0)] == []
