"""The short path for start, complete and signals (`HotPaths`) answers exactly as the framework
routes do: the same request against the app with and without it gets the same status,
headers that matter and body, for every kind of error and for success."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from bpflow.api import create_app
from bpflow.auth import issue_token
from bpflow.store import Store
from tests.conftest import SECRET, run_async

WAITS = {"name": "order", "inputs": {"order": "integer"}, "circles": [
    {"uri": "paid", "box": {"action": {"type": "signal", "name": "payment",
                                       "key": "${workflow.input.order}"}}},
    {"uri": "end", "deps": [["paid"]]}]}
FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer", "required": True}]}},
    {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "t", "type": "string"}]}},
    {"uri": "end", "deps": [["b"]]}]}


@pytest.fixture
def apps(db_url):
    store = Store(db_url, secret=SECRET)
    store.put_template(FORM)
    store.put_template(WAITS)
    for name in ("alice", "bob"):
        store.add_user(name, f"pw-{name}")
    store.add_user("gateway", "pw-gateway", ["integration"])
    hot, plain = create_app(lambda: store), create_app(lambda: store)
    plain.hot = None
    yield store, hot, plain
    store.close()


def bearer(store: Store, who: str, **kw) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(store.user(who), SECRET, **kw)}"}


def exchange(store, app, make):
    """Start a fresh instance of alice's, send the request `make` builds for it; the
    answer with the instance's id, bookmarks and times blanked out."""
    inst = store.start("simple", {}, store.user("alice"))
    method, path, headers, body = make(inst.id, store.engine.bookmark(inst, "a"))

    async def send():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.request(method, path, headers=headers, content=body)

    r = run_async(send())
    text = r.text.replace(inst.id, "ID")
    now = store.get(inst.id)
    for cid in now.circles:
        text = text.replace(store.engine.bookmark(now, cid), "BM")
    text = re.sub(r'"(created_at|updated_at)":"[^"]*"', r'"\1":0', text)
    return r.status_code, r.headers.get("www-authenticate"), r.headers.get("content-type"), text


def complete(store, who="alice", headers=None, body=None, path=None):
    """A request builder for `exchange`: alice's (or `who`'s) completion of circle a."""
    def make(iid, mark):
        return ("POST", (path or "/api/instances/{iid}/circles/a/complete").replace(
                    "{iid}", iid),
                headers if headers is not None else {**bearer(store, who), **JSON},
                (body or '{"bookmark": "{mark}", "result": {"n": 4}}').replace("{mark}", mark))
    return make


JSON = {"Content-Type": "application/json"}
CASES = {  # name: (request overrides, answered on the short path)
    "no token": ({"headers": JSON}, False),
    "forged token": ({"headers": {**JSON, "Authorization": "Bearer abc.def.ghi"}}, False),
    "basic auth": ({"headers": {**JSON, "Authorization": "Basic YWxpY2U6cHc="}}, False),
    "not json": ({"body": "{not json"}, False),
    "no bookmark": ({"body": '{"result": {"n": 1}}'}, False),
    "long bookmark": ({"body": '{"bookmark": "' + "x" * 201 + '"}'}, False),
    "text/plain": ({"headers": "TEXT"}, False),
    "wrong bookmark": ({"body": '{"bookmark": "nope", "result": {"n": 1}}'}, True),
    "unknown instance": ({"path": "/api/instances/nope/circles/a/complete"}, True),
    "unknown circle": ({"path": "/api/instances/{iid}/circles/zz/complete"}, True),
    "someone else's": ({"who": "bob"}, True),
    "invalid form": ({"body": '{"bookmark": "{mark}", "result": {"n": "many"}}'}, True),
    "success": ({}, True),
    "stale bookmark": ({"body": '{"bookmark": "{mark}x", "result": {"n": 1}}'}, True),
}


@pytest.mark.parametrize("name", CASES)
def test_complete_answers_as_the_framework_does(apps, name):
    store, hot, plain = apps
    over, short = CASES[name]
    answers, served = [], []
    for app in (hot, plain):
        opts = dict(over)
        who = opts.pop("who", "alice")
        if opts.get("headers") == "TEXT":
            opts["headers"] = {**bearer(store, who), "Content-Type": "text/plain"}
        before = app.hot.served if app.hot else 0
        answers.append(exchange(store, app, complete(store, who, **opts)))
        served.append((app.hot.served - before) if app.hot else None)
    assert answers[0] == answers[1]
    assert served[0] == (1 if short else 0)


