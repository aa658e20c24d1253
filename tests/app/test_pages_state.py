"""State handlers of My flows, the guest page, templates and users."""

from __future__ import annotations

import json
from datetime import datetime

from bpflow.languages import pick
from bpflow_app.flowsview import short
from bpflow_app.pages.flows_state import FlowsState
from bpflow_app.pages.guest_state import GuestState
from bpflow_app.pages.templates_state import TemplatesState
from bpflow_app.pages.users_state import UsersState
from bpflow_app.templatesview import in_every_language
from tests.app.helpers import run


def test_my_flows_lists_startable_templates_with_their_inputs(make_state):
    state = make_state(FlowsState, user="root")  # the example `order` is for admins
    state.load()
    names = [t.name for t in state.startables]
    assert "signin" not in names and "reimbursement" in names
    order = next(t for t in state.startables if t.name == "order")
    assert [f.name for f in order.inputs] == ["customer"]
    assert state.total == 0 and state.instances == []


def test_starting_checks_the_declared_inputs(make_state, web_store):
    state = make_state(FlowsState, user="root")
    state.load()
    run(state.start({"__template": "order", "customer": ""}))
    order = next(t for t in state.startables if t.name == "order")
    assert order.inputs[0].error == "customer is required"
    events = run(state.start({"__template": "order", "customer": "ACME"}))
    rows, total = web_store.list_instances(web_store.user("root")["id"])
    assert total == 1 and rows[0]["template"] == "order"
    assert any("/flow/" + rows[0]["id"] in str(e) for e in events)


def _twelve_claims(make_state, web_store):
    """Alice's My flows over twelve expense claims of hers."""
    alice = web_store.user("alice")
    for _ in range(12):
        web_store.start("reimbursement", {}, alice)
    state = make_state(FlowsState, user="alice")
    state.load()
    return state


def test_my_flows_pages_and_shows_the_last_step(make_state, web_store):
    state = _twelve_claims(make_state, web_store)
    assert state.total == 12 and state.pages == 2 and len(state.instances) == 10
    line = state.instances[0]
    assert (line.title, line.last_step, line.step_kind) == (
        "Expense claim", "Fill in the claim", "circle_ready")  # by its description
    assert (line.waits, line.waits_you, line.summary) == ("alice", True, "")
    assert datetime.fromisoformat(line.updated).tzinfo is not None  # ISO, for the page
    state.turn(1)
    assert len(state.instances) == 2 and state.page == 1


def test_my_flows_leaves_the_outer_flows_out_of_every_page(make_state, web_store):
    """The outer flows (the session, `signin`) are not flows anyone started: wherever they
    fall among the user's instances, each page holds ten others, none twice."""
    alice = web_store.user("alice")
    started = []
    for i in range(23):
        if i in (0, 9, 10, 17):  # outer flows before, between and across the pages
            outer = web_store.start("signin", {}, alice)
            web_store.apply(outer.id, lambda e, inst: e.abort(inst, "closed"))
        started.append(web_store.start("reimbursement", {}, alice).id)
    state = make_state(FlowsState, user="alice")
    state.load()
    seen = []
    for page in range(3):
        assert state.total == 23 and state.pages == 3 and state.page == page
        seen += [i.id for i in state.instances]
        assert {i.template for i in state.instances} == {"reimbursement"}
        state.turn(1)
    assert seen == started[::-1]  # newest first, each once


def test_my_flows_filters_by_status_template_and_text(make_state, web_store):
    alice = web_store.user("alice")
    claims = [web_store.start("reimbursement", {}, alice) for _ in range(3)]
    order = web_store.start("order", {"customer": "ACME"}, alice)
    web_store.apply(claims[0].id, lambda e, inst: e.abort(inst, "mistake"))
    outer = web_store.start("signin", {}, alice)  # never listed, whatever the filter
    web_store.apply(outer.id, lambda e, inst: e.abort(inst, "closed"))
    state = make_state(FlowsState, user="alice")
    state.load()
    assert state.total == 4 and not state.filtered
    assert "reimbursement" in state.templates and "signin" not in state.templates

    state.set_status("terminated")
    assert [i.id for i in state.instances] == [claims[0].id] and state.filtered
    state.set_status("running")
    state.set_template("order")
    assert [i.id for i in state.instances] == [order.id]
    state.set_template("reimbursement")
    assert {i.id for i in state.instances} == {c.id for c in claims[1:]}
    state.clear_filters()
    assert state.total == 4

    state.set_query(order.id[:8].upper())  # an id, any case
    assert [i.id for i in state.instances] == [order.id] and state.total == 1
    state.set_query("RESERV")  # a template's name
    assert state.total == 0
    state.set_query("expense CLAIM")  # a title, as the list shows it, in any language
    assert {i.id for i in state.instances} == {c.id for c in claims}
    state.set_query("报销")
    assert {i.id for i in state.instances} == {c.id for c in claims}
    state.set_query("双仓库")
    assert [i.id for i in state.instances] == [order.id]
    state.set_query("claim ready")  # the last step
    assert {i.id for i in state.instances} == {c.id for c in claims}
    state.set_status("running")  # with the other filters
    assert state.total == 2
    state.set_status("nonsense")  # not a status: no filter
    assert state.status == "all" and state.total == 3
    state.set_query("no such thing")
    assert state.instances == [] and state.total == 0 and state.filtered


