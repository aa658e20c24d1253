"""The webhooks page's state (SPEC §11): an admin adds a webhook (its fields checked, the
egress guard asked), sees its deliveries and deletes it after a confirmation; only admins
see or change webhooks, and only their tenant's."""

from __future__ import annotations

from bpflow.auth import issue_token
from bpflow_app.pages.webhooks_state import DEFAULT_TYPES, WebhooksState
from tests.app.helpers import run

URL = "http://127.0.0.1:9/hook"


def added(make_state, url: str = URL):
    state = make_state(WebhooksState, user="root")
    state.load()
    run(state.add({"url": url}))
    return state


def test_an_admin_adds_a_webhook_and_sees_its_deliveries(make_state, web_store):
    state = make_state(WebhooksState, user="root")
    state.load()
    assert state.hooks == [] and len(state.secret) >= 16
    secret = state.secret
    state.toggle("circle.left", True)
    state.toggle("instance.failed", False)
    assert state.picked == ["instance.completed", "circle.left"]
    events = run(state.add({"url": URL}))
    assert state.errors == {} and "Added" in str(events)
    [line] = state.hooks
    assert (line.url, line.events, line.state) == (URL, "instance.completed, circle.left",
                                                    "active")
    [hook] = web_store.webhooks()
    assert state.chosen == hook["id"] and state.deliveries == []
    assert state.secret != secret  # a new one for the next webhook; this one is not kept
    web_store.put_template({"name": "quick", "circles": [{"uri": "a"}]})
    web_store.start("quick", {}, web_store.user("root"))  # done at once
    assert web_store.of(None).hand_out() == 2
    state.refresh()
    assert [(d.type, d.state, d.attempts) for d in state.deliveries] == [
        ("instance.completed", "pending", 0), ("circle.left", "pending", 0)]
    assert state.hooks[0].pending == 2


def test_a_bad_webhook_is_refused_field_by_field(make_state, web_store, monkeypatch):
    state = make_state(WebhooksState, user="root")
    state.load()
    run(state.add({"url": "ftp://127.0.0.1/x"}))
    assert "http" in state.errors["url"]
    monkeypatch.delenv("BPFLOW_EGRESS_ALLOW", raising=False)
    run(state.add({"url": URL}))
    assert "loopback" in state.errors["url"]
    monkeypatch.setenv("BPFLOW_EGRESS_ALLOW", "127.0.0.1")
    for kind in DEFAULT_TYPES:
        state.toggle(kind, False)
    run(state.add({"url": URL}))
    assert "at least one" in state.errors["events"]
    state.toggle("instance.started", True)
    state.set_secret("short")
    run(state.add({"url": URL}))
    assert "16" in state.errors["secret"]
    assert web_store.webhooks() == []


def test_deleting_asks_first(make_state, web_store):
    state = added(make_state)
    [hook] = web_store.webhooks()
    state.ask_delete(hook["id"])
    assert state.deleting == hook["id"]
    state.cancel_delete()
    assert state.deleting == 0 and len(web_store.webhooks()) == 1
    state.ask_delete(hook["id"])
    events = run(state.confirm_delete())
    assert web_store.webhooks() == [] and state.hooks == [] and state.chosen == 0
    assert "Deleted" in str(events)


def test_only_admins_see_and_change_webhooks(make_state, web_store):
    added(make_state)
    state = make_state(WebhooksState, user="alice")
    events = run(state.load())
    assert state.hooks == [] and "administrators" in str(events).lower()
    run(state.add({"url": URL}))
    [hook] = web_store.webhooks()
    state.ask_delete(hook["id"])
    run(state.confirm_delete())
    assert len(web_store.webhooks()) == 1


def test_an_admin_sees_only_the_tenants_webhooks(make_state, web_store):
    added(make_state)
    web_store.add_tenant("acme")
    acme = web_store.of("acme")
    acme.add_user("boss", "boss-password", ["admin"])
    state = make_state(WebhooksState)
    state.token = issue_token(acme.user("boss"))
    state.load()
    assert state.hooks == []
    [theirs] = web_store.webhooks()
    state.choose(theirs["id"])
    assert state.deliveries == [] and state.chosen == 0
    state.ask_delete(theirs["id"])
    events = run(state.confirm_delete())
    assert "no webhook" in str(events) and len(web_store.webhooks()) == 1


def test_the_pages_messages_are_in_the_pages_language(make_state, web_store, monkeypatch):
    state = make_state(WebhooksState, user="root")
    state.choice = "zh-CN"
    state.load()
    for kind in DEFAULT_TYPES:
        state.toggle(kind, False)
    state.set_secret("short")
    events = run(state.add({"url": "ftp://127.0.0.1/x"}))
    assert state.errors == {"url": "只能调用 http 和 https 的 URL",
                            "events": "请至少选择一种事件",
                            "secret": "密钥为 16 到 200 个字符"}
    assert "请检查表单" in str(events)
    state.toggle("instance.started", True)
    state.another_secret()
    monkeypatch.delenv("BPFLOW_EGRESS_ALLOW", raising=False)
    run(state.add({"url": URL}))
    assert state.errors["url"].startswith("bpflow 不能调用这个 URL：")
    assert "loopback" in state.errors["url"]  # the guard's own reason
    monkeypatch.setenv("BPFLOW_EGRESS_ALLOW", "127.0.0.1")
    assert f"已添加发往 {URL} 的 Webhook" in str(run(state.add({"url": URL})))
    [hook] = web_store.webhooks()
    state.ask_delete(hook["id"])
    assert f"已删除发往 {URL} 的 Webhook" in str(run(state.confirm_delete()))
    state.ask_delete(hook["id"])
    assert f"Webhook {hook['id']} 已不存在" in str(run(state.confirm_delete()))


def test_times_are_sent_as_iso_for_the_browser_to_show(make_state, web_store):
    state = added(make_state)
    web_store.put_template({"name": "quick", "circles": [{"uri": "a"}]})
    web_store.start("quick", {}, web_store.user("root"))
    web_store.of(None).hand_out()
    state.refresh()
    assert state.hooks[0].created.endswith("+00:00") and "T" in state.hooks[0].created
    assert all(d.when == "" or d.when.endswith("+00:00") for d in state.deliveries)
