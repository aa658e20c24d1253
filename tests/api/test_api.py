"""The REST API over real HTTP: every endpoint's happy path and error statuses, the
bookmark storm, and the authorization matrix."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jwt
import pytest

from bpflow.worker import Worker

ROOT = Path(__file__).resolve().parents[2]
REIMBURSEMENT = json.loads((ROOT / "upload/workflow/reimbursement.json").read_text())
FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer", "required": True}]}},
    {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "t", "type": "string"}]}},
    {"uri": "end", "deps": [["b"]]}]}


def upload(api, body):
    with api.client("admin") as c:
        r = c.post("/api/templates", json=body)
    assert r.status_code in (200, 201), r.text
    return r


def started(api, who="alice", template="simple", **extra):
    with api.client(who) as c:
        r = c.post("/api/instances", json={"template": template, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def test_health_and_token(api):
    with api.client() as c:
        assert c.get("/api/health").json() == {"status": "ok"}
        r = c.post("/api/auth/token", json={"username": "alice", "password": "pw-alice"})
        assert r.status_code == 200 and r.json()["token_type"] == "bearer"
        assert r.json()["expires_in"] == 3600
        assert c.post("/api/auth/token", json={"username": "alice",
                                               "password": "nope"}).status_code == 401
        assert c.post("/api/auth/token", json={"username": "alice"}).status_code == 422


def test_sign_in_attempts_are_rate_limited(api):
    with api.client() as c:
        codes = [c.post("/api/auth/token", json={"username": "bob", "password": "x"}).status_code
                 for _ in range(11)]
    assert codes[:10] == [401] * 10 and codes[10] == 429


@pytest.mark.parametrize("token", [None, "garbage", "forged", "expired", "wrong-audience"])
def test_bad_tokens_get_401(api, token):
    from bpflow.security import derive
    key = derive(api.store.secret, "jwt")
    now = int(time.time())
    claims = {"sub": "alice", "uid": 2, "roles": ["admin"], "iss": "bpflow",
              "aud": "bpflow-api", "iat": now, "exp": now + 60}
    value = {"garbage": "abc.def.ghi",
             "forged": jwt.encode(claims, b"not the key, but long enough 32+", algorithm="HS256"),
             "expired": jwt.encode({**claims, "exp": now - 1}, key, algorithm="HS256"),
             "wrong-audience": jwt.encode({**claims, "aud": "other"}, key, algorithm="HS256"),
             None: None}[token]
    headers = {"Authorization": f"Bearer {value}"} if value else {}
    with api.client() as c:
        r = c.get("/api/instances", headers=headers)
    assert r.status_code == 401 and "detail" in r.json()


def test_templates_upload_versions_get_and_errors(api):
    assert upload(api, FORM).status_code == 201
    same = upload(api, FORM)
    assert same.status_code == 200 and same.json()["version"] == 1
    second = upload(api, {**FORM, "title": "v2"})
    assert second.status_code == 201 and second.json()["version"] == 2
    assert second.json()["analysis"]["terminal"] == "end"
    with api.client("alice") as c:
        assert c.get("/api/templates").json() == [
            {"name": "simple", "latest_version": 2, "versions": [1, 2], "retired": False}]
        one = c.get("/api/templates/simple", params={"version": 1}).json()
        assert one["version"] == 1 and one["body"] == FORM and one["locked"] is False
        assert c.get("/api/templates/nope").status_code == 404
        assert c.get("/api/templates/simple", params={"version": 9}).status_code == 404
    with api.client("admin") as c:
        bad = c.post("/api/templates", json={"name": "bad", "circles": [
            {"uri": "a", "deps": [["b"]]}, {"uri": "b", "deps": [["a"]]}]})
        assert bad.status_code == 422
        assert {e["code"] for e in bad.json()["detail"]["errors"]} >= {"cycle"}
        assert all(e["path"].startswith("/") for e in bad.json()["detail"]["errors"])


def test_start_resume_with_bookmarks_and_history(api):
    upload(api, FORM)
    inst = started(api)
    assert inst["status"] == "running" and inst["circles"]["a"]["ready"]
    mark = inst["circles"]["a"]["bookmark"]
    with api.client("alice") as c:
        url = f"/api/instances/{inst['id']}/circles/a/complete"
        bad = c.post(url, json={"bookmark": mark, "result": {"n": "x"}})
        assert bad.status_code == 422 and bad.json()["detail"]["errors"] == {
            "n": "n must be a whole number"}
        ok = c.post(url, json={"bookmark": mark, "result": {"n": "5"}})
        assert ok.status_code == 200 and ok.json()["circles"]["a"]["result"] == {"n": 5}
        assert c.post(url, json={"bookmark": mark, "result": {"n": 6}}).status_code == 409
        b = ok.json()["circles"]["b"]["bookmark"]
        done = c.post(f"/api/instances/{inst['id']}/circles/b/complete",
                      json={"bookmark": b, "result": {"t": "hi"}})
        assert done.json()["status"] == "completed"
        assert done.json()["variables"] == {"a": {"n": 5}, "b": {"t": "hi"}, "end": None}
        history = c.get(done.json()["history_url"]).json()
        assert history[0]["kind"] == "instance_started" and history[-1]["kind"] == \
            "instance_completed"
        assert c.get(f"/api/instances/{inst['id']}").json()["status"] == "completed"
        assert c.post("/api/instances", json={"template": "ghost"}).status_code == 404
        assert c.post(f"/api/instances/{inst['id']}/circles/zz/complete",
                      json={"bookmark": "x"}).status_code == 404


def test_inputs_are_checked(api):
    upload(api, {"name": "needs", "inputs": {"amount": "number"}, "circles": [{"uri": "a"}]})
    with api.client("alice") as c:
        r = c.post("/api/instances", json={"template": "needs", "inputs": {"amount": "x"}})
        assert r.status_code == 422 and "must be number" in r.json()["detail"]
        assert c.post("/api/instances", json={"template": "needs",
                                              "inputs": {"amount": 3}}).status_code == 201


def test_fail_reset_preview_and_reset_scopes(api):
    upload(api, FORM)
    inst = started(api)
    with api.client("alice") as c:
        base = f"/api/instances/{inst['id']}"
        a = inst["circles"]["a"]["bookmark"]
        r = c.post(f"{base}/circles/a/complete", json={"bookmark": a, "result": {"n": 1}})
        b = r.json()["circles"]["b"]["bookmark"]
        failed = c.post(f"{base}/circles/b/fail", json={"bookmark": b, "reason": "bad data"})
        assert failed.json()["status"] == "failed"
        assert failed.json()["circles"]["b"]["reason"] == "bad data"
        assert c.get(f"{base}/reset-preview", params={"uri": "b", "scope": "levels",
                                                      "levels": 1}).json() == ["a", "b"]
        assert c.post(f"{base}/reset", json={"uri": "b", "scope": "levels"}).status_code == 422
        assert c.post(f"{base}/reset", json={"uri": "b", "scope": "sideways"}).status_code == 422
        reset = c.post(f"{base}/reset", json={"uri": "b", "scope": "self"})
        assert reset.status_code == 200 and reset.json()["status"] == "running"
        assert reset.json()["circles"]["b"]["ready"]
        assert c.post(f"{base}/reset", json={"uri": "b"}).status_code == 409  # waiting
        assert c.post(f"{base}/reset", json={"uri": "zz"}).status_code == 404
        all_ = c.post(f"{base}/reset", json={"uri": "a", "scope": "all"})
        assert all_.json()["circles"]["a"]["ready"]


def test_suspend_resume_abort(api):
    upload(api, FORM)
    inst = started(api)
    with api.client("alice") as c:
        base = f"/api/instances/{inst['id']}"
        assert c.post(f"{base}/suspend").json()["status"] == "suspended"
        assert c.post(f"{base}/suspend").status_code == 409
        mark = inst["circles"]["a"]["bookmark"]
        assert c.post(f"{base}/circles/a/complete",
                      json={"bookmark": mark, "result": {"n": 1}}).status_code == 409
        assert c.post(f"{base}/resume").json()["status"] == "running"
        aborted = c.post(f"{base}/abort", json={"reason": "changed my mind"})
        assert aborted.json()["status"] == "terminated"
        assert aborted.json()["reason"] == "changed my mind"
        assert c.post(f"{base}/abort", json={}).status_code == 409


def test_lists_filter_and_page_only_the_callers_instances(api):
    upload(api, FORM)
    upload(api, {"name": "other", "circles": [{"uri": "x", "box": {"form": [{"name": "q"}]}}]})
    mine = [started(api)["id"] for _ in range(3)] + [started(api, template="other")["id"]]
    started(api, who="bob")
    with api.client("alice") as c:
        r = c.get("/api/instances")
        assert {i["id"] for i in r.json()} == set(mine) and r.headers["X-Total-Count"] == "4"
        page = c.get("/api/instances", params={"limit": 2, "offset": 2}).json()
        assert len(page) == 2
        assert len(c.get("/api/instances", params={"template": "other"}).json()) == 1
        assert c.get("/api/instances", params={"status": "completed"}).json() == []
        assert c.get("/api/instances", params={"status": "weird"}).status_code == 422
    with api.client("admin") as c:
        assert c.get("/api/instances").headers["X-Total-Count"] == "5"


def test_stats_count_circles_and_instances(api):
    upload(api, FORM)
    first = started(api)
    started(api)
    with api.client("alice") as c:
        mark = first["circles"]["a"]["bookmark"]
        c.post(f"/api/instances/{first['id']}/circles/a/complete",
               json={"bookmark": mark, "result": {"n": 1}})
        stats = c.get("/api/templates/simple/stats").json()
        assert stats["instances"] == {"running": 2}
        assert stats["circles"]["a"] == {"waiting": 1, "success": 1, "failure": 0,
                                         "skipped": 0}
        assert c.get("/api/templates/zzz/stats").status_code == 404


def test_bookmark_storm_yields_exactly_one_success(api):
    upload(api, FORM)
    inst = started(api)
    mark = inst["circles"]["a"]["bookmark"]
    url = f"/api/instances/{inst['id']}/circles/a/complete"

    def attempt(i: int) -> int:
        with api.client("alice") as c:
            return c.post(url, json={"bookmark": mark, "result": {"n": i}}).status_code

    with ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(attempt, range(16)))
    assert sorted(codes) == [200] + [409] * 15
    history = api.store.history(inst["id"])
    assert [e["circle"] for e in history if e["kind"] == "circle_succeeded"] == ["a"]


def test_approval_through_the_mailbox(api):
    upload(api, REIMBURSEMENT)
    inst = started(api, template="reimbursement")
    with api.client("alice") as c:
        mark = inst["circles"]["claim"]["bookmark"]
        r = c.post(f"/api/instances/{inst['id']}/circles/claim/complete", json={
            "bookmark": mark, "result": {"amount": 80, "reason": "taxi", "manager": "ann"}})
        approve = r.json()["circles"]["approve"]
        assert approve["ready"] and approve["bookmark"] is None  # decided by the approver
        assert c.post(f"/api/instances/{inst['id']}/circles/approve/complete",
                      json={"bookmark": "0.x"}).status_code == 403
    Worker(api.store).run_once()
    with api.client("ann") as c:
        mail = c.get("/api/mailbox", params={"kind": "approval", "status": "pending"}).json()
        assert len(mail) == 1 and mail[0]["signature_ok"] and mail[0]["subject"].startswith(
            "Expense claim of 80")
        with api.client("bob") as other:
            assert other.post(f"/api/mailbox/{mail[0]['id']}/decision",
                              json={"decision": "approved"}).status_code == 404
        ok = c.post(f"/api/mailbox/{mail[0]['id']}/decision",
                    json={"decision": "approved", "comment": "fine"})
        assert ok.status_code == 200 and ok.json()["decision"] == "approved"
        assert c.post(f"/api/mailbox/{mail[0]['id']}/decision",
                      json={"decision": "rejected"}).status_code == 409
        assert c.post("/api/mailbox/99999/decision",
                      json={"decision": "approved"}).status_code == 404
        assert c.post(f"/api/mailbox/{mail[0]['id']}/decision",
                      json={"decision": "maybe"}).status_code == 422
    with api.client("alice") as c:
        view = c.get(f"/api/instances/{inst['id']}").json()
        assert view["circles"]["approve"]["state"] == "success"
        assert view["circles"]["review"]["ready"]


def test_guest_messages_are_rate_limited_and_reach_admins(api):
    with api.client() as c:
        for i in range(5):
            r = c.post("/api/guest/messages", json={"name": "Eve", "subject": f"s{i}",
                                                    "body": "<b>hi</b>"})
            assert r.status_code == 201
        limited = c.post("/api/guest/messages", json={"name": "Eve", "subject": "x",
                                                      "body": "y"})
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) > 0
        assert c.post("/api/guest/messages", json={"name": "", "subject": "x",
                                                   "body": "y"}).status_code == 422
    with api.client("admin") as c:
        guests = c.get("/api/mailbox", params={"kind": "guest"}).json()
        assert len(guests) == 5 and guests[0]["body"] == "<b>hi</b>"
    with api.client("alice") as c:
        assert c.get("/api/mailbox", params={"kind": "guest"}).json() == []


def test_owner_sends_a_form_that_feeds_an_action_and_aborts_without_a_body(api):
    upload(api, {"name": "ask", "circles": [
        {"uri": "q", "box": {"form": [{"name": "to", "type": "string"}],
                             "action": {"type": "mail", "to": "${form.to}",
                                        "subject": "hi"}}},
        {"uri": "end", "deps": [["q"]]}]})
    inst = started(api, template="ask")
    mark = inst["circles"]["q"]["bookmark"]
    assert mark  # the owner may send this form
    with api.client("alice") as c:
        r = c.post(f"/api/instances/{inst['id']}/circles/q/complete",
                   json={"bookmark": mark, "result": {"to": "ann"}})
        assert r.status_code == 200 and r.json()["circles"]["q"]["pending"] == {
            "form_submitted": True}
        assert r.json()["circles"]["q"]["bookmark"] is None  # now bpflow sends the mail
        assert c.post(f"/api/instances/{inst['id']}/abort").json()["status"] == "terminated"
