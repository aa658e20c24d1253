"""The language of a browser's pages (SPEC §17): chosen in the menu and kept with the
account, else the browser's, else English; handlers' texts in it."""

from __future__ import annotations

import pytest
from reflex.istate.data import RouterData

from bpflow_app.frame_state import FrameState, SignInState
from bpflow_app.pages.guest_state import GuestState
from bpflow_app.session import SessionState
from tests.app.helpers import run


def _browser(state, accept_language: str):
    state.router = RouterData.from_router_data(
        {"pathname": "/", "asPath": "/", "ip": "10.0.0.1", "token": "client-1",
         "headers": {"origin": "http://test", "accept-language": accept_language}})
    return state


def _toasts(events) -> str:
    return " ".join(str(e) for e in events)


def test_the_browsers_language_until_one_is_chosen(make_state):
    state = _browser(make_state(GuestState), "zh-CN,zh;q=0.9,en;q=0.8")
    assert state.lang == "zh-CN"
    state.choose("en")
    assert state.lang == "en" and state.choice == "en"
    state.choose("klingon")  # not ours: English
    assert state.lang == "en"
    assert make_state(GuestState).lang == "en"  # no header: English


def test_a_handlers_text_is_in_the_pages_language(make_state):
    state = _browser(make_state(GuestState), "zh-CN")
    events = run(state.send({"name": "", "subject": "Hi", "body": ""}))
    assert state.errors == {"name": "请填写你的姓名", "body": "请填写留言内容"}
    assert "请检查表单" in _toasts(events)


@pytest.mark.parametrize("web_store", ["sqlite", "postgres"], indirect=True)
def test_the_menu_keeps_a_signed_in_persons_choice_with_the_account(make_state, web_store):
    state = make_state(SessionState, user="alice")
    run(state.choose_language("zh-CN"))
    assert web_store.user("alice")["language"] == "zh-CN"
    elsewhere = make_state(FrameState, user="alice")  # another browser, English
    run(elsewhere.load())
    assert elsewhere.lang == "zh-CN"
    assert "已退出登录" in _toasts(run(elsewhere.sign_out()))


def test_a_language_chosen_before_signing_in_becomes_the_accounts(make_state, web_store):
    state = make_state(SignInState)
    run(state.choose_here("zh-CN"))
    assert [f.label for f in state.fields] == ["用户名", "密码"]
    events = run(state.sign_in({"username": "bob", "password": "bob-password"}))
    assert web_store.user("bob")["language"] == "zh-CN"
    assert "已登录" in _toasts(events)


def test_signing_in_brings_the_accounts_language(make_state, web_store):
    web_store.set_language(web_store.user("carol")["id"], "zh-CN")
    state = _browser(make_state(SignInState), "en-US")
    run(state.sign_in({"username": "carol", "password": "carol-password"}))
    assert state.lang == "zh-CN"
    failed = make_state(SignInState)
    run(failed.sign_in({"username": "", "password": ""}))
    assert {f.name: f.error for f in failed.fields} == {
        "username": "Username is required", "password": "Password is required"}
