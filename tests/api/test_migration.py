"""Migrating running instances between template versions and where a circle is, over the
REST API (SPEC §11), on SQLite and PostgreSQL: every instance state of the example
templates of upload/workflow/ moved from v1 to a changed v2 (a circle added, removed,
renamed through the map), dry runs and refusals that change nothing, migrated instances
going on at v2, a migration racing a step, who may do it."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path

import pytest
from sqlalchemy import select

from bpflow.store.tables import instances_t
from bpflow.store.tables import users_t as _any_table
from tests.conftest import settled

WORKFLOWS = Path(__file__).resolve().parents[2] / "upload" / "workflow"
CLAIM = {"amount": 12, "reason": "train", "manager": "ann"}


def load(name: str) -> dict:
    return json.loads((WORKFLOWS / f"{name}.json").read_text())


def claim_v2() -> dict:
    """reimbursement v2: `review` renamed `check` (the map says so), a new confirmation
    `notify` after `pay`."""
    body = copy.deepcopy(load("reimbursement"))
    circles = body["circles"]
    review = next(c for c in circles if c["uri"] == "review")
    review["uri"] = "check"
    next(c for c in circles if c["uri"] == "pay")["deps"] = [["check"]]
    circles.insert(4, {"uri": "notify", "description": "Tell the claimant",
                       "deps": [["pay"]], "box": {"confirm": "Tell ${user.username}?"}})
    next(c for c in circles if c["uri"] == "done")["deps"] = [["notify"]]
    return body


def order_v2() -> dict:
    """order v2: one warehouse (`south` removed), no pricing (`invoice` removed), `ship`
    renamed `dispatch`."""
    body = copy.deepcopy(load("order"))
    circles = [c for c in body["circles"] if c["uri"] not in ("south", "invoice")]
    for c in circles:
        if c["uri"] == "reserved":
            c["deps"] = [["north"]]
        if c["uri"] == "ship":
            c["uri"], c["deps"] = "dispatch", [["reserved"]]
            c["box"] = {"confirm": "Ship ${order.quantity} × ${order.item}?"}
        if c["uri"] == "done":
            c["deps"] = [["dispatch"]]
    body["circles"] = circles
    return body


def call(api, who, method, path, body=None, expect=200, **params):
    clients = api.__dict__.setdefault("kept_clients", {})  # one each: a client costs ~0.1 s
    if who not in clients:
        clients[who] = api.client(who)
    r = clients[who].request(method, path, json=body, params=params or None)
    assert r.status_code == expect, r.text
    return r


def get(api, iid, who="admin") -> dict:
    return call(api, who, "GET", f"/api/instances/{iid}").json()


def complete(api, iid, uri, result=None, who="admin", bookmark=None, expect=200):
    mark = bookmark or get(api, iid, who)["circles"][uri]["bookmark"]
    assert mark, f"{uri} has no bookmark for {who}"
    return call(api, who, "POST", f"/api/instances/{iid}/circles/{uri}/complete",
                {"bookmark": mark, "result": result}, expect=expect)


def start(api, template, who="alice", **inputs) -> str:
    body = {"template": template, "version": 1, "inputs": inputs}
    return call(api, who, "POST", "/api/instances", body, expect=201).json()["id"]


def migrate(api, name, who="admin", expect=200, **body):
    return call(api, who, "POST", f"/api/templates/{name}/migrate",
                {"from": 1, "to": 2, **body}, expect=expect)


@pytest.fixture(autouse=True)
def _closed_clients(api):
    yield
    for client in api.__dict__.pop("kept_clients", {}).values():
        client.close()


def dump(store) -> dict:
    """Every row of every table."""
    with store.reader() as conn:
        return {t.name: sorted(tuple(map(repr, r)) for r in conn.execute(select(t)))
                for t in _any_table.metadata.sorted_tables}


@pytest.fixture
def claims(api):
    """reimbursement v1 with an instance in every state, then v2 uploaded:
    at claim, at review, at pay (its bookmark kept), failed at pay, suspended, completed,
    terminated."""
    api.store.put_template(load("reimbursement"))
    ids = {}
    ids["at_claim"] = start(api, "reimbursement")
    for name in ("at_review", "at_pay", "failed", "suspended", "completed", "terminated"):
        iid = ids[name] = start(api, "reimbursement")
        complete(api, iid, "claim", CLAIM, who="alice")
    for name in ("at_review", "at_pay", "failed", "completed"):
        complete(api, ids[name], "approve", {"approved": True})
    for name in ("at_pay", "failed", "completed"):
        complete(api, ids[name], "review", {"accepted": True})
    ids["pay_bookmark"] = get(api, ids["at_pay"])["circles"]["pay"]["bookmark"]
    complete(api, ids["completed"], "pay", {"reference": "R1"})
    mark = get(api, ids["failed"])["circles"]["pay"]["bookmark"]
    call(api, "admin", "POST", f"/api/instances/{ids['failed']}/circles/pay/fail",
         {"bookmark": mark, "reason": "no money"})
    call(api, "admin", "POST", f"/api/instances/{ids['suspended']}/suspend")
    call(api, "admin", "POST", f"/api/instances/{ids['terminated']}/abort", {"reason": "x"})
    statuses = {k: get(api, v)["status"] for k, v in ids.items() if k != "pay_bookmark"}
    assert statuses == {"at_claim": "running", "at_review": "running", "at_pay": "running",
                        "failed": "failed", "suspended": "suspended",
                        "completed": "completed", "terminated": "terminated"}
    call(api, "admin", "POST", "/api/templates", claim_v2(), expect=201)
    return ids


def test_every_instance_state_migrates_or_is_refused_and_goes_on_at_v2(api, claims):
    ids = claims
    before = dump(api.store)
    dry = migrate(api, "reimbursement", map={"review": "check"}, dry_run=True).json()
    assert dump(api.store) == before  # a dry run changes nothing
    movable = {ids[k] for k in ("at_claim", "at_review", "at_pay", "failed", "suspended")}
    assert set(dry["migrated"]) == movable and dry["refused"] == []

    done = migrate(api, "reimbursement", map={"review": "check"}).json()
    assert set(done["migrated"]) == movable and done == dry
    for name in ("completed", "terminated"):  # not among the default instances: untouched
        inst = get(api, ids[name])
        assert inst["version"] == 1 and "notify" not in inst["circles"]
    # named explicitly, they are refused with their reasons
    told = migrate(api, "reimbursement", instances=[ids["completed"], ids["terminated"]],
                   map={"review": "check"}).json()
    assert told["migrated"] == []
    assert {r["id"]: r["reasons"] for r in told["refused"]} == {
        ids["completed"]: [
            "it is completed: only running, failed or suspended instances are migrated"],
        ids["terminated"]: [
            "it is terminated: only running, failed or suspended instances are migrated"]}

    at_pay = get(api, ids["at_pay"])
    assert at_pay["version"] == 2 and set(at_pay["circles"]) == {
        "claim", "approve", "check", "pay", "notify", "done"}
    assert at_pay["circles"]["check"]["state"] == "success"  # renamed, result kept
    assert at_pay["circles"]["claim"]["result"] == CLAIM
    assert at_pay["circles"]["notify"]["state"] == "waiting"
    # the bookmark handed out at v1 still completes the kept ready circle
    complete(api, ids["at_pay"], "pay", {"reference": "R2"}, bookmark=ids["pay_bookmark"])
    assert get(api, ids["at_pay"])["circles"]["notify"]["ready"]
    done = complete(api, ids["at_pay"], "notify", {"accepted": True}).json()
    assert done["status"] == "completed"

    at_review = get(api, ids["at_review"])
    assert at_review["circles"]["check"]["ready"] and "review" not in at_review["circles"]
    complete(api, ids["at_review"], "check", {"accepted": True})
    complete(api, ids["at_review"], "pay", {"reference": "R3"})
    assert complete(api, ids["at_review"], "notify", {"accepted": True}).json()[
        "status"] == "completed"

    failed = get(api, ids["failed"])
    assert failed["status"] == "failed" and failed["version"] == 2
    assert failed["circles"]["pay"]["state"] == "failure"
    suspended = get(api, ids["suspended"])
    assert suspended["status"] == "suspended" and suspended["version"] == 2
    resumed = call(api, "admin", "POST", f"/api/instances/{ids['suspended']}/resume").json()
    assert resumed["circles"]["approve"]["ready"]

    history = call(api, "admin", "GET", f"/api/instances/{ids['at_claim']}/history").json()
    event = history[-1]
    assert event["kind"] == "instance_migrated" and event["actor"] == "admin"
    assert event["data"] == {"from": 1, "to": 2, "map": {"review": "check"},
                             "added": ["notify"], "removed": []}
    moved = _migrated_in_feed(api, len(movable))
    assert {i["instance"] for i in moved} == movable
    assert all(i["data"]["added"] == ["notify"] for i in moved)
    with api.store.reader() as conn:  # the rows say v2 too, as a fresh read does
        rows = dict(conn.execute(select(instances_t.c.id, instances_t.c.version)).all())
    assert {rows[i] for i in movable} == {2}
    assert api.store.get(ids["at_claim"]).template.plan.nodes.keys() == set(
        at_pay["circles"])


def test_a_removed_circle_holding_progress_refuses_and_changes_nothing(api):
    api.store.put_template(load("order"))
    fresh = start(api, "order", who="admin", customer="Ada")  # an example for admins
    ordered = start(api, "order", who="admin", customer="Bob")
    complete(api, ordered, "order", {"item": "desk", "quantity": 2}, who="admin")
    assert get(api, ordered)["circles"]["invoice"]["state"] == "success"
    call(api, "admin", "POST", "/api/templates", order_v2(), expect=201)
    before = dump(api.store)
    out = migrate(api, "order", map={"ship": "dispatch"}).json()
    assert out["migrated"] == [fresh]
    assert out["refused"] == [{"id": ordered, "reasons": [
        "circle 'invoice' is removed and its result is progress no kept circle carries on"]}]
    after = dump(api.store)

    def of(rows, iid):  # the rows that name the refused instance
        return {t: [r for r in rs if repr(iid) in r] for t, rs in rows.items()}
    assert of(after, ordered) == of(before, ordered)  # untouched
    assert get(api, ordered)["version"] == 1
    moved = get(api, fresh)
    assert set(moved["circles"]) == {"order", "north", "reserved", "dispatch", "done"}
    moved = complete(api, fresh, "order", {"item": "lamp", "quantity": 1}, who="admin").json()
    assert moved["circles"]["north"]["ready"] and "south" not in moved["circles"]


def test_bad_requests_are_answered_clearly(api, claims):
    r = migrate(api, "reimbursement", map={"nope": "check", "review": "gone"}, expect=422)
    assert "'nope' is no circle of the old version" in r.json()["detail"]
    assert "'gone' is no circle of the new version" in r.json()["detail"]
    migrate(api, "reimbursement", who="alice", expect=403)
    migrate(api, "nothing", expect=404)
    call(api, "admin", "POST", "/api/templates/reimbursement/migrate", {"from": 1, "to": 9},
         expect=404)
    migrate(api, "reimbursement", instances=["0" * 32], expect=404)
    r = call(api, "admin", "POST", "/api/templates/reimbursement/migrate",
             {"from": 2, "to": 2}, expect=422)
    assert "already" in r.json()["detail"]
    call(api, "admin", "POST", "/api/templates/reimbursement/migrate", {"from": "x"},
         expect=422)
    call(api, "admin", "GET", "/api/templates/reimbursement/circles/claim/instances",
         state="asleep", expect=422)
    call(api, "admin", "GET", "/api/templates/nothing/circles/claim/instances",
         state="ready", expect=404)


def test_where_a_circle_is(api, claims):
    ids = claims
    path = "/api/templates/reimbursement/circles/{}/instances"

    def at(uri, who="admin", **params):
        r = call(api, who, "GET", path.format(uri), **params)
        listed = [i["id"] for i in r.json()]
        assert int(r.headers["X-Total-Count"]) >= len(listed)
        return listed, int(r.headers["X-Total-Count"])

    assert set(at("claim", state="ready")[0]) == {ids["at_claim"]}
    # ready: entered and waiting, in an instance that is not over (suspended included)
    assert at("approve", state="ready")[0] == [ids["suspended"]]
    assert set(at("pay", state="failure")[0]) == {ids["failed"]}
    assert at("pay", state="success")[0] == [ids["completed"]]
    assert len(at("done", state="waiting")[0]) == 6  # ready ones count as waiting too
    assert set(at("approve", state="skipped")[0]) == set()
    page, total = at("claim", state="success", limit=2, offset=1)
    assert len(page) == 2 and total == 6
    assert at("claim", state="success", version=2) == ([], 0)
    assert at("claim", "bob", state="success") == ([], 0)  # only their own
    assert len(at("claim", "alice", state="success")[0]) == 6
    migrate(api, "reimbursement", map={"review": "check"})
    assert at("check", state="ready", version=2)[0] == [ids["at_review"]]
    assert at("review", state="ready") == ([], 0)


def test_where_a_circle_is_asks_for_a_circle_the_template_has(api):
    """A uri no version of the template has is a 404 that says so, not an empty list
    (SPEC §11); a circle of an older version only, or one inside a nested flow (its
    dotted id), is listed."""
    api.store.put_template(load("reimbursement"))
    api.store.put_template({"name": "trip", "kind": "linear", "circles": [
        {"uri": "book"},
        {"uri": "main", "box": {"action": {"type": "flow", "template": "reimbursement"}}}]})
    trip = start(api, "trip")  # `book` has no box: the nested flow is entered at once
    path = "/api/templates/{}/circles/{}/instances"
    r = call(api, "alice", "GET", path.format("reimbursement", "nope"), state="ready",
             expect=404)
    assert r.json()["detail"] == "template 'reimbursement' has no circle 'nope'"
    r = call(api, "admin", "GET", path.format("nothing", "claim"), state="ready", expect=404)
    assert r.json()["detail"] == "no template 'nothing'"
    call(api, "admin", "GET", path.format("trip", "claim"), state="ready", expect=404)
    nested = call(api, "admin", "GET", path.format("trip", "main.claim"), state="ready")
    assert [i["id"] for i in nested.json()] == [trip]
    call(api, "admin", "POST", "/api/templates", claim_v2(), expect=201)  # review renamed
    gone = call(api, "admin", "GET", path.format("reimbursement", "review"), state="ready")
    assert (gone.json(), gone.headers["X-Total-Count"]) == ([], "0")


def test_a_migration_racing_a_step_loses_nothing(api):
    """A migration and a completion of the same instance at the same moment: each is one
    compare-and-set step, so both apply, once each, in one order or the other."""
    api.store.put_template(load("reimbursement"))
    ids = [start(api, "reimbursement") for _ in range(3)]
    marks = {iid: get(api, iid, "alice")["circles"]["claim"]["bookmark"] for iid in ids}
    call(api, "admin", "POST", "/api/templates", claim_v2(), expect=201)
    for iid in ids:
        barrier = threading.Barrier(2)
        answers = {}

        def step(iid=iid, barrier=barrier, answers=answers):
            barrier.wait()
            answers["step"] = complete(api, iid, "claim", CLAIM, who="alice",
                                       bookmark=marks[iid])

        def move(iid=iid, barrier=barrier, answers=answers):
            barrier.wait()
            answers["move"] = migrate(api, "reimbursement", instances=[iid],
                                      map={"review": "check"})
        threads = [threading.Thread(target=step), threading.Thread(target=move)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers["move"].json() == {"migrated": [iid], "refused": []}
        assert answers["step"].status_code == 200
        inst = get(api, iid)
        assert inst["version"] == 2 and "notify" in inst["circles"]
        assert inst["circles"]["claim"]["state"] == "success"
        assert inst["circles"]["claim"]["result"] == CLAIM
        assert inst["circles"]["approve"]["ready"]  # settled after both
        history = call(api, "admin", "GET", f"/api/instances/{iid}/history").json()
        kinds = [e["kind"] for e in history]
        assert kinds.count("instance_migrated") == 1
        assert kinds.count("circle_succeeded") == 1
        assert [e["seq"] for e in history] == list(range(1, len(history) + 1))


def test_a_migration_between_a_completion_and_its_answer_changes_no_answer(api, monkeypatch):
    """The interleaving behind a rare 500 of the race above, forced: the completion's step
    commits, and while its answer is being made (after its first circle) a migration of
    the same instance to v2 runs to its end. The completion answers the instance as its
    step left it, at v1: the migration's step works on a copy of its own, it does not
    change the instance the completion answers (it did: v1's circles, whose `review` v2's
    circles lack, with v2's runs; KeyError 'review', a 500)."""
    from bpflow.api import schemas

    api.store.put_template(load("reimbursement"))
    iid = start(api, "reimbursement")
    mark = get(api, iid, "alice")["circles"]["claim"]["bookmark"]
    call(api, "admin", "POST", "/api/templates", claim_v2(), expect=201)
    moved: dict = {}
    pending = schemas.public_pending

    def migration_meanwhile(run):
        if not moved:  # once, as another request would (a thread of the server's pool)
            worker = threading.Thread(target=lambda: moved.update(
                api.store.migrate_instances("reimbursement", 1, 2, {"review": "check"},
                                            [iid], actor="admin")))
            worker.start()
            worker.join()
        return pending(run)
    monkeypatch.setattr(schemas, "public_pending", migration_meanwhile)
    answer = complete(api, iid, "claim", CLAIM, who="alice", bookmark=mark).json()
    assert moved == {"migrated": [iid], "refused": []}
    assert answer["version"] == 1
    assert list(answer["circles"]) == ["claim", "approve", "review", "pay", "done"]
    assert answer["circles"]["claim"]["state"] == "success"
    assert answer["circles"]["claim"]["result"] == CLAIM
    assert answer["circles"]["approve"]["ready"]
    monkeypatch.undo()
    inst = get(api, iid)  # and the migration came after the step
    assert inst["version"] == 2
    assert set(inst["circles"]) == {"claim", "approve", "check", "pay", "notify", "done"}
    assert inst["circles"]["claim"]["result"] == CLAIM and inst["circles"]["approve"]["ready"]


def _migrated_in_feed(api, count: int, wait_s: float = 20.0) -> list[dict]:
    """The feed's `instance.migrated` items once `count` are there (or what is there after
    `wait_s`). On PostgreSQL the feed holds back what committed after the oldest
    transaction still open anywhere on the server (so that nothing is skipped): with other
    tests writing at the same time, it shows what committed a moment later."""
    def moved():
        feed = call(api, "admin", "GET", "/api/events", limit=1000).json()["items"]
        return [i for i in feed if i["type"] == "instance.migrated"]
    return settled(moved, lambda got: len(got) >= count, wait_s)
