"""Substitutes over the REST API (SPEC §15), on SQLite and PostgreSQL: ann names bob; while
it is active bob is offered ann's task (`GET /api/tasks`), claims and completes it, and
decides her approval mail, which counts as hers and is recorded as "bob for ann"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bpflow.worker import Worker

TASK = {"name": "errand", "circles": [
    {"uri": "do", "description": "Run the errand", "assign": {"users": ["ann", "admin"]},
     "box": {"confirm": "Done?"}},
    {"uri": "end", "deps": [["do"]]}]}
APPROVE = {"name": "approve", "circles": [
    {"uri": "ok", "box": {"action": {"type": "approval", "to": "ann", "subject": "Please"}}},
    {"uri": "done", "deps": [["ok"]]}]}


def call(api, who, method, path, body=None, **kw):
    with api.client(who) as c:
        return c.request(method, path, json=body, **kw)


def period(start_hours=-1, end_hours=72):
    now = datetime.now(UTC)
    return {"from": (now + timedelta(hours=start_hours)).isoformat(),
            "until": (now + timedelta(hours=end_hours)).isoformat()}


@pytest.fixture
def away(api):
    """ann is away: bob is her substitute."""
    api.store.put_template(TASK)
    api.store.put_template(APPROVE)
    r = call(api, "ann", "PUT", "/api/me/substitute", {"to": "bob", **period()})
    assert r.status_code == 200, r.text
    return api


def test_a_substitution_is_read_changed_and_cleared(api):
    r = call(api, "ann", "PUT", "/api/me/substitute", {"to": "bob", **period(24, 48)})
    got = r.json()
    assert (r.status_code, got["user"], got["to"], got["active"], got["set_by"]) == \
        (200, "ann", "bob", False, "ann")
    assert call(api, "ann", "GET", "/api/me/substitute").json() == got
    assert call(api, "admin", "GET", "/api/users/ann/substitute").json() == got
    r = call(api, "admin", "PUT", "/api/users/ann/substitute", {"to": "alice", **period()})
    assert (r.json()["to"], r.json()["active"], r.json()["set_by"]) == ("alice", True, "admin")
    assert call(api, "ann", "DELETE", "/api/me/substitute").status_code == 204
    assert call(api, "ann", "GET", "/api/me/substitute").status_code == 404
    assert call(api, "admin", "DELETE", "/api/users/ann/substitute").status_code == 404
    assert call(api, "admin", "GET", "/api/users/nobody/substitute").status_code == 404


def test_the_substitute_is_offered_the_task_and_completes_it(away):
    r = call(away, "alice", "POST", "/api/instances", {"template": "errand"})
    iid = r.json()["id"]
    offered = call(away, "bob", "GET", "/api/tasks").json()
    assert [(t["instance"], t["uri"]) for t in offered] == [(iid, "do")]
    assert call(away, "bob", "GET", "/api/tasks", params={"assigned": "me"}).json() == []
    assert call(away, "bob", "GET", f"/api/instances/{iid}").status_code == 200
    r = call(away, "bob", "POST", f"/api/instances/{iid}/circles/do/claim")
    assert (r.status_code, r.json()["circles"]["do"]["assignee"]) == (200, "bob")
    mark = r.json()["circles"]["do"]["bookmark"]
    r = call(away, "bob", "POST", f"/api/instances/{iid}/circles/do/complete",
             {"bookmark": mark, "result": {}})
    assert (r.status_code, r.json()["status"]) == (200, "completed")
    call(away, "ann", "DELETE", "/api/me/substitute")
    r = call(away, "alice", "POST", "/api/instances", {"template": "errand"})
    assert call(away, "bob", "GET", "/api/tasks").json() == []  # over: nothing offered


def test_the_substitute_decides_the_approval_as_bob_for_ann(away):
    iid = call(away, "alice", "POST", "/api/instances", {"template": "approve"}).json()["id"]
    Worker(away.store).run_once()
    mail = call(away, "bob", "GET", "/api/mailbox",
                params={"kind": "approval", "status": "pending"}).json()
    assert [m["payload"]["approver"] for m in mail] == ["ann"]
    r = call(away, "bob", "POST", f"/api/mailbox/{mail[0]['id']}/decision",
             {"decision": "approved", "comment": "ann is away"})
    assert (r.status_code, r.json()["decided_by"], r.json()["signature_ok"]) == \
        (200, "bob for ann", True)
    inst = call(away, "alice", "GET", f"/api/instances/{iid}").json()
    assert inst["status"] == "completed"
    history = call(away, "alice", "GET", f"/api/instances/{iid}/history").json()
    assert [e["actor"] for e in history if e["kind"] == "circle_succeeded"
            and e["circle"] == "ok"] == ["bob for ann"]
    theirs = call(away, "ann", "GET", "/api/mailbox", params={"kind": "approval"}).json()
    assert (theirs[0]["decision"], theirs[0]["decided_by"]) == ("approved", "bob for ann")
    # alice stands in for nobody: the mail is not hers
    assert call(away, "alice", "POST", f"/api/mailbox/{mail[0]['id']}/decision",
                {"decision": "rejected"}).status_code == 404
