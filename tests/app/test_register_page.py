"""Self-service registration's state: closed unless the server opens it; what is wrong
with the form said field by field, in the page's language."""

from __future__ import annotations

import pytest

from bpflow_app.pages import register_state
from bpflow_app.pages.register_state import RegisterState
from tests.app.helpers import run


@pytest.fixture
def registering(make_state, monkeypatch):
    monkeypatch.setattr(register_state, "REGISTRATION_OPEN", True)
    return make_state(RegisterState)


def test_a_new_account_is_a_user(registering, web_store):
    run(registering.register({"username": "dora", "password": "dora-pass-1"}))
    assert registering.done and registering.errors == {}
    assert web_store.user("dora")["roles"] == ["user"]


def test_the_forms_problems_are_said_in_the_pages_language(registering, web_store):
    registering.choice = "zh-CN"
    run(registering.register({"username": "", "password": "short"}))
    assert registering.errors == {"username": "用户名为 1 到 100 个字符",
                                  "password": "密码至少 8 个字符"}
    run(registering.register({"username": "do ra", "password": "dora-pass-1"}))
    assert registering.errors == {
        "username": "用户名只能包含字母、数字和 ' + - . @ _（不能包含“ ”）"}
    run(registering.register({"username": "alice", "password": "alice-pass-2"}))
    assert registering.errors == {"username": "已有名为 alice 的账号"}
    assert not registering.done
    registering.choice = "en"
    run(registering.register({"username": "do ra", "password": "x"}))
    assert registering.errors == {
        "username": "A username has letters, digits and ' + - . @ _ only (not “ ”)",
        "password": "A password has at least 8 characters"}


def test_closed_registration_says_so(make_state, web_store):
    state = make_state(RegisterState)
    state.choice = "zh-CN"
    assert "暂不开放注册" in str(run(state.register({"username": "dora",
                                                      "password": "dora-pass-1"})))
    assert web_store.user("dora") is None