def test_my_flows_search_pages_through_its_matches(make_state, web_store):
    state = _twelve_claims(make_state, web_store)
    state.turn(1)
    state.set_query("reimb")  # a new filter starts on its first page
    assert (state.page, state.total, len(state.instances)) == (0, 12, 10)
    state.turn(1)
    assert len(state.instances) == 2


def test_my_flows_lists_the_flows_the_user_takes_part_in(make_state, web_store, work):
    from bpflow_app.pages.flow_state import FlowState
    state = make_state(FlowsState, user="bob")
    state.load()
    assert state.taking_part == []
    claim = web_store.start("reimbursement", {}, web_store.user("alice"))
    page = make_state(FlowState, user="alice", path=f"/flow/{claim.id}")
    page.load()
    box = page.boxes[0]
    run(page.submit({"__circle": "claim", "__bookmark": box.bookmark, "amount": "3",
                     "reason": "Tea", "manager": "bob"}))
    work()  # bob gets the approval mail
    state.load()
    [line] = state.taking_part
    assert (line.id, line.template, line.starter) == (claim.id, "reimbursement", "alice")
    assert line.last_step and state.total == 0  # not among bob's own flows
    # by its title, what it is about (the claim's values) and whom it waits for
    assert (line.title, line.summary, line.waits, line.waits_you) == (
        "Expense claim", "3 · Tea · bob", "bob", True)
    mine = make_state(FlowsState, user="alice")
    mine.load()
    [own] = mine.instances
    assert (own.summary, own.waits, own.waits_you) == ("3 · Tea · bob", "bob", False)
    carol = make_state(FlowsState, user="carol")
    carol.load()
    assert carol.taking_part == []


def test_a_flows_summary_and_whom_it_waits_for(make_state, web_store, work):
    """Finance's review waits for a role: "finance" to the claimant, "you" to someone in
    finance; long values are cut, numbers shown as numbers."""
    web_store.add_user("fred", "fred-password", ["user", "finance"])
    alice = web_store.user("alice")
    inst = web_store.start("reimbursement", {}, alice)
    from bpflow.interactions import Interactions
    from bpflow.mailbox import Mailbox
    reason = "A taxi from the airport to the hotel, late at night, with luggage"
    Interactions(web_store).submit(inst.id, "claim", web_store.engine.bookmark(inst, "claim"),
                                   {"amount": 64.0, "reason": reason, "manager": "bob"},
                                   "alice")
    work()
    mail = Mailbox(web_store).inbox(web_store.user("bob"))[0]
    Mailbox(web_store).decide(mail["id"], web_store.user("bob"), "approved")
    work()
    state = make_state(FlowsState, user="alice")
    state.load()
    [line] = state.instances
    assert line.summary == "64 · " + short(reason) + " · bob" and short(reason).endswith("…")
    assert len(short(reason)) == 40
    assert (line.waits, line.waits_you) == ("finance", False)
    assert (line.last_step, line.step_kind) == ("Finance checks the claim", "circle_ready")
    fred = make_state(FlowsState, user="fred")
    fred.load()
    [part] = fred.taking_part
    assert (part.waits, part.waits_you) == ("finance", True)


def test_my_flows_in_the_readers_language(make_state, web_store):
    """A template's texts may be maps of language → text: the reader's, else English,
    else the first; the page's own words follow the reader's choice."""
    assert pick("Expense claim", "zh-CN") == "Expense claim"
    both = {"en": "Expense claim", "zh-CN": "报销"}
    assert (pick(both, "zh-CN"), pick(both, "en"), pick(both, "fr")) == (
        "报销", "Expense claim", "Expense claim")
    assert pick({"zh-CN": "报销"}, "en") == "报销" and pick(None, "en") == ""
    state = make_state(FlowsState, user="root")  # the order example is offered to admins
    state.choice = "zh-CN"
    state.load()
    run(state.start({"__template": "order", "customer": ""}))
    order = next(t for t in state.startables if t.name == "order")
    assert order.inputs[0].error == "请填写customer"
    assert order.title == "双仓库订单"
    assert state.template_titles["reimbursement"] == "报销"  # the shipped title's Chinese


def test_guest_errors_name_the_fields_and_rate_limit_says_when(make_state):
    state = make_state(GuestState)
    run(state.send({"name": "", "subject": "Hi", "body": ""}))
    assert state.errors == {"name": "Your name is required", "body": "Message is required"}
    for i in range(5):
        run(state.send({"name": "Eve", "subject": f"Hi {i}", "body": "x"}))
        assert state.sent
    run(state.send({"name": "Eve", "subject": "Again", "body": "x"}))
    assert "try again in" in state.limited