def test_an_expired_token_is_refused_on_both_paths(apps):
    store, hot, plain = apps
    old = bearer(store, "alice", lifetime=1, now=time.time() - 100)
    for app in (hot, plain):
        status, challenge, _, _ = exchange(store, app, complete(
            store, headers={**old, **JSON}))
        assert (status, challenge) == (401, "Bearer")


@pytest.mark.parametrize("body, short", [('{"template": "simple"}', True),
                                         ('{"template": "missing"}', True),
                                         ('{"template": "simple", "version": 0}', False),
                                         ('{"template": ""}', False)])
def test_start_answers_as_the_framework_does(apps, body, short):
    store, hot, plain = apps
    answers = []
    for app in (hot, plain):
        before = app.hot.served if app.hot else 0

        async def send(app=app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.post("/api/instances", content=body,
                                    headers={**bearer(store, "alice"), **JSON})
        r = run_async(send())
        shape = r.json()
        if r.status_code == 201:
            shape = (shape["status"], sorted(shape["circles"]), shape["template"])
        answers.append((r.status_code, shape))
        if app.hot:
            assert app.hot.served - before == (1 if short else 0)
    assert answers[0] == answers[1]


SIGNALS = {  # path, body, who, answered on the short path
    "delivered": ("/api/signals/payment", '{"key": 7, "data": {"ok": true}}', "gateway", True),
    "nobody waits": ("/api/signals/payment", '{"key": 8}', "gateway", True),
    "not a signaller": ("/api/signals/payment", '{"key": 7}', "alice", True),
    "bad name": ("/api/signals/pay%20ment", '{"key": 7}', "gateway", False),
    "long name": ("/api/signals/" + "p" * 101, '{"key": 7}', "gateway", False),
    "bad key": ("/api/signals/payment", '{"key": 1.5}', "gateway", False),
    "no token": ("/api/signals/payment", '{"key": 7}', None, False),
}


@pytest.mark.parametrize("name", SIGNALS)
def test_signal_answers_as_the_framework_does(apps, name):
    """Each app signals an instance of its own waiting for order 7: the same answer, the
    same effect, and only the requests the framework would accept taken by the short
    path (a name breaking its pattern gets the framework's 422)."""
    store, hot, plain = apps
    path, body, who, short = SIGNALS[name]
    answers = []
    for app in (hot, plain):
        inst = store.start("order", {"order": 7}, store.user("alice"))
        before = app.hot.served if app.hot else 0
        headers = {**(bearer(store, who) if who else {}), **JSON}

        async def send(app=app, headers=headers):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.post(path, content=body, headers=headers)
        r = run_async(send())
        answers.append((r.status_code, r.json(), store.get(inst.id).circles["paid"].state))
        if app.hot:
            assert app.hot.served - before == (1 if short else 0)
        if answers[-1][1] == {"delivered": 1}:
            assert store.get(inst.id).circles["paid"].result == {"ok": True}
    assert answers[0] == answers[1]
    expected = {"delivered": (200, "success"), "nobody waits": (200, "waiting"),
                "not a signaller": (403, "waiting"), "no token": (401, "waiting")}
    if name in expected:
        assert (answers[0][0], answers[0][2]) == expected[name]
    else:
        assert answers[0][0] == 422 and answers[0][2] == "waiting"


def test_a_cached_token_still_expires():
    from bpflow.auth import TokenCache
    from bpflow.errors import Unauthorized
    cache = TokenCache(SECRET)
    token = issue_token({"id": 7, "username": "zed", "roles": ["user"]}, SECRET, lifetime=1)
    assert cache.verify(token).username == "zed"
    assert cache.verify(token).id == 7  # now from the cache
    time.sleep(1.1)
    with pytest.raises(Unauthorized):
        cache.verify(token)
    with pytest.raises(Unauthorized):
        cache.verify(token[:-2] + "xx")  # a changed token is checked, not looked up
