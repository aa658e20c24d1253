"""Signals over the REST API (SPEC §11), on SQLite and PostgreSQL: a signal completes every
circle of the caller's tenant waiting for its name and key, with its data as result; who
may send one; identical signals at once complete a circle once; a signal circle completed
by its bookmark by an integration user; `enter`/`leave` in the history."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from bpflow.api import create_app
from bpflow.auth import issue_token
from bpflow.store import Store
from bpflow.store.tables import circles_t, events_t, instances_t
from engine.boxes import SIGNAL_NAME
from tests.conftest import SECRET, run_async

ENTER = {"note": ["any", 1, None, {"json": True}]}
PAY = {"name": "pay", "inputs": {"order": "any"}, "circles": [
    {"uri": "wait", "enter": ENTER, "leave": [1, "two"],
     "box": {"action": {"type": "signal", "name": "paid", "key": "${workflow.input.order}"}}},
    {"uri": "ship", "deps": [["wait"]], "box": {"form": [{"name": "ok", "type": "boolean"}]}},
    {"uri": "done", "deps": [["ship"]]}]}
TWO = {"name": "two", "circles": [  # two circles of one instance wait for the same signal
    {"uri": "a", "box": {"action": {"type": "signal", "name": "go", "key": 7}}},
    {"uri": "b", "box": {"action": {"type": "signal", "name": "go", "key": "7"}}},
    {"uri": "end", "deps": [["a"], ["b"]]}]}
PEOPLE = {"default": {"admin": ["admin"], "alice": ["user"], "ann": ["approver"],
                       "ivy": ["integration"]},
          "acme": {"alice-acme": ["user"], "ivy-acme": ["integration"]}}


@pytest.fixture
def store(db_url):
    s = Store(db_url, secret=SECRET)
    s.add_tenant("acme")
    for tenant, people in PEOPLE.items():
        t = s.of(tenant)
        for name, roles in people.items():
            t.add_user(name, f"pw-{name}", roles)
        t.put_template(PAY)
        t.put_template(TWO)
    yield s
    s.close()


class Api:
    """Requests to the app in-process (its event loop: the route's async path)."""

    def __init__(self, store: Store):
        self.store, self.app = store, create_app(lambda: store)

    def headers(self, who: str | None) -> dict[str, str]:
        if who is None:
            return {}
        tenant = "acme" if who.endswith("-acme") else "default"
        user = self.store.of(tenant).user(who)
        return {"Authorization": "Bearer " + issue_token(user, SECRET)}

    async def send(self, who: str | None, method: str, path: str, body: Any = None,
                   client: httpx.AsyncClient | None = None) -> httpx.Response:
        if client is None:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.request(method, path, json=body, headers=self.headers(who))
        return await client.request(method, path, json=body, headers=self.headers(who))

    def __call__(self, who: str | None, method: str, path: str, body: Any = None
                 ) -> httpx.Response:
        return run_async(self.send(who, method, path, body))

    def signal(self, who: str, name: str, body: Any, expect: int = 200) -> Any:
        r = self(who, "POST", f"/api/signals/{name}", body)
        assert r.status_code == expect, r.text
        return r.json()


def start(store: Store, order: Any, tenant: str = "default", name: str = "pay"):
    s = store.of(tenant)
    starter = s.user("alice" if tenant == "default" else "alice-acme")
    return s.start(name, {"order": order} if name == "pay" else {}, starter)


def rows(store: Store) -> list[tuple]:
    """Every instance, circle and event row (to see that nothing changed)."""
    with store.reader() as conn:
        return [tuple(map(repr, r)) for t in (instances_t, circles_t, events_t)
                for r in conn.execute(select(t).order_by(*t.primary_key.columns)).all()]


def test_a_signal_completes_the_waiting_circle_with_its_data_and_the_flow_moves_on(store):
    api = Api(store)
    inst = start(store, "A-1")
    other = start(store, "A-2")
    assert inst.circles["wait"].pending == {"signal": {"name": "paid", "key": "A-1"}}
    assert api.signal("ivy", "paid", {"key": "A-1", "data": {"amount": 12.5}}) == {
        "delivered": 1}
    now = store.get(inst.id)
    assert now.circles["wait"].state == "success"
    assert now.circles["wait"].result == {"amount": 12.5}
    assert "ship" in store.engine.ready(now)  # the flow moved on
    [done] = [e for e in store.history(inst.id) if e["kind"] == "circle_succeeded"]
    assert done["actor"] == "ivy" and done["circle"] == "wait"
    assert store.get(other.id).circles["wait"].state == "waiting"  # its key is another
    # the signal column is cleared with it: sent again, it meets nothing
    assert api.signal("admin", "paid", {"key": "A-1", "data": 1}) == {"delivered": 0}
    assert api.signal("admin", "paid", {"key": "A-2"}) == {"delivered": 1}
    assert store.get(other.id).circles["wait"].result is None


def test_keys_meet_as_text_42_and_the_string_42_alike(store):
    api = Api(store)
    number, text, big = start(store, 42), start(store, "42"), start(store, 2**62)
    assert api.signal("ivy", "paid", {"key": "43"}) == {"delivered": 0}
    assert api.signal("ivy", "paid", {"key": 42, "data": "n"}) == {"delivered": 2}
    assert {store.get(i.id).circles["wait"].result for i in (number, text)} == {"n"}
    assert api.signal("ivy", "paid", {"key": str(2**62)}) == {"delivered": 1}
    assert store.get(big.id).circles["wait"].state == "success"
    empty = start(store, None)  # a key rendered from null is the empty key
    assert api.signal("ivy", "paid", {}) == {"delivered": 1}
    assert store.get(empty.id).circles["wait"].state == "success"


def test_a_signal_nobody_waits_for_delivers_nothing_and_changes_nothing(store):
    api = Api(store)
    start(store, "x")
    before = rows(store)
    assert api.signal("ivy", "paid", {"key": "y", "data": {"a": 1}}) == {"delivered": 0}
    assert api.signal("ivy", "unpaid", {"key": "x"}) == {"delivered": 0}
    assert rows(store) == before


def test_another_tenants_waiting_circle_is_never_reached(store):
    api = Api(store)
    mine, theirs = start(store, "k"), start(store, "k", tenant="acme")
    acme = store.of("acme")
    before = acme.get(theirs.id).to_dict()
    assert api.signal("ivy", "paid", {"key": "k"}) == {"delivered": 1}
    assert acme.get(theirs.id).to_dict() == before
    assert store.get(mine.id).circles["wait"].state == "success"
    assert api.signal("ivy-acme", "paid", {"key": "k"}) == {"delivered": 1}
    assert acme.get(theirs.id).circles["wait"].state == "success"


def test_who_may_send_signals(store):
    api = Api(store)
    inst = start(store, "w")
    for who in ("alice", "ann"):
        assert api.signal(who, "paid", {"key": "w"}, expect=403)["detail"] == (
            "only admins and integration users may send signals")
    assert api(None, "POST", "/api/signals/paid", {"key": "w"}).status_code == 401
    assert store.get(inst.id).circles["wait"].state == "waiting"
    assert api.signal("ivy", "paid", {"key": "w"}) == {"delivered": 1}


BAD = [("bad name!", {"key": "w"}), ("x" * 101, {}), ("a%0A", {}), ("%C3%A9", {}),
       ("paid", {"key": True}), ("paid", {"key": 1.5}), ("paid", {"key": {"a": 1}}),
       ("paid", {"key": "k" * 301}), ("paid", {"key": 2**64}), ("paid", {"data": "x" * 70000}),
       ("paid", [1]), ("paid", "text")]


def test_bad_names_and_bodies_are_422(sqlite_store):
    api = Api(sqlite_store)
    for name, body in BAD:
        r = api("admin", "POST", f"/api/signals/{name}", body)
        assert r.status_code == 422, (name, body, r.text)
        assert r.json()["detail"] and "Traceback" not in r.text
    for name in ("paid", "a.b:c-d_e", "x" * 100):  # what the DSL takes, the route takes
        assert SIGNAL_NAME.match(name)
        assert api.signal("admin", name, {"key": "nobody"}) == {"delivered": 0}
    assert api.signal("admin", "paid", {"key": "k" * 300, "data": {"a": [1]}}) == {
        "delivered": 0}


def test_two_circles_waiting_for_the_same_signal_both_complete(store):
    api = Api(store)
    one, two = start(store, None, name="two"), start(store, None, name="two")
    assert api.signal("admin", "go", {"key": "7", "data": [1]}) == {"delivered": 4}
    for inst in (one, two):
        now = store.get(inst.id)
        assert now.status == "completed"
        assert now.circles["a"].result == now.circles["b"].result == [1]


def test_identical_signals_at_once_complete_a_circle_once(store):
    api = Api(store)
    insts = [start(store, "same") for _ in range(3)]

    async def burst() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=api.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await asyncio.gather(*(
                api.send("ivy", "POST", "/api/signals/paid", {"key": "same", "data": n}, c)
                for n in range(6)))
    answers = run_async(burst())
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    assert sum(r.json()["delivered"] for r in answers) == 3
    for inst in insts:
        done = [e for e in store.history(inst.id)
                if e["kind"] == "circle_succeeded" and e["circle"] == "wait"]
        assert len(done) == 1


def test_identical_signals_from_threads_complete_a_circle_once(store):
    insts = [start(store, "t") for _ in range(4)]
    counts: list[int] = []
    gate = threading.Barrier(4)

    def send(n: int) -> None:
        gate.wait()
        counts.append(store.signal("paid", "t", n, "ivy"))
    threads = [threading.Thread(target=send, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts) == 4 and len(counts) == 4
    for inst in insts:
        assert store.get(inst.id).circles["wait"].state == "success"


def test_an_integration_user_completes_a_signal_circle_by_its_bookmark(store):
    api = Api(store)
    inst = start(store, "b")
    seen = api("ivy", "GET", f"/api/instances/{inst.id}").json()
    mark = seen["circles"]["wait"]["bookmark"]
    assert mark == store.engine.bookmark(store.get(inst.id), "wait")
    assert api("alice", "GET", f"/api/instances/{inst.id}").json()[
        "circles"]["wait"]["bookmark"] is None  # the starter does not signal
    r = api("alice", "POST", f"/api/instances/{inst.id}/circles/wait/complete",
            {"bookmark": mark, "result": 1})
    assert r.status_code == 403, r.text
    r = api("ivy", "POST", f"/api/instances/{inst.id}/circles/wait/complete",
            {"bookmark": mark, "result": {"by": "bookmark"}})
    assert r.status_code == 200, r.text
    assert r.json()["circles"]["wait"]["result"] == {"by": "bookmark"}
    # only signal circles, and only while one waits: the next circle is not theirs
    now = store.get(inst.id)
    ship = store.engine.bookmark(now, "ship")
    r = api("ivy", "POST", f"/api/instances/{inst.id}/circles/ship/complete",
            {"bookmark": ship, "result": {"ok": True}})
    assert r.status_code == 404, r.text
    assert api("ivy", "GET", f"/api/instances/{inst.id}").status_code == 404
    assert api.signal("ivy", "paid", {"key": "b"}) == {"delivered": 0}  # used already


@pytest.mark.parametrize("who", ["admin", "ivy"])
def test_those_who_send_signals_get_the_bookmark_and_complete_with_it(store, who):
    """A waiting signal circle carries its bookmark for admins and integration users, in
    the start's answer, the instance's and the answer of a step; completing with it
    works, and the starter, who may not signal, sees none and may not use it."""
    api = Api(store)
    r = api(who, "POST", "/api/instances", {"template": "pay", "inputs": {"order": who}})
    assert r.status_code == 201, r.text
    inst = r.json()["id"]
    mark = r.json()["circles"]["wait"]["bookmark"]
    assert mark is not None and mark == api(who, "GET", f"/api/instances/{inst}").json()[
        "circles"]["wait"]["bookmark"]
    alice = start(store, "other")
    seen = api(who, "GET", f"/api/instances/{alice.id}").json()["circles"]["wait"]
    assert seen["bookmark"] == store.engine.bookmark(alice, "wait")
    assert api("alice", "GET", f"/api/instances/{alice.id}").json()["circles"]["wait"][
        "bookmark"] is None
    r = api(who, "POST", f"/api/instances/{inst}/circles/wait/complete",
            {"bookmark": mark, "result": {"paid": True}})
    assert r.status_code == 200, r.text
    assert r.json()["circles"]["wait"]["state"] == "success"
    r = api(who, "POST", f"/api/instances/{alice.id}/circles/wait/complete",
            {"bookmark": seen["bookmark"], "result": {"paid": 2}})
    assert r.status_code == 200, r.text
    assert store.get(alice.id).circles["wait"].result == {"paid": 2}


def test_an_integration_user_fails_a_signal_circle_but_no_other(store):
    api = Api(store)
    inst = start(store, "f")
    mark = store.engine.bookmark(inst, "wait")
    r = api("ivy-acme", "POST", f"/api/instances/{inst.id}/circles/wait/fail",
            {"bookmark": mark, "reason": "no"})
    assert r.status_code == 404, r.text  # another tenant's
    r = api("ivy", "POST", f"/api/instances/{inst.id}/circles/wait/fail",
            {"bookmark": mark, "reason": "payment refused"})
    assert r.status_code == 200, r.text
    assert r.json()["circles"]["wait"]["reason"] == "payment refused"


def test_enter_and_leave_go_verbatim_into_the_history(store):
    api = Api(store)
    inst = start(store, "e")
    api.signal("ivy", "paid", {"key": "e", "data": 5})
    history = store.history(inst.id)
    [ready] = [e for e in history if e["kind"] == "circle_ready" and e["circle"] == "wait"]
    [left] = [e for e in history if e["kind"] == "circle_succeeded" and e["circle"] == "wait"]
    assert ready["data"]["enter"] == ENTER
    assert left["data"]["leave"] == [1, "two"]
    assert all("enter" not in (e["data"] or {}) for e in history if e["circle"] == "ship")


def test_signals_of_two_tenants_looked_up_together_stay_in_their_tenants(store):
    """Signals arriving together are looked up in one batch: each still finds its own
    tenant's circles only."""
    api = Api(store)
    mine = [start(store, n) for n in range(3)]
    theirs = [start(store, n, tenant="acme") for n in range(3)]

    async def burst() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=api.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await asyncio.gather(*(
                api.send(who, "POST", "/api/signals/paid", {"key": n, "data": who}, c)
                for n in range(3) for who in ("ivy", "ivy-acme")))
    answers = run_async(burst())
    assert [r.json() for r in answers] == [{"delivered": 1}] * 6
    acme = store.of("acme")
    assert {store.get(i.id).circles["wait"].result for i in mine} == {"ivy"}
    assert {acme.get(i.id).circles["wait"].result for i in theirs} == {"ivy-acme"}
