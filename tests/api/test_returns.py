"""Return to a chosen earlier step over the REST API (SPEC §15, 驳回/退回), on SQLite and
PostgreSQL: where it may go back to, who may return it, the form coming back filled in
with the comment shown and mailed, the event feed, and the refusals (403, 404, 409, 422)."""

from __future__ import annotations

import pytest

from bpflow.auth import issue_token
from bpflow.worker import Worker
from tests.conftest import SECRET, settled

RETURNS = {"name": "returns", "circles": [
    {"uri": "start", "description": "Start"},
    {"uri": "claim", "description": "Fill in the claim", "deps": [["start"]],
     "box": {"form": [{"name": "amount", "type": "number", "required": True},
                      {"name": "reason", "type": "string"}]}},
    {"uri": "review", "description": "Finance checks it", "deps": [["claim"]],
     "assign": {"roles": ["finance"]},
     "box": {"form": [{"name": "note", "type": "string"}]}},
    {"uri": "ok", "description": "The manager approves", "deps": [["review"]],
     "box": {"action": {"type": "approval", "to": "ann", "subject": "Claim ${claim.amount}"}}},
    {"uri": "done", "deps": [["ok"]]}]}


@pytest.fixture
def team(api):
    api.store.add_user("fred", "pw-fred", ["user", "finance"])
    api.tokens["fred"] = issue_token(api.store.user("fred"), SECRET)
    api.store.put_template(RETURNS)
    return api


def call(api, who, method, path, body=None, **kw):
    with api.client(who) as c:
        return c.request(method, path, json=body, **kw)


def complete(api, who, iid, uri, result):
    inst = call(api, who, "GET", f"/api/instances/{iid}").json()
    r = call(api, who, "POST", f"/api/instances/{iid}/circles/{uri}/complete",
             {"bookmark": inst["circles"][uri]["bookmark"], "result": result})
    assert r.status_code == 200, r.text
    return r.json()


def at_review(api):
    iid = call(api, "alice", "POST", "/api/instances", {"template": "returns"}).json()["id"]
    complete(api, "alice", iid, "claim", {"amount": 42, "reason": "taxi"})
    return iid


def at_approval(api):
    iid = at_review(api)
    complete(api, "fred", iid, "review", {"note": "fine"})
    Worker(api.store).run_once()
    mail = call(api, "ann", "GET", "/api/mailbox", params={"status": "pending"}).json()[0]
    return iid, mail["id"]


def test_the_approver_lists_the_steps_and_returns_to_the_first_with_a_comment(team):
    iid, mail = at_approval(team)
    r = call(team, "ann", "GET", f"/api/instances/{iid}/circles/ok/return-targets")
    assert r.status_code == 200, r.text
    assert r.json() == [{"to": "start", "description": "Start"},
                        {"to": "claim", "description": "Fill in the claim"},
                        {"to": "review", "description": "Finance checks it"},
                        {"to": "@start", "description": "Start"}]
    r = call(team, "ann", "POST", f"/api/mailbox/{mail}/decision",
             {"decision": "returned", "comment": "please attach the receipt", "to": "@start"})
    assert r.status_code == 200, r.text
    assert r.json()["decision"] == "returned"
    inst = call(team, "alice", "GET", f"/api/instances/{iid}").json()
    claim = inst["circles"]["claim"]
    assert claim["ready"] and claim["bookmark"]
    assert claim["returned"]["comment"] == "please attach the receipt"
    assert claim["returned"]["by"] == "ann" and claim["returned"]["step"] == "ok"
    assert claim["returned"]["answer"] == {"amount": 42, "reason": "taxi"}
    assert not inst["circles"]["review"]["ready"] and inst["circles"]["ok"]["state"] == "waiting"
    told = call(team, "alice", "GET", "/api/mailbox", params={"kind": "message"}).json()
    assert len(told) == 1 and told[0]["subject"] == "Sent back: Fill in the claim"
    assert "please attach the receipt" in told[0]["body"] and told[0]["sender"] == "ann"
    event = [e for e in call(team, "alice", "GET", f"/api/instances/{iid}/history").json()
             if e["kind"] == "circle_returned"][0]
    assert event["actor"] == "ann" and event["data"]["to"] == "@start"
    assert event["data"]["comment"] == "please attach the receipt"
    def returned():
        feed = call(team, "admin", "GET", "/api/events",
                    params={"types": "task.returned"}).json()
        return [(i["instance"], i["uri"]) for i in feed["items"] if i["type"] == "task.returned"]
    assert settled(returned, bool) == [(iid, "ok")]
    # amended and sent again: the flow goes on, a new request goes out
    complete(team, "alice", iid, "claim", {"amount": 42, "reason": "taxi, receipt attached"})
    complete(team, "fred", iid, "review", {"note": "fine"})
    Worker(team.store).run_once()
    assert len(call(team, "ann", "GET", "/api/mailbox", params={"status": "pending"}).json()) == 1
    r = call(team, "ann", "POST", f"/api/mailbox/{mail}/decision", {"decision": "returned"})
    assert r.status_code == 409  # the old mail is closed


