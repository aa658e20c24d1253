"""Crowds over the API (SPEC §11), on SQLite and PostgreSQL: POST /api/instances/bulk starts
one instance per user (the user its starter: theirs to see, their task), named by
`users` or by `role`, all of them or none (every refusal is a clear 4xx and stores
nothing), and GET /api/batches/{batch}/stats counts the batch as its instances are."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from sqlalchemy import func, select

from bpflow.api import create_app
from bpflow.store import Store
from bpflow.store.tables import (
    audience_t,
    batches_t,
    circles_t,
    events_t,
    instances_t,
)
from tests.api.helpers import FORM, HAND, NEEDS, Client
from tests.conftest import SECRET

PEOPLE = {"admin": ["admin"], "alice": ["user", "crowd"], "bob": ["user", "crowd"],
          "carol": ["user"], "dan": ["user", "crowd"]}  # dan is disabled
TABLES = (instances_t, circles_t, events_t, audience_t, batches_t)


@pytest.fixture
def client(db_url):
    store = Store(db_url, secret=SECRET)
    for name, roles in PEOPLE.items():
        store.add_user(name, f"pw-{name}", roles)
    for body in (FORM, NEEDS, HAND):
        store.put_template(body)
    store.disable_user("dan")
    c = Client(store, create_app(lambda: store))
    yield c
    store.close()


def bulk(client, who="admin", **body):
    return client("POST", "/api/instances/bulk", json.dumps(body), who=who)


def rows(store: Store) -> dict[str, int]:
    with store.reader() as conn:
        return {t.name: conn.execute(select(func.count()).select_from(t)).scalar()
                for t in TABLES}


def stats(client, batch: str, who="admin") -> dict[str, Any]:
    r = client("GET", f"/api/batches/{batch}/stats", who=who)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_crowd_starts_one_instance_per_user_each_its_starter(client):
    r = bulk(client, template="simple", users=["alice", "bob", "alice", "carol"])
    assert r.status_code == 201, r.text
    batch = r.json()["batch"]
    assert r.json() == {"batch": batch, "started": 3}
    for name in ("alice", "bob", "carol"):
        listed = client("GET", "/api/instances", who=name).json()
        assert len(listed) == 1, listed
        assert listed[0]["user"]["username"] == name and listed[0]["template"] == "simple"
        inst = client("GET", f"/api/instances/{listed[0]['id']}", who=name).json()
        assert inst["circles"]["a"]["state"] == "waiting"
        tasks = client("GET", "/api/tasks", who=name).json()  # the first circle is theirs
        assert [(t["instance"], t["uri"]) for t in tasks] == [(inst["id"], "a")], tasks
    assert len(client("GET", "/api/instances?limit=500", who="admin").json()) == 3
    assert stats(client, batch) == {
        "batch": batch, "template": "simple", "version": 1, "started": 3,
        "circles": {c: {"waiting": 3, "success": 0, "failure": 0, "skipped": 0}
                    for c in ("a", "b", "end")},
        "instances": {"running": 3}}
    with client.store.reader() as conn:
        stored = conn.execute(select(instances_t.c.user_id, instances_t.c.user,
                                     instances_t.c.tenant).where(
            instances_t.c.batch == batch)).all()
        row = conn.execute(select(batches_t)).one()
    ids = {n: client.store.user(n)["id"] for n in ("alice", "bob", "carol")}
    assert sorted((u, rec["username"], rec["id"], t) for u, rec, t in stored) == sorted(
        (ids[n], n, ids[n], "default") for n in ids)
    assert (row.id, row.tenant, row.template, row.version, row.started, row.created_by) == (
        batch, "default", "simple", 1, 3, "admin")


def test_a_role_names_its_enabled_users_and_the_instances_go_on_as_single_starts(client):
    r = bulk(client, template="simple", role="crowd")
    assert r.status_code == 201, r.text
    batch = r.json()["batch"]
    assert r.json()["started"] == 2  # alice and bob; dan is disabled, carol lacks the role
    mine = client("GET", "/api/instances", who="alice").json()[0]
    inst = client("GET", f"/api/instances/{mine['id']}", who="alice").json()
    mark = inst["circles"]["a"]["bookmark"]
    r = client("POST", f"/api/instances/{mine['id']}/circles/a/complete",
               json.dumps({"bookmark": mark, "result": {"n": 7}}), who="alice")
    assert r.status_code == 200, r.text
    assert r.json()["circles"]["a"]["state"] == "success"
    assert client("GET", "/api/instances", who="carol").json() == []
    counted = stats(client, batch)
    assert counted["circles"]["a"] == {"waiting": 1, "success": 1, "failure": 0, "skipped": 0}
    assert counted["instances"] == {"running": 2}
    history = client("GET", f"/api/instances/{mine['id']}/history", who="alice").json()
    assert [e["kind"] for e in history][:2] == ["instance_started", "circle_ready"]
    assert history[0]["actor"] == "alice"


REFUSED = [  # (who, body, status, words the detail holds)
    ("admin", {"template": "simple", "users": ["alice", "nobody", "ghost"]}, 422,
     ["no user named", "'nobody'", "'ghost'"]),
    ("admin", {"template": "simple", "users": ["alice", "dan"]}, 422, ["disabled", "'dan'"]),
    ("admin", {"template": "simple", "users": []}, 422, ["empty"]),
    ("admin", {"template": "simple", "users": ["alice"], "role": "crowd"}, 422, ["not both"]),
    ("admin", {"template": "simple"}, 422, ["either"]),
    ("admin", {"template": "simple", "role": "nobody-has-it"}, 422, ["no enabled user"]),
    ("admin", {"template": "simple", "role": "Not A Role"}, 422, ["role"]),
    ("admin", {"template": "simple", "users": [""]}, 422, []),
    ("admin", {"template": "needs", "users": ["alice"], "inputs": {"amount": "lots"}}, 422,
     ["amount"]),
    ("admin", {"template": "needs", "users": ["alice"]}, 422, ["amount"]),
    ("admin", {"template": "nope", "users": ["alice"]}, 404, ["no template 'nope'"]),
    ("admin", {"template": "simple", "version": 9, "users": ["alice"]}, 404, ["version 9"]),
    ("alice", {"template": "simple", "users": ["alice"]}, 403, ["admins"]),
    (None, {"template": "simple", "users": ["alice"]}, 401, []),
]


def test_every_refusal_is_a_clear_4xx_and_stores_nothing(client):
    before = rows(client.store)
    for who, body, status, words in REFUSED:
        r = bulk(client, who=who, **body)
        assert r.status_code == status, (body, r.text)
        detail = json.dumps(r.json()["detail"])
        assert all(w in detail for w in words), (body, detail)
    client.store.retire_template("simple")
    r = bulk(client, template="simple", users=["alice"])
    assert r.status_code == 409 and "retired" in r.json()["detail"]
    assert rows(client.store) == before
    assert before["instances"] == 0


def test_the_quota_of_running_instances_holds_the_whole_crowd(client):
    client.store.set_quotas({"instances": 3})
    client.store.start("simple", user=client.store.user("carol"))
    r = bulk(client, template="simple", users=["alice", "bob", "carol"])
    assert r.status_code == 429, r.text
    assert "3 more" in r.json()["detail"]
    assert rows(client.store)["instances"] == 1 and rows(client.store)["batches"] == 0
    r = bulk(client, template="simple", users=["alice", "bob"])
    assert r.status_code == 201 and r.json()["started"] == 2


def test_batch_stats_are_for_admins_of_its_tenant(client):
    store = client.store
    store.add_tenant("acme")
    store.of("acme").add_user("boss", "pw-boss", ["admin"])
    store.of("acme").add_user("zed", "pw-zed", ["user"])
    store.of("acme").put_template(FORM)
    theirs, _ = store.of("acme").start_batch("simple", users=["zed"], created_by="boss")
    ours = bulk(client, template="simple", users=["bob"]).json()["batch"]
    assert client("GET", f"/api/batches/{theirs}/stats").status_code == 403
    r = client("GET", f"/api/batches/{theirs}/stats", who="admin")
    assert r.status_code == 404 and theirs in r.json()["detail"]
    assert client("GET", "/api/batches/nothing/stats", who="admin").status_code == 404
    assert client("GET", f"/api/batches/{ours}/stats", who="alice").status_code == 403
    assert client("GET", f"/api/batches/{ours}/stats", who=None).status_code == 401
    acme = Client(store.of("acme"), client.app)
    assert stats(acme, theirs, who="boss")["started"] == 1
    assert acme("GET", f"/api/batches/{ours}/stats", who="boss").status_code == 404
    r = bulk(client, template="simple", users=["zed"])  # another tenant's user: unknown
    assert r.status_code == 422 and "'zed'" in r.json()["detail"]


def test_a_crowd_with_due_work_wakes_the_worker(client):
    woken = []
    client.store.on_due(lambda: woken.append(1))
    assert bulk(client, template="simple", users=["alice"]).status_code == 201
    assert woken == []  # a person's form: nothing for the worker
    assert bulk(client, template="hand", users=["alice", "bob"]).status_code == 201
    assert woken == [1]  # an HTTP action: due at once, one wake for the batch


def test_a_body_over_the_limit_is_413_and_a_role_has_none(client):
    names = [f"user-{i:07d}" for i in range(80_000)]  # 1.2 MB of JSON: over 1 MiB
    r = bulk(client, template="simple", users=names)
    assert r.status_code == 413
    assert "larger than 1048576 bytes" in r.json()["detail"]
    assert rows(client.store)["instances"] == 0


def test_at_most_100000_names_even_under_a_larger_body_limit(client, monkeypatch):
    monkeypatch.setenv("BPFLOW_MAX_BODY", str(4 << 20))
    big = Client(client.store, create_app(lambda: client.store))
    r = big("POST", "/api/instances/bulk", json.dumps(
        {"template": "simple", "users": ["alice"] * 100_001}), who="admin")
    assert r.status_code == 422 and "100000" in r.text
    r = big("POST", "/api/instances/bulk", json.dumps(
        {"template": "simple", "users": ["alice"] * 100_000}), who="admin")
    assert r.status_code == 201 and r.json()["started"] == 1


def test_a_crowd_is_written_whole_or_not_at_all(client):
    """The writer gets the chunks as they are built: one failing half-way leaves no row."""
    store = client.store
    row = store._version_row("simple", None)
    people = [store.user(n) for n in ("alice", "bob", "carol")]

    def chunks():
        yield [store._new_instance(row, {}, people[0], batch="b1")[1]]
        yield [store._new_instance(row, {}, p, batch="b1")[1] for p in people[1:]]
        raise RuntimeError("the machine fell over")

    with pytest.raises(RuntimeError):
        store.driver.insert_many(chunks(), {
            "id": "b1", "tenant": "default", "template": "simple", "version": 1,
            "started": 3, "created_by": "admin", "created_at": store.clock()})
    assert set(rows(store).values()) == {0}
    store.driver.insert_many(iter([[store._new_instance(row, {}, people[0], batch="b2")[1]]]),
                             {"id": "b2", "tenant": "default", "template": "simple",
                              "version": 1, "started": 1, "created_by": "admin",
                              "created_at": store.clock()})
    assert store.batch_stats("b2")["instances"] == {"running": 1}


def test_building_a_crowd_makes_no_reference_cycles(client):
    """What lets `start_batch` build with the collector off: nothing is left to it."""
    store = client.store
    row = store._version_row("simple", None)
    alice = store.user("alice")
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            store._new_instance(row, {}, alice, batch="b")
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_batch_counts_follow_instances_migrated_to_another_version(client):
    batch = bulk(client, template="simple", users=["alice", "bob"]).json()["batch"]
    [moved] = client("GET", "/api/instances", who="alice").json()
    extra = {**FORM, "circles": [*FORM["circles"], {"uri": "extra", "deps": [["end"]]}]}
    assert client("POST", "/api/templates", json.dumps(extra), who="admin").status_code == 201
    r = client("POST", "/api/templates/simple/migrate", json.dumps(
        {"from": 1, "to": 2, "instances": [moved["id"]], "dry_run": False}), who="admin")
    assert r.status_code == 200 and r.json()["migrated"] == [moved["id"]], r.text
    counted = stats(client, batch)
    assert counted["circles"]["extra"] == {"waiting": 1, "success": 0, "failure": 0,
                                           "skipped": 0}
    assert counted["circles"]["a"]["waiting"] == 2 and counted["instances"] == {"running": 2}


def test_a_template_past_its_stop_at_starts_no_crowd(client):
    client.store.put_template({"name": "offer", "stop_at": "2020-01-01T00:00:00+00:00",
                               "circles": [{"uri": "a", "box": {"form": []}}]})
    r = bulk(client, template="offer", users=["alice", "bob"])
    assert r.status_code == 409 and "stopped taking starts" in r.json()["detail"], r.text
    assert rows(client.store)["instances"] == 0
