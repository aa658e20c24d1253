"""Tokens against the users table (SPEC §13): the caller's roles are the table's, not
the token's; a disabled, deleted or unknown account's token is refused (401) within
seconds (at once in the process that disabled it); user ids are never reused. Through the
real API app (its routes and its short path), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from sqlalchemy import text

from bpflow.access import Caller
from bpflow.api import create_app
from bpflow.auth import TokenCache, issue_token
from bpflow.errors import Unauthorized
from tests.conftest import SECRET, run_async
from tests.services.helpers import ROOT, users
from tests.services.test_auth import token_status


def api_status(store, method: str, path: str, token: str, body=None) -> int:
    """The status of one request to the real app (in process), short path included."""
    app = create_app(lambda: store)

    async def send() -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://bpflow.test") as client:
            answer = await client.request(method, path, json=body,
                                          headers={"Authorization": f"Bearer {token}"})
            return answer.status_code
    return run_async(send())


TEMPLATE = {"name": "t", "circles": [{"uri": "a"}, {"uri": "end", "deps": [["a"]]}]}


def test_a_demoted_admin_loses_admin_rights_within_seconds(store):
    root = users(store, "root:admin")["root"]
    token = issue_token(root, SECRET)
    cache = TokenCache(SECRET, store.account)
    assert cache.verify(token).is_admin
    with store.db.begin() as conn:  # another process takes the role away
        conn.execute(text("UPDATE users SET roles = :r WHERE id = :i"),
                     {"r": json.dumps(["user"]), "i": root["id"]})
    deadline = time.monotonic() + 5
    while cache.verify(token).is_admin:
        assert time.monotonic() < deadline, "still an admin after 5 seconds"
        time.sleep(0.1)
    assert cache.verify(token) == Caller(root["id"], "root", ("user",))


def test_the_api_takes_roles_from_the_users_table(store):
    root = users(store, "root:admin")["root"]
    token = issue_token(root, SECRET)
    store.account_ttl = 0  # no reuse: the change shows at once
    assert api_status(store, "POST", "/api/templates", token, TEMPLATE) == 201
    with store.db.begin() as conn:
        conn.execute(text("UPDATE users SET roles = :r WHERE id = :i"),
                     {"r": json.dumps(["user"]), "i": root["id"]})
    assert api_status(store, "POST", "/api/templates", token, TEMPLATE) == 403


def test_a_disabled_users_token_is_refused_at_once_in_this_process(store):
    people = users(store, "bob", "ann")
    store.put_template(TEMPLATE)
    token = issue_token(people["bob"], SECRET)
    assert api_status(store, "GET", "/api/instances", token) == 200
    assert store.disable_user("bob") is True
    assert store.disable_user("bob") is False
    assert api_status(store, "GET", "/api/instances", token) == 401
    assert api_status(store, "POST", "/api/instances", token, {"template": "t"}) == 401
    assert store.authenticate("bob", "pw-bob") is None and store.user("bob") is None
    assert api_status(store, "GET", "/api/instances", issue_token(people["ann"], SECRET)) == 200


def test_a_deleted_users_token_is_refused_and_their_id_never_comes_back(store):
    bob = users(store, "alice", "bob")["bob"]
    store.put_template(TEMPLATE)
    token = issue_token(bob, SECRET)
    store.account_ttl = 0
    with store.db.begin() as conn:  # deleted by hand in the database
        conn.execute(text("DELETE FROM users WHERE id = :i"), {"i": bob["id"]})
    assert api_status(store, "POST", "/api/instances", token, {"template": "t"}) == 401
    carol = users(store, "carol")["carol"]
    assert carol["id"] != bob["id"]
    mine = store.start("t", {}, carol).id
    assert api_status(store, "GET", f"/api/instances/{mine}", token) == 401
    assert api_status(store, "POST", f"/api/instances/{mine}/abort", token,
                      {"reason": "x"}) == 401
    assert store.get(mine).status != "terminated"


def test_a_token_naming_another_user_than_its_id_is_refused(store):
    people = users(store, "alice", "bob")
    forged_by_mistake = {"id": people["alice"]["id"], "username": "bob", "roles": ["user"]}
    with pytest.raises(Unauthorized, match="disabled or no longer exists"):
        TokenCache(SECRET, store.account).verify(issue_token(forged_by_mistake, SECRET))


def test_a_disabled_user_cannot_sign_in_anywhere(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    users(store, "alice")
    store.disable_user("alice")
    assert units.sign_in("alice", "pw-alice") is None
    assert token_status(store, "alice", "pw-alice") == 401