def test_templates_upload_lists_errors_with_paths(make_state):
    state = make_state(TemplatesState, user="root")
    run(state.load())
    body = {"name": "bad", "circles": [{"uri": "a", "deps": [["zz"]]}, {"uri": "a"}]}
    run(state.paste({"body": json.dumps(body)}))
    paths = {(e.code, e.path) for e in state.errors}
    assert ("unknown_dependency", "/circles/0/deps/0/0") in paths
    assert ("duplicate_uri", "/circles/1/uri") in paths


def test_templates_upload_of_broken_json_says_where(make_state):
    state = make_state(TemplatesState, user="root")
    run(state.paste({"body": '{"name": '}))
    assert state.errors[0].code == "json" and "line 1" in state.errors[0].message


def test_templates_upload_stores_a_new_version_and_previews_it(make_state, web_store):
    state = make_state(TemplatesState, user="root")
    run(state.load())
    body = dict(web_store.latest_body("reimbursement"), title="Expenses")
    run(state.paste({"body": json.dumps(body)}))
    assert state.outcome == "Stored reimbursement version 2" and state.errors == []
    assert (state.name, state.version) == ("reimbursement", 2)
    line = next(t for t in state.items if t.name == "reimbursement")
    assert [v.version for v in line.versions] == [2, 1]
    assert {n.id for n in state.preview.nodes} >= {"claim", "done"}
    run(state.paste({"body": json.dumps(body)}))
    assert state.outcome == "Identical to reimbursement version 2; nothing was stored"


def test_locked_versions_are_marked(make_state, web_store):
    web_store.start("reimbursement", {}, web_store.user("alice"))
    state = make_state(TemplatesState, user="root")
    run(state.load())
    line = next(t for t in state.items if t.name == "reimbursement")
    assert line.versions[0].locked
    assert not next(t for t in state.items if t.name == "order").versions[0].locked


def test_the_templates_pages_messages_are_in_the_pages_language(make_state, web_store):
    state = make_state(TemplatesState, user="root")
    state.choice = "zh-CN"
    run(state.load())
    body = {"name": "bad", "circles": [{"uri": "a", "deps": [["zz"]]}, {"uri": "a"}]}
    assert "模板有 2 个问题" in str(run(state.paste({"body": json.dumps(body)})))
    assert [(e.path, e.message) for e in state.errors] == [  # the analysis' own words too
        ("/circles/0/deps/0/0", "节点“a”依赖“zz”，但它不是本流程的节点"),
        ("/circles/1/uri", "uri“a”已被节点 #0 使用")]
    run(state.paste({"body": '{"name": '}))
    assert state.errors[0].message.startswith("不是 JSON：第 1 行第 10 列")
    body = dict(web_store.latest_body("reimbursement"), title="Expenses")
    assert "已保存 reimbursement 版本 2" in str(run(state.paste({"body": json.dumps(body)})))
    assert state.outcome == "已保存 reimbursement 版本 2"
    assert state.titles == {"en": "Expenses", "zh-CN": "Expenses"}
    run(state.paste({"body": json.dumps(body)}))
    assert state.outcome == "与 reimbursement 版本 2 完全相同，未保存"
    state.ask("signin", True)
    assert "登录会发起这个流程，不能停用" in str(run(state.confirm()))
    state.ask("order", True)
    assert "已停用 order：不能再发起" in str(run(state.confirm()))
    state.ask("order", False)
    assert "已启用 order：可以再次发起" in str(run(state.confirm()))


def test_a_templates_text_is_the_readers_when_it_comes_in_several_languages():
    both = {"en": "Travel request", "zh-CN": "出差申请"}
    assert pick(both, "zh-CN") == "出差申请" and pick(both, "en") == "Travel request"
    assert pick(both, "fr") == "Travel request"  # else English
    assert pick({"zh-CN": "出差申请", "ja": "出張"}, "en") == "出差申请"  # else the first
    assert pick("Travel request", "zh-CN") == "Travel request"  # one text for all
    assert pick(None, "en") == "" and pick({}, "en") == ""
    assert in_every_language({"en": "Travel request"}, "travel") == {
        "en": "Travel request", "zh-CN": "Travel request"}
    assert in_every_language("", "travel") == {"en": "travel", "zh-CN": "travel"}


def test_templates_and_users_are_for_admins_only(make_state):
    state = make_state(TemplatesState, user="alice")
    run(state.load())
    assert state.items == []
    run(state.paste({"body": "{}"}))
    assert state.errors == [] and state.outcome == ""
    users = make_state(UsersState, user="alice")
    run(users.add({"username": "mallory", "password": "long-enough", "role": "admin"}))
    assert users.users == []


def test_admin_adds_a_user_who_can_then_sign_in(make_state, web_store):
    state = make_state(UsersState, user="root")
    run(state.add({"username": "dave", "password": "short", "role": "approver"}))
    assert state.errors == {"password": "A password has at least 8 characters"}
    run(state.add({"username": "dave", "password": "long-enough", "role": "approver"}))
    assert state.errors == {} and "dave" in [u.username for u in state.users]
    assert web_store.authenticate("dave", "long-enough")["roles"] == ["approver"]
    run(state.add({"username": "dave", "password": "long-enough", "role": "user"}))
    assert state.errors["username"] == "The username dave is taken"
