"""Boxes of ready circles: typed fields, substituted texts, action status (running HTTP,
failed with the next retry, approval with approvers and quorum)."""

from __future__ import annotations

from bpflow.interactions import Interactions
from bpflow_app.boxview import Words, box_views, field_view, iso_text
from bpflow_app.flowview import visual_states
from engine.model import Field
from tests.http_server import LocalServer


def _boxes(store, inst_id, lang="en"):
    inst = store.get(inst_id)
    return box_views(Interactions(store), inst, store.engine.statuses(inst),
                     words=Words(lang))


def test_fields_get_inputs_of_their_type():
    number = field_view("c", Field("n", "integer", "N", True, (), 3), 3)
    assert (number.html_type, number.step, number.default) == ("number", "1", "3")
    flag = field_view("c", Field("ok", "boolean"), True)
    assert flag.checked and flag.default == ""
    pick = field_view("c", Field("s", "select", "S", False, ("a", 2)), None)
    assert pick.options == ["a", "2"]
    secret = field_view("main.auth", Field("password", "password"), "x")
    assert secret.default == "" and secret.input_id == "f-main-auth-password"


def test_http_box_runs_then_shows_the_failure_and_the_next_retry(web_store, work):
    with LocalServer() as server:
        web_store.put_template({"name": "h", "circles": [
            {"uri": "call", "box": {"action": {"type": "http", "method": "POST",
                                               "url": server.url + "/status/500"}},
             "retry": [600]},
            {"uri": "end", "deps": [["call"]]}]})
        inst = web_store.start("h", {}, web_store.user("alice"))
        running = _boxes(web_store, inst.id)
        assert (running[0].tone, running[0].status_title) == ("running", "Working on it")
        # the engine's detail is for the technical view
        assert running[0].status_lines == []
        assert running[0].tech_lines == [f"POST {server.url}/status/500"]
        work()
    box = _boxes(web_store, inst.id)[0]
    assert box.tone == "retrying" and box.status_title == "Failed, will retry"
    assert box.status_lines == ["Try 2 of 2."]
    assert "answered HTTP 500" in box.tech_lines[0]
    run_ = web_store.get(inst.id).circles["call"]
    assert box.at == iso_text(run_.next_attempt_at)  # shown by the browser, in its zone
    assert _boxes(web_store, inst.id, "zh-CN")[0].status_title == "失败，将重试"
    assert visual_states(web_store.engine, web_store.get(inst.id))["call"] == "retrying"


def test_approval_box_names_approvers_and_quorum(web_store, work):
    web_store.put_template({"name": "two", "circles": [
        {"uri": "ask", "box": {"action": {"type": "approval", "to": ["bob", "root"],
                                          "quorum": 1, "subject": "For ${user.username}"}}},
        {"uri": "end", "deps": [["ask"]]}]})
    inst = web_store.start("two", {}, web_store.user("alice"))
    work()
    box = _boxes(web_store, inst.id)[0]
    assert box.tone == "approval" and box.approvers == ["bob", "root"]
    assert box.quorum == "1 of 2 approvals needed"
    assert box.status_lines == ["Subject: For alice"]
    assert box.title == "ask"  # no description written: the uri names the step
    zh = _boxes(web_store, inst.id, "zh-CN")[0]
    assert (zh.status_title, zh.quorum) == ("等待审批", "2 人中 1 人同意即可")


def test_a_waiting_timer_says_when_it_fires(web_store):
    """A ready timer waits for the clock, not for a person (the engine does not count it
    as ready); its box still says when it fires instead of "Nothing to do"."""
    web_store.put_template({"name": "later", "circles": [
        {"uri": "wait", "box": {"action": {"type": "timer", "delay": 3600}}},
        {"uri": "end", "deps": [["wait"]]}]})
    inst = web_store.start("later", {}, web_store.user("alice"))
    run = inst.circles["wait"]
    assert run.due_at is not None and web_store.engine.ready(inst) == []
    [box] = _boxes(web_store, inst.id)
    assert (box.cid, box.kind, box.tone, box.status_title) == ("wait", "status", "timer",
                                                               "Waiting for its time")
    assert box.at == iso_text(run.due_at) and "UTC" not in box.at
    web_store.apply(inst.id, lambda e, i: e.suspend(i))
    assert _boxes(web_store, inst.id) == []  # a suspended flow's timer does not run


def test_a_user_field_offers_the_people_it_may_name():
    pick = field_view("c", Field("manager", "user", "Manager", True, (), role="approver"),
                      "ann", people=["ann", "bob"])
    assert pick.type == "user" and pick.options == ["ann", "bob"] and pick.default == "ann"
    many = field_view("c", Field("m", "user"), None, people=[f"u{i}" for i in range(501)])
    assert many.options == []  # too many to list: typed, and checked by the server


def test_a_fields_texts_in_several_languages_are_read_in_the_readers():
    """Templates may give a label and an option's label per language (SPEC §17): the
    reader's, else English; what a choice stores stays its value."""
    from engine.model import _field
    f = _field({"name": "kind", "type": "select",
                "label": {"en": "Kind of expense", "zh-CN": "费用类型"},
                "options": [{"value": "taxi", "label": {"en": "Taxi", "zh-CN": "出租车"}},
                            "hotel"]})
    zh, en, fr = (field_view("c", f, None, lang=code) for code in ("zh-CN", "en", "fr"))
    assert (zh.label, zh.options, zh.option_labels) == ("费用类型", ["taxi", "hotel"],
                                                        ["出租车", "hotel"])
    assert (en.label, en.option_labels) == ("Kind of expense", ["Taxi", "hotel"])
    assert (fr.label, fr.option_labels) == ("Kind of expense", ["Taxi", "hotel"])


