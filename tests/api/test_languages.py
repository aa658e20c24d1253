"""The API's error answers in the language of `Accept-Language` (SPEC §17): the same
request asked in English and in Chinese gets the same status, headers and shape (codes,
paths, field names), only the human words differ; successful answers do not change."""

from __future__ import annotations

import re
from typing import Any

import httpx

from bpflow.limits import MAX_BODY
from bpflow.mailbox import Mailbox
from bpflow.worker import Worker

FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer", "required": True}]}},
    {"uri": "end", "deps": [["a"]]}]}
APPROVAL = {"name": "ask", "circles": [
    {"uri": "ok", "box": {"action": {"type": "approval", "to": "ann", "subject": "please"}}}]}
EN, ZH = {"Accept-Language": "en"}, {"Accept-Language": "zh-CN"}


def asked(c: httpx.Client, method: str, path: str, **kw: Any
          ) -> tuple[httpx.Response, httpx.Response]:
    """The same request in English and in Chinese."""
    headers = kw.pop("headers", {})
    en = c.request(method, path, headers={**EN, **headers}, **kw)
    zh = c.request(method, path, headers={**ZH, **headers}, **kw)
    return en, zh


def words(en: httpx.Response, zh: httpx.Response, status: int) -> tuple[Any, Any]:
    """The two answers' `detail`s, after checking that nothing but their words differ."""
    assert en.status_code == zh.status_code == status, (en.text, zh.text)
    for header in ("www-authenticate", "retry-after", "content-type"):
        assert en.headers.get(header) == zh.headers.get(header)
    return en.json()["detail"], zh.json()["detail"]


def test_a_refusal_says_its_reason_in_the_language_asked_for(api):
    with api.client() as c:  # no token
        assert words(*asked(c, "GET", "/api/instances"), 401) == (
            "missing bearer token", "缺少 Bearer 令牌")
    with api.client("alice") as c:
        assert words(*asked(c, "POST", "/api/templates", json=FORM), 403) == (
            "only admins may do this", "只有管理员可以这样做")
        assert words(*asked(c, "GET", "/api/instances/nope"), 404) == (
            "no instance 'nope'", "流程“nope”不存在")
        # answered by the short path (start), not the framework: the same words
        assert words(*asked(c, "POST", "/api/instances", json={"template": "nope"}), 404) == (
            "no template 'nope'", "模板“nope”不存在")
        # refused by the guard before any route: a limit of JSON, where it was broken
        en, zh = words(*asked(c, "POST", "/api/instances", content=(
            f'{{"template": "simple", "inputs": {{"amount": {2 ** 64}}}}}').encode(),
            headers={"Content-Type": "application/json"}), 422)
        assert en == "an integer outside 64 bits (from -2^63 to 2^63-1) (at /inputs/amount)"
        assert zh == "超出 64 位范围的整数（应在 -2^63 到 2^63-1 之间）（位置：/inputs/amount）"
        assert words(*asked(c, "POST", "/api/instances", content=b" " * (MAX_BODY + 1),
                            headers={"Content-Type": "application/json"}), 413) == (
            f"the request body is larger than {MAX_BODY} bytes", f"请求体超过 {MAX_BODY} 字节")
    with api.client("admin") as c:
        assert words(*asked(c, "POST", "/api/templates/signin/retire"), 409) == (
            "'signin' is the flow signing in starts: it cannot be retired",
            "“signin”是登录时发起的流程，不能停用")
        assert c.post("/api/templates", json=FORM).status_code == 201
    with api.client("alice") as c:  # a move the engine refuses
        inst = c.post("/api/instances", json={"template": "simple"}).json()
        en, zh = words(*asked(c, "POST", f"/api/instances/{inst['id']}/resume"), 409)
        assert en == "cannot resume an instance that is running"
        assert zh == "流程当前为“进行中”，不能恢复"


def test_a_decision_on_a_closed_approval_is_refused_in_the_approvers_language(api):
    with api.client("admin") as c:
        assert c.post("/api/templates", json=APPROVAL).status_code == 201
    api.store.start("ask", {}, api.store.user("alice"))
    Worker(api.store).run_once()
    mail = Mailbox(api.store).inbox(api.store.user("ann"), kind="approval")[0]["id"]
    with api.client("ann") as c:
        assert c.post(f"/api/mailbox/{mail}/decision",
                      json={"decision": "approved"}).status_code == 200
        assert words(*asked(c, "POST", f"/api/mailbox/{mail}/decision",
                            json={"decision": "rejected"}), 409) == (
            f"approval {mail} refused: it was already approved",
            f"无法处理审批 {mail}：该审批已同意")


