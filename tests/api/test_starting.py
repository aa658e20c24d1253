"""Starting over the API (SPEC §10), on SQLite and PostgreSQL, through the short path and
through the framework alike: retired templates (admins retire and restore them, lists say
so, a start is 409 while running instances go on), `starters` (403 for anyone else, admins
always may) and the `Idempotency-Key` (the same key from the same user answers the first
instance, also for requests sent at the same moment)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bpflow.api import create_app
from bpflow.store import Store
from tests.api.helpers import FORM, Client
from tests.conftest import SECRET, run_async

FINANCE = {"name": "payout", "starters": ["finance", "approver"], "circles": [
    {"uri": "pay", "box": {"form": [{"name": "amount", "type": "number"}]}}]}
PEOPLE = {"admin": ["admin"], "alice": ["user"], "fay": ["finance", "user"]}


@pytest.fixture(params=["short path", "framework"])
def client(request, db_url):
    store = Store(db_url, secret=SECRET)
    for name, roles in PEOPLE.items():
        store.add_user(name, f"pw-{name}", roles)
    store.put_template(FORM)
    store.put_template(FINANCE)
    app = create_app(lambda: store)
    if request.param == "framework":
        app.hot = None
    c = Client(store, app)
    c.hot = app.hot
    yield c
    store.close()


def start(client, who="alice", template="simple", key=None, **extra):
    headers = {} if key is None else {"Idempotency-Key": key}
    return client("POST", "/api/instances", f'{{"template": "{template}"}}'
                  if not extra else __import__("json").dumps({"template": template, **extra}),
                  who=who, headers=headers)


def listed(client, who="alice"):
    r = client("GET", "/api/templates", who=who)
    assert r.status_code == 200
    return {t["name"]: t["retired"] for t in r.json()}


# ---------------------------------------------------------------- retirement
def test_admins_retire_and_restore_and_a_retired_template_starts_no_more(client):
    running = start(client).json()
    assert listed(client) == {"payout": False, "simple": False}
    r = client("POST", "/api/templates/simple/retire", who="admin")
    assert r.status_code == 200 and r.json() == {"name": "simple", "retired": True}
    assert client("POST", "/api/templates/simple/retire", who="admin").json()["retired"]
    assert listed(client) == {"payout": False, "simple": True}
    assert listed(client, "alice") == listed(client, "admin")
    r = start(client)
    assert r.status_code == 409 and "retired" in r.json()["detail"]
    r = start(client, who="admin")
    assert r.status_code == 409
    mark = running["circles"]["a"]["bookmark"]  # a running instance goes on
    r = client("POST", f"/api/instances/{running['id']}/circles/a/complete",
               f'{{"bookmark": "{mark}", "result": {{"n": 1}}}}')
    assert r.status_code == 200, r.text
    r = client("POST", "/api/templates/simple/restore", who="admin")
    assert r.status_code == 200 and r.json() == {"name": "simple", "retired": False}
    assert listed(client)["simple"] is False
    assert start(client).status_code == 201


def test_only_admins_retire_and_only_known_templates(client):
    for action in ("retire", "restore"):
        assert client("POST", f"/api/templates/simple/{action}").status_code == 403
        assert client("POST", f"/api/templates/simple/{action}", who=None).status_code == 401
        r = client("POST", f"/api/templates/nothing/{action}", who="admin")
        assert r.status_code == 404 and "nothing" in r.json()["detail"]
    assert listed(client)["simple"] is False


def test_the_flow_signing_in_starts_cannot_be_retired(client):
    client.store.put_template({"name": "signin", "circles": [{"uri": "auth"}]})
    r = client("POST", "/api/templates/signin/retire", who="admin")
    assert r.status_code == 409 and "signing in" in r.json()["detail"]
    assert not client.store.is_retired("signin")


# ------------------------------------------------------------------ starters
def test_only_the_starters_roles_and_admins_start_a_template(client):
    r = start(client, "alice", "payout")
    assert r.status_code == 403
    assert r.json()["detail"] == "only finance, approver may start 'payout'"
    assert client.store.list_instances(None, "payout")[1] == 0
    assert start(client, "fay", "payout").status_code == 201
    assert start(client, "admin", "payout").status_code == 201
    assert start(client, "alice", "simple").status_code == 201  # no starters: everyone


def test_an_unknown_template_is_still_404_and_a_version_keeps_its_own_starters(client):
    assert start(client, "alice", "nothing").status_code == 404
    client.store.put_template({**FINANCE, "starters": ["user"]})  # version 2
    assert start(client, "alice", "payout").status_code == 201
    assert start(client, "alice", "payout", version=1).status_code == 403


# ----------------------------------------------------------- idempotent starts
def test_the_same_key_from_the_same_user_answers_the_first_instance(client):
    first = start(client, key="claim-2026-11-23")
    assert first.status_code == 201
    again = start(client, key="claim-2026-11-23")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert again.json()["circles"]["a"]["bookmark"]  # the same answer as the first
    other_user = start(client, "fay", key="claim-2026-11-23")
    assert other_user.status_code == 201 and other_user.json()["id"] != first.json()["id"]
    other_key = start(client, key="claim-2026-11-24")
    assert other_key.status_code == 201 and other_key.json()["id"] != first.json()["id"]
    assert start(client).status_code == 201  # no key: a start each time
    assert client.store.list_instances(None)[1] == 4


def test_a_repeated_key_answers_the_first_even_after_a_retirement(client):
    first = start(client, key="k")
    client.store.retire_template("simple")
    again = start(client, key="k")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert start(client, key="k2").status_code == 409


def test_a_refused_start_uses_no_key(client):
    assert start(client, "alice", "payout", key="k").status_code == 403
    assert start(client, "alice", "simple", key="k").status_code == 201


@pytest.mark.parametrize("key", ["", " ", " x", "x ", "x" * 201, "caf\u00e9", "tab\there",
                                 "\x7f"])
def test_a_key_must_be_1_to_200_printable_ascii_characters(client, key):
    r = client("POST", "/api/instances", '{"template": "simple"}',
               headers={"Idempotency-Key": key.encode("latin-1")})
    assert r.status_code == 422, (key, r.text)
    assert client.store.list_instances(None)[1] == 0


def test_the_longest_and_oddest_keys_are_fine(client):
    for key in ("x" * 200, "~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./ a"):
        first = start(client, key=key)
        assert first.status_code == 201
        assert start(client, key=key).json()["id"] == first.json()["id"]


def test_requests_with_one_key_sent_at_the_same_moment_start_one_instance(client):
    async def together():
        transport = httpx.ASGITransport(app=client.app)
        headers = {**client.auth("alice"), "Content-Type": "application/json",
                   "Idempotency-Key": "double-click"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await asyncio.gather(*[c.post("/api/instances", headers=headers,
                                                 content='{"template": "simple"}')
                                          for _ in range(5)])
    answers = run_async(together())
    codes = sorted(r.status_code for r in answers)
    assert codes == [200, 200, 200, 200, 201], [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert client.store.list_instances(None)[1] == 1
    if client.hot is not None:
        assert client.hot.served >= 5  # they took the short path


def test_over_http_requests_with_one_key_at_the_same_moment_start_one(api):
    api.store.put_template(FORM)

    def post(_):
        with api.client("alice") as c:
            return c.post("/api/instances", json={"template": "simple"},
                          headers={"Idempotency-Key": "same"})
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(post, range(6)))
    assert sorted(r.status_code for r in answers) == [200] * 5 + [201]
    assert len({r.json()["id"] for r in answers}) == 1
    assert api.store.list_instances(None)[1] == 1