def test_a_return_without_to_goes_back_to_the_step_that_asked(team):
    iid, mail = at_approval(team)
    r = call(team, "ann", "POST", f"/api/instances/{iid}/circles/ok/return",
             {"comment": "why this note?"})
    assert r.status_code == 200, r.text
    circles = r.json()["circles"]
    assert circles["review"]["ready"] and not circles["claim"]["ready"]
    assert circles["review"]["returned"]["answer"] == {"note": "fine"}
    decided = call(team, "ann", "GET", "/api/mailbox", params={"kind": "approval"}).json()
    assert decided[0]["decision"] == "returned" and decided[0]["comment"] == "why this note?"
    told = call(team, "fred", "GET", "/api/mailbox", params={"kind": "message"}).json()
    assert [m["subject"] for m in told] == ["Sent back: Finance checks it"]


def test_a_task_is_returned_by_whoever_may_act_on_it(team):
    iid = at_review(team)
    path = f"/api/instances/{iid}/circles/review"
    assert [t["to"] for t in call(team, "fred", "GET", path + "/return-targets").json()] == [
        "start", "claim", "@start"]
    assert call(team, "alice", "POST", path + "/return", {"to": "claim"}).status_code == 403
    assert call(team, "bob", "POST", path + "/return", {"to": "claim"}).status_code == 404
    r = call(team, "fred", "POST", path + "/return", {"to": "claim", "comment": "amount?"})
    assert r.status_code == 200, r.text
    assert r.json()["circles"]["claim"]["returned"]["comment"] == "amount?"
    # no longer his (nor pending): he no longer sees the flow
    assert call(team, "fred", "POST", path + "/return", {"to": "claim"}).status_code == 404
    assert call(team, "admin", "POST", path + "/return", {"to": "claim"}).status_code == 409


@pytest.mark.parametrize("to", ["ok", "done", "nowhere", "@START", "claim.x", "x" * 400])
def test_a_target_not_allowed_is_refused_with_422_and_changes_nothing(team, to):
    iid, mail = at_approval(team)
    seq = len(call(team, "alice", "GET", f"/api/instances/{iid}/history").json())
    r = call(team, "ann", "POST", f"/api/mailbox/{mail}/decision",
             {"decision": "returned", "comment": "x", "to": to})
    assert r.status_code == 422, r.text
    assert "returned to" in str(r.json()["detail"])
    r = call(team, "ann", "POST", f"/api/instances/{iid}/circles/ok/return", {"to": to})
    assert r.status_code == 422, r.text
    assert len(call(team, "alice", "GET", f"/api/instances/{iid}/history").json()) == seq
    assert call(team, "ann", "GET", "/api/mailbox").json()[0]["decision"] is None


def test_to_goes_with_a_return_only_and_is_held_to_its_limits(team):
    iid, mail = at_approval(team)
    r = call(team, "ann", "POST", f"/api/mailbox/{mail}/decision",
             {"decision": "approved", "to": "claim"})
    assert r.status_code == 422
    for bad in ("", "x" * 401, 5, ["claim"]):
        r = call(team, "ann", "POST", f"/api/instances/{iid}/circles/ok/return", {"to": bad})
        assert r.status_code == 422, bad
    assert call(team, "ann", "GET", "/api/mailbox").json()[0]["decision"] is None


def test_who_may_list_where_an_approval_goes_back(team):
    iid, _ = at_approval(team)
    path = f"/api/instances/{iid}/circles/ok/return-targets"
    assert call(team, "alice", "GET", path).status_code == 403  # the starter withdraws
    assert call(team, "fred", "GET", path).status_code == 403  # followed, not his
    assert call(team, "bob", "GET", path).status_code == 404
    assert call(team, "admin", "GET", path).status_code == 200
    assert call(team, None, "GET", path).status_code == 401
    assert call(team, "ann", "GET", f"/api/instances/{iid}/circles/nope/return-targets"
                ).status_code == 404
    assert call(team, "ann", "GET", f"/api/instances/{iid}/circles/claim/return-targets"
                ).status_code in (403, 409)