def test_invalid_input_keeps_its_codes_paths_and_fields(api):
    with api.client() as c:
        en, zh = words(*asked(c, "POST", "/api/auth/token", json={"username": "x"}), 422)
    assert [(e["type"], e["loc"]) for e in en] == [(e["type"], e["loc"]) for e in zh] == [
        ("missing", ["body", "password"])]
    assert (en[0]["msg"], zh[0]["msg"]) == ("Field required", "此项为必填项")
    with api.client() as c:
        en, zh = words(*asked(c, "POST", "/api/auth/token", content=b'{"username": ',
                              headers={"Content-Type": "application/json"}), 422)
    assert [e["type"] for e in en] == [e["type"] for e in zh] == ["json_invalid"]
    assert (en[0]["msg"], zh[0]["msg"]) == ("JSON decode error", "JSON 解析错误")
    with api.client("alice") as c:  # a validator's own message, marked: said in Chinese
        en, zh = words(*asked(c, "POST", "/api/instances", json={
            "template": "simple", "inputs": {"a": "x" * 40_000, "b": "x" * 40_000}}), 422)
    assert [(e["type"], e["loc"]) for e in en] == [(e["type"], e["loc"]) for e in zh] == [
        ("value_error", ["body", "inputs"])]
    assert en[0]["msg"].startswith("Value error, inputs is 80")
    assert zh[0]["msg"].startswith("取值无效：inputs 写成 JSON 有 80")
    assert zh[0]["msg"].endswith("最多允许 65536 字节")

    with api.client("admin") as c:
        assert c.post("/api/templates", json=FORM).status_code == 201
        # a template that does not pass analysis: the same codes at the same paths
        en, zh = words(*asked(c, "POST", "/api/templates", json={
            "name": "loop", "circles": [{"uri": "a", "deps": [["b"]]},
                                        {"uri": "b", "deps": [["a"]]}]}), 422)
        assert [(e["code"], e["path"]) for e in en["errors"]] == \
            [(e["code"], e["path"]) for e in zh["errors"]]
        assert "cycle" in {e["code"] for e in en["errors"]}
    with api.client("alice") as c:
        inst = c.post("/api/instances", json={"template": "simple"}).json()
        mark = inst["circles"]["a"]["bookmark"]
        en, zh = words(*asked(c, "POST", f"/api/instances/{inst['id']}/circles/a/complete",
                              json={"bookmark": mark, "result": {"n": "many"}}), 422)
    assert en == {"errors": {"n": "n must be a whole number"}}  # field names kept
    assert zh == {"errors": {"n": "n必须是整数"}}


def test_the_language_is_the_best_of_ours_the_header_asks_for(api):
    with api.client("alice") as c:
        def said(header: str | None) -> str:
            headers = {"Accept-Language": header} if header is not None else {}
            return c.get("/api/instances/nope", headers=headers).json()["detail"]
        assert said("fr, zh;q=0.8, en;q=0.5") == "流程“nope”不存在"
        assert said("zh-Hans") == said("zh") == said("zh_CN") == "流程“nope”不存在"
        assert said("fr") == said(None) == said("") == said("zh;q=0") == "no instance 'nope'"
        # the framework's own answers: what no route serves, a method no route takes
        assert words(*asked(c, "GET", "/api/nothing-here"), 404) == ("Not Found", "未找到")
        assert words(*asked(c, "DELETE", "/api/health"), 405) == (
            "Method Not Allowed", "不允许的请求方法")
        # answers that are not errors are the same in every language
        for path in ("/api/health", "/api/templates", "/api/instances"):
            en, zh = asked(c, "GET", path)
            assert en.status_code == zh.status_code == 200 and en.content == zh.content


BROKEN = {"name": "broken", "stop_at": "tomorrow", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "select", "options": []}],
                         "action": {"type": "compute", "outputs": {"x": "1 +"}}},
     "retry": {"count": -1}},
    {"uri": "b", "deps": [["a", "zz"]], "when": "${a.n} < 'x' and max(1)"},
    {"uri": "c", "deps": [["b"]], "box": {"confirm": {"fr": "oui"}}}]}
HAN = re.compile(r"[\u4e00-\u9fff]")


def test_an_upload_that_fails_analysis_says_every_problem_in_the_language_asked_for(api):
    """The analysis' problems keep their codes and JSON pointers; each message is the
    catalog's, its values (uris, pointers, what was written) as they were."""
    with api.client("admin") as c:
        en, zh = words(*asked(c, "POST", "/api/templates", json=BROKEN), 422)
    en, zh = en["errors"], zh["errors"]
    assert [(e["code"], e["path"]) for e in en] == [(e["code"], e["path"]) for e in zh]
    assert {e["code"] for e in en} >= {"schema", "invalid_box", "invalid_expression",
                                        "invalid_retry", "unknown_dependency"}
    for one, other in zip(en, zh, strict=True):
        assert not HAN.search(one["message"]) and HAN.search(other["message"]), (one, other)
    said = {(e["path"], e["message"]): z["message"] for e, z in zip(en, zh, strict=True)}
    assert said[("/circles/1/deps/0/1", "circle 'b' depends on 'zz', which is not a circle"
                 " of this flow")] == "节点“b”依赖“zz”，但它不是本流程的节点"
    assert said[("/circles/0/box/action/outputs/x", "circle 'a': unexpected end of"
                 " expression; expected a value")] == "节点“a”：表达式意外结束；这里应为一个值"
    assert said[("/stop_at", "stop_at: 'tomorrow' is not an ISO 8601 time")] == \
        "stop_at：'tomorrow' 不是 ISO 8601 格式的时间"
    assert said[("/circles/0/retry", "circle 'a': retry count must be an integer from 0 to"
                 " 100, got -1")] == "节点“a”：重试次数必须是 0 到 100 的整数，实际为 -1"


def test_the_egress_guard_refuses_a_webhook_in_the_language_asked_for(api, monkeypatch):
    monkeypatch.delenv("BPFLOW_EGRESS_ALLOW", raising=False)
    hook = {"url": "http://10.1.2.3/hook", "events": ["instance.completed"],
            "secret": "s" * 20}
    with api.client("admin") as c:
        assert words(*asked(c, "POST", "/api/webhooks", json=hook), 422) == (
            "url: host 10.1.2.3 is a private address; bpflow calls only public addresses"
            " unless BPFLOW_EGRESS_ALLOW allows it",
            "url：主机 10.1.2.3 是内网地址；除非 BPFLOW_EGRESS_ALLOW 允许，bpflow 只调用公网地址")
