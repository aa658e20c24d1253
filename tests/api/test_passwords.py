"""Account basics over the API (SPEC §17, §13): a person changes their own password with
the current one (a wrong one counts as a failed sign-in, within the same limit), an
admin resets another's; either way every token of that account issued before is refused,
and the session that changed its own password goes on with the token it was answered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bpflow import auth
from bpflow.api import create_app
from bpflow.auth import issue_token, verify_token
from tests.api.helpers import Client, hostile_store
from tests.conftest import SECRET


@pytest.fixture(autouse=True)
def fresh_limiter(monkeypatch):
    monkeypatch.setattr(auth, "SIGN_IN_FAILURES", auth.SignInLimit(limit=3))


class JsonClient(Client):
    def __call__(self, method: str, path: str, body: Any = None, **kw):  # type: ignore[override]
        return super().__call__(method, path, None if body is None else json.dumps(body), **kw)


@pytest.fixture
def setup(tmp_path):
    store = hostile_store(tmp_path)
    yield store, JsonClient(store, create_app(lambda: store))
    store.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sign_in(call: Client, name: str, password: str):
    return call("POST", "/api/auth/token", {"username": name, "password": password}, who=None)


def test_a_user_changes_their_password_and_their_other_sessions_end(setup):
    store, call = setup
    other = sign_in(call, "alice", "pw-alice").json()["access_token"]  # another device
    this = sign_in(call, "alice", "pw-alice").json()["access_token"]
    assert call("GET", "/api/templates", who=None, headers=bearer(other)).status_code == 200
    r = call("POST", "/api/auth/password", {"current_password": "pw-alice",
                                            "new_password": "alice-new-password"},
             who=None, headers=bearer(this))
    assert r.status_code == 200, r.text
    renewed = r.json()["access_token"]
    assert verify_token(renewed, SECRET).generation == 1
    for old in (other, this):  # both issued before: refused, saying why
        r = call("GET", "/api/templates", who=None, headers=bearer(old))
        assert r.status_code == 401 and "password was changed" in r.json()["detail"]
    assert call("GET", "/api/templates", who=None, headers=bearer(renewed)).status_code == 200
    assert sign_in(call, "alice", "pw-alice").status_code == 401
    assert sign_in(call, "alice", "alice-new-password").status_code == 200
    assert call("GET", "/api/templates", who="ann").status_code == 200  # nobody else's


def test_a_wrong_current_password_counts_against_the_sign_in_limit(setup):
    store, call = setup
    token = issue_token(store.user("alice"), SECRET)
    short = call("POST", "/api/auth/password", {"current_password": "pw-alice",
                                                "new_password": "short"},
                 who=None, headers=bearer(token))
    assert short.status_code == 422
    assert set(short.json()["detail"]["errors"]) == {"new_password"}  # counted nothing
    for _ in range(3):
        r = call("POST", "/api/auth/password", {"current_password": "guess",
                                                "new_password": "long-enough"},
                 who=None, headers=bearer(token))
        assert r.status_code == 422
        assert set(r.json()["detail"]["errors"]) == {"current_password"}
    r = call("POST", "/api/auth/password", {"current_password": "pw-alice",
                                            "new_password": "long-enough"},
             who=None, headers=bearer(token))
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0  # the right one too
    assert sign_in(call, "alice", "pw-alice").status_code == 429  # the same limit
    assert store.authenticate("alice", "pw-alice") is not None  # unchanged
    assert call("GET", "/api/templates", who=None, headers=bearer(token)).status_code == 200


def test_an_admin_resets_a_password_and_that_users_sessions_end(setup):
    store, call = setup
    alice = issue_token(store.user("alice"), SECRET)
    admin = issue_token(store.user("admin"), SECRET)
    for who, name, body, status in (
            ("alice", "ann", {"password": "ann-new-password"}, 403),  # admins only
            ("admin", "admin", {"password": "admin-new-password"}, 403),  # not their own
            ("admin", "nobody", {"password": "long-enough"}, 404),
            ("admin", "alice", {"password": "short"}, 422)):
        r = call("POST", f"/api/users/{name}/password", body, who=who)
        assert r.status_code == status, (who, name, r.text)
    assert call("GET", "/api/templates", who=None, headers=bearer(alice)).status_code == 200
    r = call("POST", "/api/users/alice/password", {"password": "alice-new-password"},
             who="admin")
    assert r.status_code == 200 and r.json() == {"username": "alice", "sessions_ended": True}
    assert call("GET", "/api/templates", who=None, headers=bearer(alice)).status_code == 401
    assert call("GET", "/api/templates", who=None, headers=bearer(admin)).status_code == 200
    assert sign_in(call, "alice", "pw-alice").status_code == 401
    assert sign_in(call, "alice", "alice-new-password").status_code == 200


def test_a_token_issued_before_generations_were_counted_holds_until_a_change(setup):
    import jwt
    store, call = setup
    claims = jwt.decode(issue_token(store.user("alice"), SECRET),
                        options={"verify_signature": False})
    del claims["gen"]  # as issued before migration 0013
    old = jwt.encode(claims, auth._key(SECRET), algorithm="HS256")
    assert call("GET", "/api/templates", who=None, headers=bearer(old)).status_code == 200
    store.set_password("alice", "alice-new-password")
    assert call("GET", "/api/templates", who=None, headers=bearer(old)).status_code == 401
