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


# ------------------------------------------------------------- account basics
def test_a_user_changes_their_password_and_their_other_sessions_end(make_state, web_store):
    from bpflow_app.pages.account_state import AccountState
    elsewhere = make_state(FrameState, user="alice")  # another browser of hers
    state = make_state(AccountState, user="alice")
    state.load()
    assert state.roles == ["user"]
    run(state.change_password({"current": "alice-password", "new": "short", "again": "short"}))
    assert state.errors == {"new": "A password has at least 8 characters"}
    run(state.change_password({"current": "alice-password", "new": "alice-new-pw",
                               "again": "alice-new-px"}))
    assert set(state.errors) == {"again"}
    old = state.token
    events = run(state.change_password({"current": "alice-password", "new": "alice-new-pw",
                                        "again": "alice-new-pw"}))
    assert state.errors == {} and "other sessions have ended" in str(events)
    assert state.token != old and state._caller().username == "alice"  # still signed in
    assert web_store.authenticate("alice", "alice-new-pw") is not None
    events = run(elsewhere.load())  # the other browser's next page: the sign-in form
    assert elsewhere.token == "" and "Your password was changed" in str(events)


def test_a_wrong_current_password_counts_as_a_failed_sign_in(make_state, web_store):
    from bpflow_app.pages.account_state import AccountState
    state = make_state(AccountState, user="alice", ip="10.0.0.7")
    for _ in range(3):
        run(state.change_password({"current": "guess", "new": "long-enough",
                                   "again": "long-enough"}))
        assert state.errors == {"current": "Wrong password"}
    run(state.change_password({"current": "alice-password", "new": "long-enough",
                               "again": "long-enough"}))
    assert state.errors["current"].startswith("Too many failed attempts; try again in ")
    assert "%(" not in state.errors["current"]
    signing_in = make_state(SignInState, ip="10.0.0.7")  # the same limit
    run(signing_in.sign_in({"username": "alice", "password": "alice-password"}))
    assert signing_in.token == "" and "Too many failed attempts" in signing_in.error
    assert web_store.authenticate("alice", "alice-password") is not None


def test_an_admin_resets_a_password_and_ends_that_users_sessions(make_state, web_store):
    carol = make_state(FrameState, user="carol")
    state = make_state(UsersState, user="root")
    state.load()
    state.ask_reset("carol")
    assert state.resetting == "carol"
    run(state.reset_password({"password": "short"}))
    assert state.reset_error == "A password has at least 8 characters"
    assert carol._visitor() is not None
    events = run(state.reset_password({"password": "carol-new-password"}))
    assert state.resetting == "" and "carol has a new password" in str(events)
    assert web_store.authenticate("carol", "carol-new-password") is not None
    events = run(carol.load())  # carol's next page: the sign-in form, told why
    assert carol.token == "" and "Your password was changed" in str(events)
    state.ask_reset("root")  # their own: on their account page
    run(state.reset_password({"password": "root-new-password"}))
    assert "account page" in state.reset_error
    assert web_store.authenticate("root", "root-password") is not None
    other = make_state(UsersState, user="alice")  # admins only
    other.ask_reset("bob")
    run(other.reset_password({"password": "bob-new-password"}))
    assert web_store.authenticate("bob", "bob-password") is not None


def test_the_users_page_speaks_chinese(make_state, web_store):
    state = make_state(UsersState, user="root")
    state.choice = "zh-CN"
    run(state.add({"username": "dave", "password": "short", "role": "Boss"}))
    assert state.errors == {"password": "密码至少 8 个字符",
                            "role": state.errors["role"]}
    assert state.errors["role"].startswith("不是有效的角色名：Boss")
    state.ask_reset("carol")
    run(state.reset_password({"password": "short"}))
    assert state.reset_error == "密码至少 8 个字符"
