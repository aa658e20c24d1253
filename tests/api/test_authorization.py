"""Who may do what: anonymous, the owner (alice), another user (bob), an approver (ann) and
an admin against every endpoint, in one table. Each cell runs on fresh state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bpflow import files
from bpflow.access import Caller
from bpflow.mailbox import Mailbox
from bpflow.worker import Worker

FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["a"]]}]}
APPROVAL = {"name": "ask", "circles": [
    {"uri": "ok", "box": {"action": {"type": "approval", "to": "ann", "subject": "please"}}}]}
PDF = b"%PDF-1.4\n%%EOF\n"
WHO = ("anonymous", "alice", "bob", "ann", "admin")

# endpoint -> expected status for anonymous, alice (owner), bob, ann (approver), admin
MATRIX = {
    "GET /api/health": (200, 200, 200, 200, 200),
    "GET /api/templates": (401, 200, 200, 200, 200),
    "POST /api/templates": (401, 403, 403, 403, 200),
    "GET /api/templates/simple": (401, 200, 200, 200, 200),
    "GET /api/templates/simple/stats": (401, 200, 200, 200, 200),
    "POST /api/instances": (401, 201, 201, 201, 201),
    "GET /api/instances": (401, 200, 200, 200, 200),
    "GET /api/instances/{iid}": (401, 200, 404, 404, 200),
    "GET /api/instances/{iid}/history": (401, 200, 404, 404, 200),
    "GET /api/instances/{iid}/reset-preview?uri=a": (401, 200, 404, 404, 200),
    "POST /api/instances/{iid}/circles/a/complete": (401, 200, 404, 404, 200),
    "POST /api/instances/{iid}/circles/a/fail": (401, 200, 404, 404, 200),
    "POST /api/instances/{iid}/reset": (401, 409, 404, 404, 409),
    "POST /api/instances/{iid}/suspend": (401, 200, 404, 404, 200),
    "POST /api/instances/{iid}/resume": (401, 409, 404, 404, 409),
    "POST /api/instances/{iid}/abort": (401, 200, 404, 404, 200),
    # ann was asked about it: she may follow it, not complete it by hand
    "POST /api/instances/{approval}/circles/ok/complete": (401, 403, 404, 403, 200),
    "GET /api/instances/{approval}": (401, 200, 404, 200, 200),
    "GET /api/tasks": (401, 200, 200, 200, 200),
    "POST /api/instances/{iid}/circles/a/claim": (401, 200, 404, 404, 409),  # alice holds it
    "POST /api/instances/{iid}/circles/a/unclaim": (401, 200, 404, 404, 200),
    "POST /api/instances/{iid}/circles/a/assign": (401, 403, 404, 404, 200),
    "POST /api/instances/{iid}/circles/a/withdraw": (401, 409, 404, 404, 409),  # the first
    # delegate (委派): the assignee only (an admin transfers instead)
    "POST /api/instances/{iid}/circles/a/delegate": (401, 200, 404, 404, 403),
    # copies and urges (SPEC §15): the starter, an assignee or an admin copies; whoever
    # sees it reads who was copied; the starter or an admin urges (ann only follows)
    "POST /api/instances/{iid}/cc": (401, 200, 404, 404, 200),
    "POST /api/instances/{approval}/cc": (401, 200, 404, 403, 200),
    "GET /api/instances/{iid}/cc": (401, 200, 404, 404, 200),
    "GET /api/instances/{approval}/cc": (401, 200, 404, 200, 200),
    "POST /api/instances/{approval}/urge": (401, 200, 404, 403, 200),
    "POST /api/instances/{iid}/urge": (401, 409, 404, 404, 200),  # waits for alice only
    # return to an earlier step (SPEC §15): the approval's pending approver, the task's
    # people, admins; nothing comes before either circle: 409 once allowed
    "GET /api/instances/{approval}/circles/ok/return-targets": (401, 403, 404, 200, 200),
    "POST /api/instances/{approval}/circles/ok/return": (401, 403, 404, 409, 409),
    "GET /api/instances/{iid}/circles/a/return-targets": (401, 200, 404, 404, 200),
    "POST /api/instances/{iid}/circles/a/return": (401, 409, 404, 404, 409),
    "GET /api/mailbox": (401, 200, 200, 200, 200),
    "POST /api/mailbox/{mail}/decision": (401, 404, 404, 200, 404),
    # add signers: the addressee; remove signers: the starter or an admin (422: the name
    # is not in the round, past the authorization), the addressee 403
    "POST /api/mailbox/{mail}/signers": (401, 404, 404, 200, 404),
    "DELETE /api/mailbox/{mail}/signers": (401, 422, 404, 403, 422),
    "POST /api/mailbox/{mail}/transfer": (401, 404, 404, 200, 404),
    "POST /api/mailbox/{mail}/delegate": (401, 404, 404, 200, 404),
    "POST /api/guest/messages": (201, 201, 201, 201, 201),
    # account basics: admins reset others' passwords; a wrong current password is 422
    "POST /api/users/bob/password": (401, 403, 403, 403, 200),
    "POST /api/auth/password": (401, 422, 422, 422, 422),
    # substitutes: one's own (ann as her own: 422), an admin's for anyone (SPEC §15)
    "PUT /api/me/substitute": (401, 200, 200, 422, 200),
    "GET /api/me/substitute": (401, 404, 404, 404, 404),
    "DELETE /api/me/substitute": (401, 404, 404, 404, 404),
    "PUT /api/users/bob/substitute": (401, 403, 200, 403, 200),
    "GET /api/users/bob/substitute": (401, 403, 404, 403, 404),
    "DELETE /api/users/bob/substitute": (401, 403, 404, 403, 404),
    # comments and files (SPEC §15): whoever sees the instance; an upload no form holds
    # yet is its uploader's alone
    "POST /api/instances/{iid}/comments": (401, 201, 404, 404, 201),
    "GET /api/instances/{iid}/comments": (401, 200, 404, 404, 200),
    "POST /api/instances/{approval}/comments": (401, 201, 404, 201, 201),
    "GET /api/instances/{approval}/files": (401, 200, 404, 200, 200),
    "POST /api/files": (401, 201, 201, 201, 201),
    "GET /api/files/{upload}": (401, 200, 404, 404, 404),
    "GET /api/files/{held}": (401, 200, 404, 200, 200),
    # drafts (SPEC §16): admins and designers (none of these four is a designer)
    "GET /api/drafts": (401, 403, 403, 403, 200),
    "POST /api/drafts": (401, 403, 403, 403, 201),
    "POST /api/drafts/1/try": (401, 403, 403, 403, 404),  # no draft 1 (trying: SPEC §16)
    # the audit log (SPEC §18): admins only
    "GET /api/audit": (401, 403, 403, 403, 200),
    # operations (SPEC §18): admins only
    "POST /api/operations": (401, 403, 403, 403, 202),
    "GET /api/operations/lists/instances": (401, 403, 403, 403, 200),
    "GET /api/operations/lists/incidents": (401, 403, 403, 403, 200),
    "GET /api/templates/simple/durations": (401, 403, 403, 403, 200),
}
NOW = datetime.now(UTC)
BODIES = {
    "/api/templates": FORM, "/api/instances": {"template": "simple"},
    "/api/drafts": {"body": FORM},
    "/api/operations": {"action": "suspend", "filter": {"template": "simple"}},
    "complete": {"bookmark": "{bookmark}", "result": {"n": 1}},
    "fail": {"bookmark": "{bookmark}", "reason": "no"}, "reset": {"uri": "a"},
    "abort": {"reason": "stop"}, "decision": {"decision": "approved"},
    "assign": {"to": "bob"}, "signers": {"users": ["admin"], "where": "with"},
    "transfer": {"to": "admin"}, "delegate": {"to": "bob"},
    "comments": {"text": "a comment"},
    "/cc": {"users": ["bob"], "comment": "FYI"}, "/urge": {"comment": "please"},
    "/return": {"comment": "amend it"},
    "/api/guest/messages": {"name": "Guest", "subject": "hi", "body": "hello"},
    "/api/users/bob/password": {"password": "bob-new-password"},
    "/api/auth/password": {"current_password": "not-mine", "new_password": "a-new-password"},
    "/substitute": {"to": "ann", "from": (NOW - timedelta(hours=1)).isoformat(),
                    "until": (NOW + timedelta(days=7)).isoformat()},
}


def body_for(path: str) -> dict | None:
    for key, body in BODIES.items():
        if path.endswith(key):
            return body
    return None


@pytest.mark.parametrize("endpoint", sorted(MATRIX))
def test_authorization_matrix(api, endpoint):
    store = api.store
    with api.client("admin") as c:
        c.post("/api/templates", json=FORM)
        c.post("/api/templates", json=APPROVAL)
    alice = store.user("alice")
    failures = []
    for who, expected in zip(WHO, MATRIX[endpoint], strict=True):
        inst = store.start("simple", {}, alice)  # fresh state for every cell
        asked = store.start("ask", {}, alice)
        Worker(store).run_once()
        mail = Mailbox(store).inbox(store.user("ann"), kind="approval")[0]["id"]
        bookmark = store.engine.bookmark(inst, "a")
        upload = files.upload(store, Caller.of(alice), "r.pdf", PDF)["id"]
        held = files.upload(store, Caller.of(alice), "h.pdf", PDF)["id"]
        store.bind_file(held, alice["id"], asked.id, "ok")
        method, path = endpoint.split(" ")
        path = path.format(iid=inst.id, approval=asked.id, mail=mail, upload=upload,
                           held=held)
        body = body_for(path.split("?")[0])
        if body and "bookmark" in body:
            mark = store.engine.bookmark(store.get(asked.id), "ok") if "{approval}" in \
                endpoint else bookmark
            body = {**body, "bookmark": mark}
        with api.client(None if who == "anonymous" else who) as c:
            got = c.post(path, files={"file": ("r.pdf", PDF)}).status_code \
                if path == "/api/files" else c.request(method, path, json=body).status_code
        if got != expected:
            failures.append(f"{who}: expected {expected}, got {got}")
    assert not failures, f"{endpoint}: " + "; ".join(failures)
