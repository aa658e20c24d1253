"""Add and remove signers over HTTP (SPEC §15): what each answers, the hostile and
careless bodies (unknown or disabled users, lone surrogates, too many names), 409 once
the approval is no longer pending; each refusal changes nothing."""

from __future__ import annotations

import json

import pytest

from bpflow.mailbox import Mailbox
from bpflow.worker import Worker
from tests.conftest import settled

VOTE = {"name": "vote", "circles": [
    {"uri": "ok", "box": {"action": {"type": "approval", "to": ["ann", "cy"],
                                     "quorum": {"ratio": 0.5}, "subject": "please"}}}]}


@pytest.fixture
def vote(api):
    """alice's request asking ann and cy (a vote by half); dee and eli may approve, gone
    is disabled, bob is a user."""
    store = api.store
    for name in ("cy", "dee", "eli", "gone"):
        store.add_user(name, f"pw-{name}", ["approver"])
    store.disable_user("gone")
    with api.client("admin") as c:
        assert c.post("/api/templates", json=VOTE).status_code == 201
    iid = store.start("vote", {}, store.user("alice")).id
    Worker(store).run_once()
    mail = Mailbox(store).inbox(store.user("ann"), kind="approval")[0]["id"]
    return iid, mail


def round_of(api, iid):
    store = api.store
    return Mailbox(store).round_of(iid, "ok", store.get(iid).circles["ok"].epoch)


def test_add_and_remove_signers(api, vote):
    iid, mail = vote
    with api.client("ann") as c:
        r = c.post(f"/api/mailbox/{mail}/signers",
                   json={"users": ["dee", "eli"], "where": "with", "comment": "the board"})
    assert r.status_code == 200, r.text
    assert r.json()["payload"]["approvers"] == ["ann", "cy", "dee", "eli"]
    assert r.json()["signature_ok"] is True
    with api.client("alice") as c:
        r = c.request("DELETE", f"/api/mailbox/{mail}/signers", json={"users": ["eli"]})
    assert r.status_code == 200, r.text
    assert r.json()["removed"] == ["eli"]
    assert r.json()["round"]["approvers"] == ["ann", "cy", "dee"]
    with api.client("alice") as c:
        history = c.get(f"/api/instances/{iid}/history").json()
    kinds = [(e["kind"], e["actor"]) for e in history if e["kind"].startswith("approval_")]
    assert kinds == [("approval_signers_added", "ann"), ("approval_signers_removed", "alice")]
    def approvals():
        with api.client("admin") as c:
            feed = c.get("/api/events").json()
        return [e["type"] for e in feed["items"] if e["type"].startswith("approval.")]
    assert settled(approvals, lambda got: len(got) >= 2) == [
        "approval.signers_added", "approval.signers_removed"]


SURROGATE = "\\ud800"
HOSTILE = {
    # name: (method, raw body, who, status, in the detail)
    "an unknown user": ("POST", '{"users": ["nobody"], "where": "with"}', "ann", 422,
                        "no user named nobody"),
    "a disabled user": ("POST", '{"users": ["gone"], "where": "before"}', "ann", 422,
                        "no user named gone"),
    "not an approver": ("POST", '{"users": ["bob"], "where": "after"}', "ann", 422,
                        "bob is not an approver"),
    "the starter": ("POST", '{"users": ["alice"], "where": "with"}', "ann", 422,
                    "alice cannot approve their own request"),
    "asked already": ("POST", '{"users": ["cy"], "where": "with"}', "ann", 422,
                      "cy is asked in this approval already"),
    "no one": ("POST", '{"users": [], "where": "with"}', "ann", 422, "at least 1 item"),
    "a blank name": ("POST", '{"users": [""], "where": "with"}', "ann", 422,
                     "at least 1 character"),
    "21 names": ("POST", json.dumps({"users": [f"u{i}" for i in range(21)], "where": "with"}),
                 "ann", 422, "at most 20 items"),
    "somewhere else": ("POST", '{"users": ["dee"], "where": "above"}', "ann", 422,
                       "'before', 'after' or 'with'"),
    "a lone surrogate": ("POST", f'{{"users": ["{SURROGATE}"], "where": "with"}}', "ann", 422,
                         "lone surrogate"),
    "a name not a string": ("POST", '{"users": [7], "where": "with"}', "ann", 422,
                            "valid string"),
    "remove the unknown": ("DELETE", '{"users": ["nobody"]}', "alice", 422,
                           "nobody is not asked in this approval"),
    "remove everyone": ("DELETE", '{"users": ["ann", "cy"]}', "alice", 422,
                        "at least one addressee must remain"),
    "remove, surrogate": ("DELETE", f'{{"users": ["{SURROGATE}"]}}', "alice", 422,
                          "lone surrogate"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_careless_and_hostile_signers_get_a_clear_4xx_and_change_nothing(api, vote, name):
    iid, mail = vote
    method, body, who, status, detail = HOSTILE[name]
    before = round_of(api, iid), len(api.store.history(iid))
    with api.client(who) as c:
        r = c.request(method, f"/api/mailbox/{mail}/signers", content=body,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    said = r.json()["detail"]
    assert detail in (said if isinstance(said, str) else json.dumps(said, ensure_ascii=False))
    assert (round_of(api, iid), len(api.store.history(iid))) == before


def test_no_longer_pending_is_409(api, vote):
    iid, mail = vote
    with api.client("ann") as c:
        assert c.post(f"/api/mailbox/{mail}/decision",
                      json={"decision": "approved"}).status_code == 200
        r = c.post(f"/api/mailbox/{mail}/signers", json={"users": ["dee"], "where": "with"})
    assert r.status_code == 409, r.text
    assert api.store.get(iid).circles["ok"].state == "success"  # 1 of 2: half
    with api.client("alice") as c:
        r = c.request("DELETE", f"/api/mailbox/{mail}/signers", json={"users": ["cy"]})
    assert r.status_code == 409, r.text


def test_answers_in_chinese(api, vote):
    iid, mail = vote
    with api.client("ann") as c:
        r = c.post(f"/api/mailbox/{mail}/signers", json={"users": ["nobody"], "where": "with"},
                   headers={"Accept-Language": "zh-CN"})
    assert r.status_code == 422
    assert "nobody" in json.dumps(r.json(), ensure_ascii=False)
    assert "no user named" not in json.dumps(r.json(), ensure_ascii=False)
