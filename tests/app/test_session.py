"""The session against the users table (SPEC §13): a disabled account's session ends, a
demoted admin is no admin, roles are the table's; the sign-in form counts failures per
account and browser address; admins disable accounts on the users page."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from bpflow import auth
from bpflow.errors import Unauthorized
from bpflow_app.frame_state import FrameState, SignInState
from bpflow_app.pages.users_state import UsersState
from bpflow_app.session import NotAdmin, SessionState
from tests.app.helpers import run


@pytest.fixture(autouse=True)
def fresh_limiter(monkeypatch):
    monkeypatch.setattr(auth, "SIGN_IN_FAILURES", auth.SignInLimit(limit=3))


def set_roles(store, name: str, roles: list[str]) -> None:
    with store.db.begin() as conn:  # as another process would
        conn.execute(text("UPDATE users SET roles = :r WHERE username = :n"),
                     {"r": json.dumps(roles), "n": name})


def test_a_disabled_accounts_session_ends_at_its_next_event(make_state, web_store):
    frame = make_state(FrameState, user="alice")
    assert frame._caller().username == "alice"
    web_store.disable_user("alice")
    with pytest.raises(Unauthorized, match="disabled"):
        frame._caller()
    assert frame._visitor() is None
    events = run(frame.load())
    assert frame.token == "" and events  # signed out, told why


def test_a_demoted_admin_is_no_admin_in_the_web_app(make_state, web_store):
    web_store.account_ttl = 0
    state = make_state(SessionState, user="root")
    assert state._admin().is_admin
    set_roles(web_store, "root", ["user"])
    with pytest.raises(NotAdmin):
        state._admin()
    assert state._caller().roles == ("user",)
    users = make_state(UsersState, user="root")
    users.load()
    assert users.users == []


def test_roles_given_in_the_table_count_without_signing_in_again(make_state, web_store):
    web_store.account_ttl = 0
    state = make_state(UsersState, user="alice")
    set_roles(web_store, "alice", ["admin"])
    state.load()
    assert "alice" in [u.username for u in state.users]


def test_failures_from_one_browser_do_not_lock_out_another(make_state):
    attacker = make_state(SignInState, ip="10.0.0.66")
    for _ in range(3):
        run(attacker.sign_in({"username": "alice", "password": "nope"}))
    run(attacker.sign_in({"username": "alice", "password": "alice-password"}))
    assert attacker.token == "" and "Too many failed attempts" in attacker.error
    owner = make_state(SignInState, ip="10.0.0.1")
    run(owner.sign_in({"username": "alice", "password": "alice-password"}))
    assert owner.token and owner.username == "alice"


def test_a_disabled_account_cannot_sign_in(make_state, web_store):
    web_store.disable_user("alice")
    state = make_state(SignInState)
    run(state.sign_in({"username": "alice", "password": "alice-password"}))
    assert state.token == ""


def test_an_admin_disables_an_account_on_the_users_page(make_state, web_store):
    carol = make_state(FrameState, user="carol")
    state = make_state(UsersState, user="root")
    state.load()
    assert {u.username: u.disabled for u in state.users}["carol"] == ""
    run(state.disable("carol"))
    assert {u.username: u.disabled for u in state.users}["carol"].endswith("+00:00")
    assert web_store.user("carol") is None and carol._visitor() is None
    run(state.disable("root"))  # not oneself
    assert web_store.user("root") is not None
    other = make_state(UsersState, user="alice")
    run(other.disable("bob"))  # admins only
    assert web_store.user("bob") is not None


def test_look_alike_usernames_are_refused_on_the_users_page(make_state, web_store):
    state = make_state(UsersState, user="root")
    for name in ("dave\u200b", "da ve"):
        run(state.add({"username": name, "password": "long-enough", "role": "user"}))
        assert state.errors["username"].startswith("A username has"), name
    assert web_store.user("dave") is None
