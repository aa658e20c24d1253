"""Hostile and careless bodies (SPEC §13): each gets a clear 4xx with `{"detail": ...}`,
never a 500, on the short path and off it, and changes nothing; every answer carries the
security headers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bpflow.api import create_app
from tests.api.helpers import Client, secured


@pytest.fixture(scope="module", params=["short path", "framework"])
def client(sqlite_store, request):
    app = create_app(lambda: sqlite_store)
    if request.param == "framework":
        app.hot = None
    return Client(sqlite_store, app)


# name: (method, path, raw JSON body, who, status, in the detail). In paths and bodies
# {iid} is a fresh instance of `simple`, {mark} its circle a's bookmark, {hand} and
# {hmark} an instance of `hand` and its bookmark (driven by the admin).
SURROGATE = "\\ud800"
SOON = tuple((datetime.now(UTC) + timedelta(hours=h)).isoformat() for h in (-1, 48))
HOSTILE = {
    # lone surrogates, everywhere text is taken
    "guest name": ("POST", "/api/guest/messages",
                   f'{{"name": "{SURROGATE}", "subject": "s", "body": "b"}}', None, 422,
                   "which is not text (at /name)"),
    "guest body, low half": ("POST", "/api/guest/messages",
                             '{"name": "n", "subject": "s", "body": "x\\udc00"}', None, 422,
                             "lone surrogate"),
    "sign-in name": ("POST", "/api/auth/token",
                     f'{{"username": "{SURROGATE}", "password": "pw"}}', None, 422,
                     "lone surrogate"),
    "start template": ("POST", "/api/instances", f'{{"template": "{SURROGATE}"}}', "alice",
                       422, "lone surrogate"),
    "start inputs": ("POST", "/api/instances",
                     f'{{"template": "simple", "inputs": {{"n": "{SURROGATE}"}}}}',
                     "alice", 422, "(at /inputs/n)"),
    "start inputs key": ("POST", "/api/instances",
                         f'{{"template": "needs", "inputs": {{"{SURROGATE}": 1}}}}', "alice",
                         422, "(at /inputs/\\ud800)"),
    "complete result": ("POST", "/api/instances/{hand}/circles/h/complete",
                        f'{{"bookmark": "{{hmark}}", "result": {{"n": "{SURROGATE}"}}}}',
                        "admin", 422, "(at /result/n)"),
    "complete bookmark": ("POST", "/api/instances/{iid}/circles/a/complete",
                          f'{{"bookmark": "{SURROGATE}", "result": {{"n": 1}}}}', "alice",
                          422, "lone surrogate"),
    "fail reason": ("POST", "/api/instances/{iid}/circles/a/fail",
                    f'{{"bookmark": "{{mark}}", "reason": "{SURROGATE}"}}', "alice", 422,
                    "lone surrogate"),
    "comment text": ("POST", "/api/instances/{iid}/comments", f'{{"text": "{SURROGATE}"}}',
                     "alice", 422, "lone surrogate"),
    "comment of invisible characters": ("POST", "/api/instances/{iid}/comments",
                                        '{"text": "\\u200b\\u202e\\n"}', "alice", 422,
                                        "needs some text"),
    "comment about a path": ("POST", "/api/instances/{iid}/comments",
                             '{"text": "hi", "uri": "../a"}', "alice", 404, "no circle"),
    "abort reason": ("POST", "/api/instances/{iid}/abort", f'{{"reason": "{SURROGATE}"}}',
                     "alice", 422, "lone surrogate"),
    "reset uri": ("POST", "/api/instances/{iid}/reset", f'{{"uri": "{SURROGATE}"}}', "alice",
                  422, "lone surrogate"),
    "template title": ("POST", "/api/templates",
                       f'{{"name": "t", "title": "{SURROGATE}", "circles": [{{"uri": "a"}}]}}',
                       "admin", 422, "(at /title)"),
    "decision comment": ("POST", "/api/mailbox/1/decision",
                         f'{{"decision": "approved", "comment": "{SURROGATE}"}}', "ann", 422,
                         "lone surrogate"),
    "raw surrogate bytes": ("POST", "/api/guest/messages",
                            b'{"name": "\xed\xa0\x80", "subject": "s", "body": "b"}', None, 422,
                            "lone surrogate"),
    "not UTF-8": ("POST", "/api/guest/messages", b'{"name": "\xff", "subject": "s", "body": "b"}',
                  None, 422, "cannot be read"),
    # return to a step (SPEC §15): targets that are no step it may go back to
    "return to, lone surrogate": ("POST", "/api/instances/{iid}/circles/a/return",
                                  f'{{"to": "{SURROGATE}"}}', "alice", 422, "lone surrogate"),
    "return comment, lone surrogate": ("POST", "/api/instances/{iid}/circles/a/return",
                                       f'{{"comment": "{SURROGATE}"}}', "alice", 422,
                                       "lone surrogate"),
    "return to a path": ("POST", "/api/instances/{iid}/circles/a/return", '{"to": "../a"}',
                         "alice", 422, "is not a step circle 'a' can be returned to"),
    "return to itself": ("POST", "/api/instances/{iid}/circles/a/return", '{"to": "a"}',
                         "alice", 422, "can be returned to (allowed: none)"),
    "return to the start, nothing before": ("POST", "/api/instances/{iid}/circles/a/return",
                                            '{"to": "@start"}', "alice", 422,
                                            "can be returned to"),
    "return to an object": ("POST", "/api/instances/{iid}/circles/a/return",
                            '{"to": {"$ne": null}}', "alice", 422, "valid string"),
    "return to, 401 characters": ("POST", "/api/instances/{iid}/circles/a/return",
                                  json.dumps({"to": "a" * 401}), "alice", 422, "at most 400"),
    "return comment, 2001 characters": ("POST", "/api/instances/{iid}/circles/a/return",
                                        json.dumps({"comment": "c" * 2001}), "alice", 422,
                                        "at most 2000"),
    "decision to, 401 characters": ("POST", "/api/mailbox/1/decision",
                                    json.dumps({"decision": "returned", "to": "x" * 401}),
                                    "ann", 422, "at most 400"),
    # integers outside 64 bits, numbers that are not finite
    "inputs, 2^64": ("POST", "/api/instances",
                     f'{{"template": "needs", "inputs": {{"amount": {2 ** 64}}}}}', "alice", 422,
                     "2^63-1) (at /inputs/amount)"),
    "inputs, 2^63": ("POST", "/api/instances",
                     f'{{"template": "needs", "inputs": {{"amount": {2 ** 63}}}}}', "alice", 422,
                     "outside 64 bits"),
    "inputs, -2^63-1": ("POST", "/api/instances",
                        f'{{"template": "needs", "inputs": {{"amount": {-2 ** 63 - 1}}}}}',
                        "alice", 422, "outside 64 bits"),
    "inputs, 5000 digits": ("POST", "/api/instances",
                            '{"template": "needs", "inputs": {"amount": ' + "7" * 5000 + "}}",
                            "alice", 422, "outside 64 bits"),
    "inputs, NaN": ("POST", "/api/instances", '{"template": "needs", "inputs": {"amount": NaN}}',
                    "alice", 422, "not finite"),
    "inputs, -Infinity": ("POST", "/api/instances",
                          '{"template": "needs", "inputs": {"amount": -Infinity}}', "alice", 422,
                          "not finite"),
    "inputs, 1e400": ("POST", "/api/instances",
                      '{"template": "needs", "inputs": {"amount": 1e400}}', "alice", 422,
                      "not finite"),
    "form value, 2^64": ("POST", "/api/instances/{iid}/circles/a/complete",
                         f'{{"bookmark": "{{mark}}", "result": {{"n": {2 ** 64}}}}}', "alice",
                         422, "2^63-1) (at /result/n)"),
    "form value, 30 digits as text": ("POST", "/api/instances/{iid}/circles/a/complete",
                                      '{"bookmark": "{mark}", "result": {"n": "' + "9" * 30
                                      + '"}}', "alice", 422, "n must be between"),
    "form value, 1e300 as text": ("POST", "/api/instances/{iid}/circles/a/complete",
                                  '{"bookmark": "{mark}", "result": {"n": "1e300"}}', "alice",
                                  422, "n must be between"),
    "template, 2^64": ("POST", "/api/templates",
                       f'{{"name": "t", "circles": [{{"uri": "a", "retry": [{2 ** 64}]}}]}}',
                       "admin", 422, "2^63-1) (at /circles/0/retry/0)"),
    # sizes and depth
    "inputs over 64 KiB": ("POST", "/api/instances",
                           json.dumps({"template": "simple", "inputs": {"x": ["y" * 1000] * 70}}),
                           "alice", 422, "inputs is"),
    "a result over 64 KiB": ("POST", "/api/instances/{hand}/circles/h/complete",
                             json.dumps({"bookmark": "{hmark}", "result": ["y" * 1000] * 70}),
                             "admin", 422, "result is"),
    "a text over 64 K characters": ("POST", "/api/guest/messages",
                                    json.dumps({"name": "n", "subject": "s",
                                                "body": "y" * 70000}), None, 422,
                                    "longer than 65536 characters (at /body)"),
    "nested 300 deep": ("POST", "/api/instances",
                        '{"template": "simple", "inputs": {"x": ' + "[" * 300 + "]" * 300 + "}}",
                        "alice", 422, "nested more than 200 deep"),
    "nested 100,000 deep": ("POST", "/api/instances", "[" * 100_000 + "]" * 100_000, "alice",
                            422, "nested more than 200 deep"),
    # copies and urges (SPEC §15): unknown people, too many, bad text
    "cc to unknown users": ("POST", "/api/instances/{iid}/cc",
                            '{"users": ["admin", "nobody", "ghost"]}', "alice", 422,
                            "no user named nobody, ghost"),
    "cc to 51 people": ("POST", "/api/instances/{iid}/cc",
                        json.dumps({"users": [f"u{i}" for i in range(51)]}), "alice", 422,
                        "at most 50 items"),
    "cc to nobody": ("POST", "/api/instances/{iid}/cc", '{"users": []}', "alice", 422,
                     "at least 1 item"),
    "cc users not a list": ("POST", "/api/instances/{iid}/cc", '{"users": "bob"}', "alice",
                            422, "valid list"),
    "cc comment": ("POST", "/api/instances/{iid}/cc",
                   f'{{"users": ["bob"], "comment": "{SURROGATE}"}}', "alice", 422,
                   "lone surrogate"),
    "urge comment over 2000": ("POST", "/api/instances/{iid}/urge",
                               json.dumps({"comment": "y" * 2001}), "alice", 422,
                               "at most 2000 characters"),
    # bookmarks of Unicode digits or letters: a refusal, not a crash
    "bookmark ²": ("POST", "/api/instances/{iid}/circles/a/complete",
                   '{"bookmark": "\u00b2.abc", "result": {"n": 1}}', "alice", 409,
                   "bookmark is malformed"),
    "bookmark ①": ("POST", "/api/instances/{iid}/circles/a/complete",
                   '{"bookmark": "\u2460.abc", "result": {"n": 1}}', "alice", 409,
                   "bookmark is malformed"),
    "bookmark é": ("POST", "/api/instances/{iid}/circles/a/fail",
                   '{"bookmark": "0.\u00e9t\u00e9", "reason": "r"}', "alice", 409,
                   "bookmark is malformed"),
    # substitutes (SPEC §15)
    "substitute unknown": ("PUT", "/api/me/substitute", json.dumps(
        {"to": "nobody", "from": SOON[0], "until": SOON[1]}), "alice", 422, "no user 'nobody'"),
    "substitute oneself": ("PUT", "/api/me/substitute", json.dumps(
        {"to": "alice", "from": SOON[0], "until": SOON[1]}), "alice", 422,
        "a user cannot be their own substitute"),
    "substitute dates reversed": ("PUT", "/api/me/substitute", json.dumps(
        {"to": "ann", "from": SOON[1], "until": SOON[0]}), "alice", 422,
        "'until' must be after 'from'"),
    "substitute without a time zone": ("PUT", "/api/me/substitute", json.dumps(
        {"to": "ann", "from": "2026-01-01T00:00:00", "until": SOON[1]}), "alice", 422,
        "timezone"),
    "substitute 51 templates": ("PUT", "/api/me/substitute", json.dumps(
        {"to": "ann", "from": SOON[0], "until": SOON[1],
         "templates": [f"t{i}" for i in range(51)]}), "alice", 422, "at most 50 items"),
    "substitute template name of 101": ("PUT", "/api/me/substitute", json.dumps(
        {"to": "ann", "from": SOON[0], "until": SOON[1], "templates": ["t" * 101]}), "alice",
        422, "at most 100 characters"),
    "substitute surrogate": ("PUT", "/api/me/substitute",
                             f'{{"to": "{SURROGATE}", "from": "{SOON[0]}", "until": '
                             f'"{SOON[1]}"}}', "alice", 422, "lone surrogate"),
    # drafts (SPEC §16)
    "draft body not an object": ("POST", "/api/drafts", '{"body": [1]}', "admin", 422,
                                 "valid dictionary"),
    "sandbox answer status 600": ("POST", "/api/drafts/1/try/circles/a/answer",
                                  '{"status": 600}', "admin", 422, "less than or equal"),
    # operations (SPEC §18)
    "operation both filter and instances": ("POST", "/api/operations", json.dumps(
        {"action": "abort", "filter": {}, "instances": ["{iid}"]}), "admin", 422,
        "either a filter or a list of instances"),
    "operation filter time without a zone": ("POST", "/api/operations", json.dumps(
        {"action": "abort", "filter": {"started_after": "2026-01-01T00:00:00"}}), "admin",
        422, "timezone"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_bodies_get_a_clear_4xx_and_change_nothing(client, name):
    method, path, body, who, status, detail = HOSTILE[name]
    store = client.store
    inst = store.start("simple", {}, store.user("alice"))
    hand = store.start("hand", {}, store.user("admin"))
    fill = {"{iid}": inst.id, "{mark}": store.engine.bookmark(inst, "a"), "{hand}": hand.id,
            "{hmark}": store.engine.bookmark(hand, "h")}
    for key, value in fill.items():
        path = path.replace(key, value)
        body = body.replace(key, value) if isinstance(body, str) else body
    events = len(store.history(inst.id)), len(store.history(hand.id))
    count = store.list_instances(None, None, None, 1, 0)[1]
    r = client(method, path, body, who)
    assert r.status_code == status, r.text
    said = r.json()["detail"]
    assert detail in (said if isinstance(said, str) else json.dumps(said, ensure_ascii=False))
    assert secured(r)
    assert (len(store.history(inst.id)), len(store.history(hand.id))) == events
    assert store.list_instances(None, None, None, 1, 0)[1] == count


def test_a_substitute_cycle_or_a_disabled_substitute_is_refused(client):
    """alice → ann stands; ann → alice would close a cycle; a disabled account cannot
    stand in: each a 422 naming why, and ann keeps having no substitute."""
    store = client.store
    if not store.username_taken("gone"):  # the module's store, for both paths
        store.add_user("gone", "pw-gone-1", ["user"])
        store.disable_user("gone")
    body = {"from": SOON[0], "until": SOON[1]}
    try:
        assert client("PUT", "/api/me/substitute", json.dumps({**body, "to": "ann"}),
                      "alice").status_code == 200
        r = client("PUT", "/api/me/substitute", json.dumps({**body, "to": "alice"}), "ann")
        assert (r.status_code, r.json()["detail"]) == (
            422, "alice's substitutes lead back to ann: substitutes may not form a cycle")
        r = client("PUT", "/api/users/ann/substitute", json.dumps({**body, "to": "gone"}),
                   "admin")
        assert (r.status_code, r.json()["detail"]) == (
            422, "no user 'gone' (or the account is disabled)")
        assert client("GET", "/api/me/substitute", None, "ann").status_code == 404
    finally:
        client("DELETE", "/api/me/substitute", None, "alice")


@pytest.mark.parametrize("amount", [2 ** 63 - 1, -2 ** 63, 1.5e308, -0.0])
def test_numbers_at_the_edges_are_taken(client, amount):
    r = client("POST", "/api/instances", json.dumps({"template": "needs",
                                                     "inputs": {"amount": amount}}))
    assert r.status_code == 201, r.text
    assert r.json()["circles"]["x"]["state"] == "success"


def test_a_pair_of_surrogates_is_text(client):
    r = client("POST", "/api/guest/messages",
               '{"name": "\\ud83d\\ude00", "subject": "s", "body": "b"}', None)
    assert r.status_code == 201, r.text
    mail = client("GET", "/api/mailbox", who="admin", headers={}).json()
    assert [m["sender"] for m in mail if m["kind"] == "guest"][0] == "\U0001f600"


def test_every_answer_carries_the_security_headers(client):
    store = client.store
    inst = store.start("simple", {}, store.user("alice"))
    answers = {
        "health": client("GET", "/api/health", who=None),
        "401": client("GET", "/api/instances", who=None),
        "404": client("GET", "/api/instances/nope"),
        "422 (framework)": client("POST", "/api/instances", "{not json"),
        "422 (guard)": client("POST", "/api/instances", '{"template": NaN}'),
        "start": client("POST", "/api/instances", '{"template": "simple"}'),
        "complete": client("POST", f"/api/instances/{inst.id}/circles/a/complete",
                           json.dumps({"bookmark": store.engine.bookmark(inst, "a"),
                                       "result": {"n": 1}})),
        "409 (short path)": client("POST", f"/api/instances/{inst.id}/circles/a/complete",
                                   '{"bookmark": "0.x"}'),
        "unknown path": client("GET", "/api/nothing-here"),
        "a page outside /api": client("GET", "/nothing-here", who=None),
        "openapi": client("GET", "/api/openapi.json", who=None),
        "docs": client("GET", "/api/docs", who=None),
    }
    assert [k for k, r in answers.items() if not secured(r)] == []
    assert answers["start"].status_code == 201 and answers["complete"].status_code == 200


HANDOVER = {"name": "ask", "circles": [
    {"uri": "ok", "box": {"action": {"type": "approval", "to": ["ann", "admin"],
                                     "subject": "please"}}}]}


def test_hand_overs_get_a_clear_4xx_change_nothing_and_a_decision_on_transferred_mail_is_recorded(
        client):
    """Transfer and delegate (SPEC §15) to nobody, a disabled user, oneself, someone who
    may not approve, someone asked already, with text that is not text; a decision on a
    mail transferred away, again on a request no longer pending."""
    from bpflow.mailbox import Mailbox
    from bpflow.worker import Worker
    store = client.store
    store.put_template(HANDOVER)
    if not store.username_taken("gone"):  # the store is the module's
        store.add_user("gone", "pw-gone", ["approver"])
        store.disable_user("gone")
    if store.user("pat") is None:
        store.add_user("pat", "pw-pat", ["approver"])
    iid = store.start("ask", {}, store.user("alice")).id
    Worker(store).run_once()
    mail = next(m for m in Mailbox(store).inbox(store.user("ann"), kind="approval")
                if m["instance"] == iid)["id"]
    base = f"/api/mailbox/{mail}"
    refused = [
        ("transfer", '{"to": "nobody"}', 422, "no user named nobody"),
        ("transfer", '{"to": "gone"}', 422, "no user named gone"),
        ("delegate", '{"to": "gone"}', 422, "no user named gone"),
        ("transfer", '{"to": "ann"}', 422, "other than yourself"),
        ("transfer", '{"to": "alice"}', 422, "not an approver"),
        ("transfer", '{"to": "admin"}', 422, "asked in this approval already"),
        ("transfer", f'{{"to": "{SURROGATE}"}}', 422, "lone surrogate"),
        ("delegate", f'{{"to": "pat", "comment": "{SURROGATE}"}}', 422, "lone surrogate"),
        ("transfer", '{"to": "' + "p" * 101 + '"}', 422, "at most 100"),
        ("transfer", '{"comment": "no one named"}', 422, "Field required"),
    ]
    events = len(store.history(iid))
    for what, body, status, detail in refused:
        r = client("POST", f"{base}/{what}", body, "ann")
        assert r.status_code == status, (what, body, r.text)
        assert detail in json.dumps(r.json()["detail"], ensure_ascii=False), (body, r.text)
        assert secured(r)
    assert len(store.history(iid)) == events
    assert client("POST", f"{base}/transfer", '{"to": "pat"}', "alice").status_code == 404
    r = client("POST", f"{base}/transfer", '{"to": "pat", "comment": "over to you"}', "ann")
    assert r.status_code == 200 and r.json()["payload"]["approver"] == "pat"
    r = client("POST", f"{base}/decision", '{"decision": "approved"}', "ann")
    assert r.status_code == 409 and "transferred" in r.json()["detail"]
    refusals = [e for e in store.history(iid) if e["kind"] == "approval_refused"]
    assert refusals[-1]["data"]["by"] == "ann"
    r = client("POST", f"{base}/transfer", '{"to": "pat"}', "ann")
    assert r.status_code == 409
    r = client("POST", f"{base}/delegate", '{"to": "pat"}', "ann")
    assert r.status_code == 409
