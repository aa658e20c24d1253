"""People and work over the REST API (SPEC §10), on SQLite and PostgreSQL: who may claim,
complete, delegate and see; escalation with a controlled clock; withdraw and return."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bpflow.auth import issue_token
from bpflow.mailbox import Mailbox
from tests.conftest import SECRET

CLAIM = {"name": "claim", "circles": [
    {"uri": "claim", "description": "Fill in the claim",
     "box": {"form": [{"name": "amount", "type": "number", "required": True},
                      {"name": "manager", "type": "user", "role": "approver"}]}},
    {"uri": "review", "description": "Finance checks the claim", "deps": [["claim"]],
     "assign": {"roles": ["finance"]}, "due": 3600,
     "box": {"confirm": "Pay ${claim.amount}?"}},
    {"uri": "pay", "description": "The manager records the payment", "deps": [["review"]],
     "assign": {"users": ["${claim.manager}"]},
     "box": {"form": [{"name": "reference", "type": "string", "required": True}]}},
    {"uri": "done", "deps": [["pay"]]}]}
APPROVE = {"name": "approve", "circles": [
    {"uri": "claim", "box": {"form": [{"name": "amount", "type": "number"}]}},
    {"uri": "ok", "deps": [["claim"]],
     "box": {"action": {"type": "approval", "to": "ann", "subject": "Claim ${claim.amount}"}}},
    {"uri": "done", "deps": [["ok"]]}]}
ESCALATE = {"name": "escalate", "circles": [
    {"uri": "check", "assign": {"roles": ["finance"]},
     "timeout": {"seconds": 60, "policy": "escalate", "to": {"users": ["ann"]}},
     "box": {"confirm": "Checked?"}},
    {"uri": "done", "deps": [["check"]]}]}


@pytest.fixture
def team(api):
    """The API with two finance people and the templates above."""
    for name in ("fred", "gina"):
        api.store.add_user(name, f"pw-{name}", ["user", "finance"])
        api.tokens[name] = issue_token(api.store.user(name), SECRET)
    for body in (CLAIM, APPROVE, ESCALATE):
        api.store.put_template(body)
    return api


def call(api, who, method, path, body=None, **kw):
    with api.client(who) as c:
        return c.request(method, path, json=body, **kw)


def start_claim(api, who="alice", amount=12):
    r = call(api, who, "POST", "/api/instances", {"template": "claim"})
    assert r.status_code == 201, r.text
    inst = r.json()
    mark = inst["circles"]["claim"]["bookmark"]
    r = call(api, who, "POST", f"/api/instances/{inst['id']}/circles/claim/complete",
             {"bookmark": mark, "result": {"amount": amount, "manager": "ann"}})
    assert r.status_code == 200, r.text
    return r.json()


def tasks(api, who, **params):
    r = call(api, who, "GET", "/api/tasks", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_finance_task_is_offered_to_the_role_and_claimed_by_one(team):
    inst = start_claim(team)
    iid = inst["id"]
    review = inst["circles"]["review"]
    assert review["candidates"] == {"users": [], "roles": ["finance"]}
    assert review["assignee"] is None and review["due_at"]
    assert review["bookmark"] is None  # alice may not use it: not hers to do
    offered = tasks(team, "fred", assigned="candidate")
    assert [(t["instance"], t["uri"], t["description"]) for t in offered] == [
        (iid, "review", "Finance checks the claim")]
    assert offered[0]["bookmark"] and offered[0]["due_at"] == review["due_at"]
    assert tasks(team, "fred", assigned="me") == []
    assert tasks(team, "bob") == [] and tasks(team, "ann", assigned="candidate") == []
    # the candidate may see the flow, read-only outside their circle; others may not
    assert call(team, "fred", "GET", f"/api/instances/{iid}").status_code == 200
    assert call(team, "bob", "GET", f"/api/instances/{iid}").status_code == 404
    assert call(team, "bob", "POST", f"/api/instances/{iid}/circles/review/claim"
                ).status_code == 404
    # seeing a flow is not controlling it: 403 (SPEC §8: an ownership violation), as the
    # flow page says; one rule for both (bpflow.moves)
    assert call(team, "fred", "POST", f"/api/instances/{iid}/reset",
                {"uri": "claim"}).status_code == 403
    # fred claims; gina sees it gone from her groups' list and cannot take it
    r = call(team, "fred", "POST", f"/api/instances/{iid}/circles/review/claim")
    assert r.status_code == 200 and r.json()["circles"]["review"]["assignee"] == "fred"
    assert tasks(team, "gina", assigned="candidate") == []
    assert [t["uri"] for t in tasks(team, "fred", assigned="me")] == ["review"]
    r = call(team, "gina", "POST", f"/api/instances/{iid}/circles/review/claim")
    assert r.status_code == 409 and "fred" in r.json()["detail"]
    mark = offered[0]["bookmark"]
    r = call(team, "gina", "POST", f"/api/instances/{iid}/circles/review/complete",
             {"bookmark": mark, "result": True})
    assert r.status_code == 403
    r = call(team, "alice", "POST", f"/api/instances/{iid}/circles/review/complete",
             {"bookmark": mark, "result": True})
    assert r.status_code == 403  # the starter may not do finance's work
    r = call(team, "fred", "POST", f"/api/instances/{iid}/circles/review/complete",
             {"bookmark": mark, "result": True})
    assert r.status_code == 200, r.text
    pay = r.json()["circles"]["pay"]
    assert pay["assignee"] == "ann" and pay["ready"]
    assert [t["uri"] for t in tasks(team, "ann", assigned="me")] == ["pay"]
    history = call(team, "alice", "GET", f"/api/instances/{iid}/history").json()
    claimed = [e for e in history if e["kind"] == "task_claimed"]
    assert claimed and claimed[0]["actor"] == "fred"


def test_completing_as_a_candidate_claims_and_concurrent_completions_apply_once(team):
    inst = start_claim(team)
    iid = inst["id"]
    mark = tasks(team, "fred")[0]["bookmark"]
    import concurrent.futures as cf
    with cf.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda who: call(
            team, who, "POST", f"/api/instances/{iid}/circles/review/complete",
            {"bookmark": mark, "result": True}).status_code, ["fred", "gina"]))
    assert sorted(answers) in ([200, 403], [200, 409])
    history = call(team, "alice", "GET", f"/api/instances/{iid}/history").json()
    assert len([e for e in history if e["kind"] == "circle_succeeded"
                and e["circle"] == "review"]) == 1
    assert len([e for e in history if e["kind"] == "task_claimed"]) == 1


def test_unclaim_and_delegate(team):
    iid = start_claim(team)["id"]
    base = f"/api/instances/{iid}/circles/review"
    assert call(team, "fred", "POST", base + "/unclaim").status_code == 409  # nobody holds it
    assert call(team, "fred", "POST", base + "/claim").status_code == 200
    assert call(team, "gina", "POST", base + "/unclaim").status_code == 403
    r = call(team, "fred", "POST", base + "/assign", {"to": "bob"})
    assert r.status_code == 403  # bob is no candidate
    assert call(team, "fred", "POST", base + "/assign", {"to": "nobody"}).status_code == 404
    r = call(team, "fred", "POST", base + "/assign", {"to": "gina"})
    assert r.status_code == 200 and r.json()["circles"]["review"]["assignee"] == "gina"
    assert call(team, "fred", "POST", base + "/assign", {"to": "fred"}).status_code == 403
    r = call(team, "admin", "POST", base + "/assign", {"to": "bob"})  # an admin names anyone
    assert r.status_code == 200 and r.json()["circles"]["review"]["assignee"] == "bob"
    assert [t["uri"] for t in tasks(team, "bob", assigned="me")] == ["review"]
    assert call(team, "bob", "POST", base + "/unclaim").status_code == 200
    assert [t["uri"] for t in tasks(team, "gina", assigned="candidate")] == ["review"]
    history = call(team, "alice", "GET", f"/api/instances/{iid}/history").json()
    kinds = [(e["kind"], e["actor"]) for e in history if e["kind"].startswith("task_")]
    assert kinds == [("task_claimed", "fred"), ("task_transferred", "fred"),
                     ("task_transferred", "admin"), ("task_unclaimed", "bob")]


def test_a_user_field_must_name_a_user_of_its_role(team):
    inst = call(team, "alice", "POST", "/api/instances", {"template": "claim"}).json()
    base = f"/api/instances/{inst['id']}/circles/claim/complete"
    mark = inst["circles"]["claim"]["bookmark"]
    for manager, why in (("nobody", "there is no"), ("bob", "approver")):
        r = call(team, "alice", "POST", base, {"bookmark": mark,
                                               "result": {"amount": 1, "manager": manager}})
        assert r.status_code == 422 and why in r.text


def test_withdraw_a_task_and_an_approval(team):
    iid = start_claim(team)["id"]
    r = call(team, "fred", "POST", f"/api/instances/{iid}/circles/review/withdraw")
    assert r.status_code == 403  # only the starter (or an admin)
    r = call(team, "alice", "POST", f"/api/instances/{iid}/circles/review/withdraw")
    assert r.status_code == 200, r.text
    assert r.json()["circles"]["claim"]["ready"] and tasks(team, "fred") == []
    r = call(team, "alice", "POST", f"/api/instances/{iid}/circles/review/withdraw")
    assert r.status_code == 409

    inst = call(team, "alice", "POST", "/api/instances", {"template": "approve"}).json()
    iid = inst["id"]
    call(team, "alice", "POST", f"/api/instances/{iid}/circles/claim/complete",
         {"bookmark": inst["circles"]["claim"]["bookmark"], "result": {"amount": 5}})
    from bpflow.worker import Worker
    Worker(team.store).run_once()
    pending = call(team, "ann", "GET", "/api/mailbox", params={"status": "pending"}).json()
    assert [m["instance"] for m in pending] == [iid]
    r = call(team, "alice", "POST", f"/api/instances/{iid}/circles/ok/withdraw")
    assert r.status_code == 200, r.text
    assert call(team, "ann", "GET", "/api/mailbox", params={"status": "pending"}).json() == []
    mail = call(team, "ann", "GET", "/api/mailbox").json()[0]
    assert mail["decision"] == "withdrawn" and mail["signature_ok"]
    r = call(team, "ann", "POST", f"/api/mailbox/{mail['id']}/decision",
             {"decision": "approved"})
    assert r.status_code == 409
    kinds = [e["kind"] for e in call(team, "alice", "GET",
                                     f"/api/instances/{iid}/history").json()]
    assert "circle_withdrawn" in kinds


def test_an_approver_sends_a_claim_back(team):
    inst = call(team, "alice", "POST", "/api/instances", {"template": "approve"}).json()
    iid = inst["id"]
    call(team, "alice", "POST", f"/api/instances/{iid}/circles/claim/complete",
         {"bookmark": inst["circles"]["claim"]["bookmark"], "result": {"amount": 5}})
    from bpflow.worker import Worker
    Worker(team.store).run_once()
    mail = call(team, "ann", "GET", "/api/mailbox").json()[0]
    r = call(team, "ann", "POST", f"/api/mailbox/{mail['id']}/decision",
             {"decision": "returned", "comment": "add the receipt"})
    assert r.status_code == 200 and r.json()["decision"] == "returned"
    now = call(team, "alice", "GET", f"/api/instances/{iid}").json()
    assert now["circles"]["claim"]["ready"] and now["circles"]["claim"]["bookmark"]
    event = [e for e in call(team, "alice", "GET", f"/api/instances/{iid}/history").json()
             if e["kind"] == "circle_returned"][0]
    assert event["actor"] == "ann" and event["data"]["comment"] == "add the receipt"
    r = call(team, "alice", "POST", f"/api/instances/{iid}/circles/claim/complete",
             {"bookmark": now["circles"]["claim"]["bookmark"], "result": {"amount": 6}})
    assert r.status_code == 200  # amended and sent again: a new request goes out
    Worker(team.store).run_once()
    pending = call(team, "ann", "GET", "/api/mailbox", params={"status": "pending"}).json()
    assert len(pending) == 1 and pending[0]["subject"] == "Claim 6"
    assert Mailbox(team.store).check(team.store.mail(mail["id"])) is None


def test_escalation_after_the_timeout(team):
    clock = team.store.clock
    later = clock() + timedelta(seconds=61)
    inst = call(team, "alice", "POST", "/api/instances", {"template": "escalate"}).json()
    iid = inst["id"]
    assert [t["uri"] for t in tasks(team, "fred", assigned="candidate")] == ["check"]
    team.store.clock = team.store.engine.clock = lambda: later
    try:
        from bpflow.worker import Worker
        Worker(team.store).run_once()
    finally:
        team.store.clock = team.store.engine.clock = clock
    assert tasks(team, "fred") == []
    assert [t["uri"] for t in tasks(team, "ann", assigned="me")] == ["check"]
    events = call(team, "alice", "GET", f"/api/instances/{iid}/history").json()
    escalated = [e for e in events if e["kind"] == "task_escalated"]
    assert len(escalated) == 1 and escalated[0]["data"]["to"] == {"users": ["ann"],
                                                                  "roles": []}


def test_tasks_of_a_suspended_or_finished_flow_are_not_offered(team):
    iid = start_claim(team)["id"]
    assert [t["uri"] for t in tasks(team, "fred")] == ["review"]
    assert call(team, "alice", "POST", f"/api/instances/{iid}/suspend").status_code == 200
    assert tasks(team, "fred") == []
    assert call(team, "alice", "POST", f"/api/instances/{iid}/resume").status_code == 200
    assert [t["uri"] for t in tasks(team, "fred")] == ["review"]
    r = call(team, "fred", "GET", "/api/tasks", params={"template": "claim"})
    assert r.headers["X-Total-Count"] == "1"
    assert tasks(team, "fred", template="approve") == []
    assert call(team, "alice", "POST", f"/api/instances/{iid}/abort",
                {"reason": "wrong claim"}).status_code == 200
    assert tasks(team, "fred") == []


def test_a_task_naming_someone_twice_is_listed_once(team):
    body = {"name": "twice", "circles": [
        {"uri": "t", "assign": {"users": ["fred"], "roles": ["finance", "user"]},
         "box": {"confirm": "ok?"}}, {"uri": "end", "deps": [["t"]]}]}
    team.store.put_template(body)
    firsts = [call(team, "alice", "POST", "/api/instances", {"template": "twice"}).json()["id"]
              for _ in range(3)]
    r = call(team, "fred", "GET", "/api/tasks", params={"limit": 2})
    assert r.headers["X-Total-Count"] == "3"
    assert [t["instance"] for t in r.json()] == firsts[:2]
    r = call(team, "fred", "GET", "/api/tasks", params={"limit": 2, "offset": 2})
    assert [t["instance"] for t in r.json()] == firsts[2:]


def test_an_aborted_flow_asks_nobody_any_more(team):
    inst = call(team, "alice", "POST", "/api/instances", {"template": "approve"}).json()
    iid = inst["id"]
    call(team, "alice", "POST", f"/api/instances/{iid}/circles/claim/complete",
         {"bookmark": inst["circles"]["claim"]["bookmark"], "result": {"amount": 5}})
    from bpflow.worker import Worker
    Worker(team.store).run_once()
    assert len(call(team, "ann", "GET", "/api/mailbox", params={"status": "pending"}).json()) == 1
    r = call(team, "alice", "POST", f"/api/instances/{iid}/abort", {"reason": "wrong claim"})
    assert r.status_code == 200
    assert call(team, "ann", "GET", "/api/mailbox", params={"status": "pending"}).json() == []
    mail = call(team, "ann", "GET", "/api/mailbox").json()[0]
    assert mail["decision"] == "withdrawn" and mail["signature_ok"]


def test_taking_part_lists_the_flows_that_asked_someone_by_role_or_name(team):
    from bpflow.access import Caller
    iid = start_claim(team)["id"]
    fred, bob = (Caller.of(team.store.user(n)) for n in ("fred", "bob"))
    assert [r["id"] for r in team.store.taking_part(fred)] == [iid]  # finance is asked
    assert team.store.taking_part(bob) == []
    assert call(team, "fred", "GET", f"/api/instances/{iid}").status_code == 200
