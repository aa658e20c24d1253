"""The designer's state: edits the canvas reports change the body the server keeps, every
change is analysed (errors on the circle their pointer names), undo and redo, the JSON
view, the form builder, publishing, and who may design."""

from __future__ import annotations

import json

from reflex_base.constants.state import FIELD_MARKER

from bpflow.access import Caller
from bpflow_app import designview as dv
from bpflow_app.pages.design_state import DesignJson, DesignState
from bpflow_app.pages.templates_state import TemplatesState
from tests.app.helpers import run


def _designer(make_state, user: str = "root", path: str = "/design") -> DesignState:
    state = make_state(DesignState, user=user, path=path)
    run(state.load())
    return state


def _codes(state: DesignState) -> set[str]:
    return {p.code for p in state.problems if not p.warning}


def test_a_new_design_starts_empty_and_names_its_problems(make_state):
    state = _designer(make_state)
    assert state.allowed and state._body == {"name": "", "circles": []}
    assert state.errors > 0 and "schema" in _codes(state)
    assert json.loads(state._json_text) == state._body


def test_palette_circles_connected_form_a_valid_flow(make_state):
    state = _designer(make_state)
    run(state.set_template("name", "trip"))
    run(state.add("form"))
    run(state.add("approval"))
    assert [c["uri"] for c in state._body["circles"]] == ["form", "approval"]
    assert state.selected == "approval"
    assert "multiple_terminals" in _codes(state)  # two circles, no arrow yet
    run(state.edit({"kind": "connect", "source": "form", "target": "approval"}))
    assert state._body["circles"][1]["deps"] == [["form"]]
    assert state.errors == 0
    nodes = {n["id"]: n for n in state.graph["nodes"]}
    assert nodes["approval"]["position"]["x"] > nodes["form"]["position"]["x"]  # terminal right
    assert [e["id"] for e in state.graph["edges"]] == ["a:approval:0:form"]


def _sent(state: DesignState) -> dict:
    """The canvas's picture in the delta the page would be sent now."""
    delta = state.get_delta()
    state._clean()
    return delta[state.get_full_name()]["graph" + FIELD_MARKER]


def _by_id(items: list[dict]) -> dict[str, dict]:
    return {x["id"]: x for x in items}


def test_the_page_is_sent_the_picture_whole_then_what_changed(make_state):
    state = _designer(make_state)
    for kind in ("form", "approval", "marker"):
        run(state.add(kind))
    whole = _sent(state)
    assert "base" not in whole and whole["nodes"] == state.graph["nodes"]
    held = {"nodes": _by_id(whole["nodes"]), "edges": _by_id(whole["edges"])}

    def applied(sent: dict) -> None:  # as the canvas applies a change
        for part in ("nodes", "edges"):
            for gone in sent["gone_" + part]:
                del held[part][gone]
            held[part].update(_by_id(sent[part]))
        assert held == {"nodes": _by_id(state.graph["nodes"]),
                        "edges": _by_id(state.graph["edges"])}

    run(state.edit({"kind": "connect", "source": "form", "target": "approval"}))
    sent = _sent(state)
    assert (sent["base"], sent["version"]) == (whole["version"], whole["version"] + 1)
    assert [e["id"] for e in sent["edges"]] == ["a:approval:0:form"] and not sent["gone_edges"]
    applied(sent)
    state.edit({"kind": "select", "id": "form"})
    applied(_sent(state))  # the selection: the circle selected and the one before
    run(state.set_circle("when", "${form.field} > 'a'"))  # an error on one circle
    sent = _sent(state)
    assert [n["id"] for n in sent["nodes"]] == ["form"] and sent["nodes"][0]["data"]["errors"]
    applied(sent)
    run(state.edit({"kind": "delete", "ids": ["marker"]}))
    sent = _sent(state)
    assert sent["gone_nodes"] == ["marker"]
    applied(sent)
    run(state.edit({"kind": "picture"}))  # the canvas missed a change: the whole again
    again = _sent(state)
    assert "base" not in again and again["version"] == sent["version"] + 1
    assert _by_id(again["nodes"]) == held["nodes"]


def test_the_json_view_follows_the_analysis_in_a_state_of_its_own(make_state):
    state = _designer(make_state)
    _sent(state)
    steps = state.add("marker")
    next(steps)  # the analysis and the picture are sent first
    delta = state.get_delta()
    state._clean()
    assert state.get_full_name() in delta and DesignJson.get_full_name() not in delta
    run(steps)  # then the JSON view's text, and the draft kept
    delta = state.get_delta()
    state._clean()
    assert state.draft and "graph" + FIELD_MARKER not in delta[state.get_full_name()]
    text = delta[DesignJson.get_full_name()]["json_text" + FIELD_MARKER]
    assert json.loads(text) == state._body and state._body["circles"][0]["uri"] == "marker"


def test_an_error_sits_on_the_circle_its_pointer_names(make_state):
    state = _designer(make_state)
    run(state.set_template("name", "trip"))
    run(state.add("form"))
    run(state.add("timer"))
    run(state.edit({"kind": "connect", "source": "form", "target": "timer"}))
    state.selected = "timer"
    run(state.set_action("delay", "-5"))
    problem = next(p for p in state.problems if p.code == "invalid_box")
    assert problem.pointer.startswith("/circles/1/") and problem.element == "timer"
    node = next(n for n in state.graph["nodes"] if n["id"] == "timer")
    assert node["data"]["errors"] and state.panel.errors
    state.select_problem(problem.pointer)
    assert state.selected == "timer"
    run(state.set_action("delay", "30"))
    assert state.errors == 0 and state._body["circles"][1]["box"]["action"]["delay"] == 30


def test_undo_and_redo_walk_the_changes(make_state):
    state = _designer(make_state)
    run(state.add("marker"))
    run(state.add("marker"))
    assert [c["uri"] for c in state._body["circles"]] == ["marker", "marker_2"]
    run(state.edit({"kind": "undo"}))
    assert [c["uri"] for c in state._body["circles"]] == ["marker"]
    assert state.can_redo
    run(state.redo())
    assert [c["uri"] for c in state._body["circles"]] == ["marker", "marker_2"]
    assert not state.can_redo and json.loads(state._json_text) == state._body


def test_an_or_arrow_is_a_junction_and_deleting_a_circle_drops_its_arrows(make_state):
    state = _designer(make_state)
    for kind in ("marker", "marker", "marker"):
        run(state.add(kind))
    run(state.edit({"kind": "connect", "source": "marker", "target": "marker_3"}))
    state.select("a:marker_3:0:marker")
    run(state.join("marker_2"))
    assert state._body["circles"][2]["deps"] == [["marker", "marker_2"]]
    ids = {n["id"] for n in state.graph["nodes"]}
    assert "j:marker_3:0" in ids
    # a third source dragged onto the junction joins the same OR-arrow
    run(state.add("marker"))
    run(state.edit({"kind": "connect", "source": "marker_4", "target": "j:marker_3:0"}))
    assert state._body["circles"][2]["deps"] == [["marker", "marker_2", "marker_4"]]
    run(state.edit({"kind": "delete", "ids": ["marker_2"]}))
    assert state._body["circles"][1]["deps"] == [["marker", "marker_4"]]
    run(state.edit({"kind": "delete", "ids": ["j:marker_3:0"]}))
    assert "deps" not in state._body["circles"][1]


def test_moving_keeps_ui_positions_and_auto_layout_forgets_them(make_state):
    state = _designer(make_state)
    run(state.add("marker"))
    run(state.edit({"kind": "move", "nodes": [{"id": "marker", "x": 12.4, "y": -3}]}))
    assert state._body["circles"][0]["ui"] == {"x": 12, "y": -3}
    node = state.graph["nodes"][0]
    assert node["position"] == {"x": 12.0, "y": -3.0}
    assert "schema" not in {p.code for p in state.problems if p.pointer.endswith("/ui")}
    run(state.auto_layout())
    assert "ui" not in state._body["circles"][0]


def test_a_json_syntax_error_stays_in_the_view_and_the_canvas_is_kept(make_state):
    state = _designer(make_state)
    run(state.add("marker"))
    before = state._body
    run(state.set_json('{"name": "x", "circles": ['))
    assert state.json_error and state._body == before
    run(state.set_json('{"name": "x", "circles": [{"uri": "only"}]}'))
    assert not state.json_error and state._body["circles"] == [{"uri": "only"}]
    assert state.errors == 0
    run(state.undo())
    assert state._body == before


def test_the_form_builder_adds_orders_and_removes_fields(make_state):
    state = _designer(make_state)
    run(state.add("form"))
    run(state.new_field())
    run(state.set_field(1, "type", "select"))
    run(state.set_field(1, "options", "a, b"))
    run(state.set_field(1, "required", True))
    form = state._body["circles"][0]["box"]["form"]
    assert form[1] == {"name": "field_2", "type": "select", "label": "Field 2",
                       "options": ["a", "b"], "required": True}
    run(state.move_field(1, -1))
    assert [f["name"] for f in state._body["circles"][0]["box"]["form"]] == ["field_2", "field"]
    assert [f.name for f in state.panel.fields] == ["field_2", "field"]
    run(state.remove_field(0))
    run(state.remove_field(0))
    assert "box" not in state._body["circles"][0]


def test_renaming_a_circle_keeps_its_arrows(make_state):
    state = _designer(make_state)
    run(state.add("form"))
    run(state.add("marker"))
    run(state.edit({"kind": "connect", "source": "form", "target": "marker"}))
    state.selected = "form"
    run(state.set_uri("claim"))
    assert state.selected == "claim" and state._body["circles"][1]["deps"] == [["claim"]]
    events = run(state.set_uri("Bad Name"))
    assert events and state._body["circles"][0]["uri"] == "claim"


def test_a_shipped_template_opens_and_publishes_back_unchanged(make_state, web_store):
    state = _designer(make_state, path="/design/reimbursement")
    version, body = web_store.template("reimbursement")[0], \
        web_store.template("reimbursement")[1].body
    assert state.source == "reimbursement" and state._body == body and state.errors == 0
    state.review()
    assert state.asked and not state.changes.new and state.changes.changed == []
    events = run(state.publish())
    assert "no new version" in str(events)
    assert web_store.template("reimbursement")[0] == version
    assert web_store.drafts(None) == []  # the draft made to publish it is gone


def test_every_change_is_kept_as_a_draft_a_reload_opens(make_state, web_store):
    state = _designer(make_state)
    events = run(state.add("confirm"))
    assert state.draft and f"?draft={state.draft}" in str(events)
    run(state.edit({"kind": "move", "nodes": [{"id": "confirm", "x": 40, "y": 50}]}))
    again = _designer(make_state, path=f"/design?draft={state.draft}")
    assert again.draft == state.draft and again._body == state._body
    assert _designer(make_state, user="bob", path=f"/design?draft={state.draft}")._body == {}


def test_publishing_shows_the_changes_and_keeps_the_positions(make_state, web_store):
    state = _designer(make_state)
    run(state.set_json(json.dumps({"name": "designed", "circles": [
        {"uri": "ask", "box": {"confirm": "Go?"}, "ui": {"x": 5, "y": 6}}]})))
    state.review()
    assert state.changes.new
    run(state.publish())
    version, _ = web_store.template("designed")
    assert version == 1 and state.draft == 0 and state.source == "designed"
    assert web_store.layout("designed") == {"ask": {"x": 5, "y": 6}}
    run(state.edit({"kind": "move", "nodes": [{"id": "ask", "x": 90, "y": 6}]}))
    state.review()
    assert state.changes.moved == ["ask"] and state.changes.changed == []


def test_only_admins_and_designers_may_design(make_state, web_store):
    state = _designer(make_state, user="alice")
    assert not state.allowed and not state.can_design
    events = run(state.add("form"))
    assert state._body == {} and "designers" in str(events)
    web_store.set_roles("alice", ["user", "designer"])
    state = _designer(make_state, user="alice")
    assert state.allowed and state.can_design
    run(state.add("form"))
    assert state._body["circles"][0]["uri"] == "form"


def test_auto_positions_put_every_circle_and_survive_cycles():
    body = {"name": "x", "circles": [{"uri": "a", "deps": [["b"]]},
                                     {"uri": "b", "deps": [["a"]]}, {"uri": "c"}]}
    assert set(dv.auto_positions(body)) == {"a", "b", "c"}
    nodes, _ = dv.picture(body, [], "", False)
    assert len(nodes) == 3


def test_the_templates_page_lists_the_drafts(make_state):
    state = _designer(make_state)
    run(state.set_template("name", "trip"))
    templates = make_state(TemplatesState, user="root", path="/templates")
    run(templates.load())
    assert [(d.id, d.name, d.author) for d in templates.drafts] == [(state.draft, "trip",
                                                                     "root")]


def test_every_shipped_template_round_trips_through_the_designer(make_state, web_store):
    names = sorted(web_store.template_versions())
    assert len(names) > 3
    for name in names:
        version, template = web_store.template(name)
        state = _designer(make_state, path=f"/design/{name}")
        assert state._body == template.body and state.errors == 0, name
        nodes = {n["id"] for n in state.graph["nodes"] if n["type"] == "circle"}
        assert nodes == {c["uri"] for c in template.body["circles"]}, name
        run(state.edit({"kind": "undo"}))  # nothing to undo: no draft made
        assert state.draft == 0
        run(state.publish())
        assert web_store.template(name)[0] == version, name
        assert web_store.template(name)[1].body == template.body, name


def test_texts_in_several_languages_stay_maps(make_state):
    state = _designer(make_state, path="/design/reimbursement")
    title = state.template_fields["title"]
    assert json.loads(title) == {"en": "Expense claim", "zh-CN": "报销"}
    run(state.set_template("title", title.replace("报销", "报销单")))
    assert state._body["title"] == {"en": "Expense claim", "zh-CN": "报销单"}
    state.selected = "claim"
    label = state.panel.fields[0].label
    run(state.set_field(0, "label", label.replace("金额", "总额")))
    assert state._body["circles"][0]["box"]["form"][0]["label"]["zh-CN"] == "总额"
    run(state.set_template("title", "Trip {by car}"))
    assert state._body["title"] == "Trip {by car}"


def test_the_approval_chain_quick_form_makes_a_flow_the_canvas_refines(make_state):
    state = _designer(make_state)
    run(state.set_template("name", "leave"))
    state.open_chain()
    assert [(c.kind, c.who) for c in state.chain] == [("field", "manager")]
    state.add_step()
    state.set_step(1, "who", "")
    run(state.make_chain())
    assert state.chain_open and state.chain_error  # a roles step naming nobody
    state.set_step(1, "who", "finance")
    state.add_step()
    state.set_step(2, "kind", "users")
    state.set_step(2, "who", "alice, bob")
    state.set_step(2, "quorum", "sequence")
    run(state.make_chain())
    assert not state.chain_open and state.errors == 0 and state.draft
    assert [c["uri"] for c in state._body["circles"]] == [
        "request", "approve_1", "approve_2", "approve_3", "done"]
    run(state.undo())
    assert state._body["circles"] == []


def test_trying_a_draft_draws_its_states_and_path_and_makes_its_moves(make_state, web_store):
    state = _designer(make_state)
    run(state.set_json(json.dumps({"name": "claimed", "circles": [
        {"uri": "claim", "box": {"form": [
            {"name": "amount", "type": "number", "label": {"en": "Amount"},
             "required": True},
            {"name": "kind", "type": "select", "options": ["travel", "food"]}]}},
        {"uri": "approve", "deps": [["claim"]],
         "box": {"action": {"type": "approval", "to": "admin", "subject": "Claim"}}},
        {"uri": "wait", "deps": [["approve"]],
         "box": {"action": {"type": "timer", "delay": 3600}}},
        {"uri": "done", "deps": [["wait"]]}]})))
    assert state.errors == 0 and not state.trying
    run(state.try_it())
    assert state.trying and state.trial_status == "running"
    states = {n["id"]: n["data"]["state"] for n in state.graph["nodes"]}
    assert states == {"claim": "ready", "approve": "waiting", "wait": "waiting",
                      "done": "waiting"}
    claim = next(n for n in state.graph["nodes"] if n["id"] == "claim")
    assert claim["data"]["fill"] == "#e0e7ff" and "waiting for someone" in claim["ariaLabel"]

    state.selected = "claim"
    panel = state.try_panel
    assert panel.fill and not panel.decide and not panel.confirm
    assert [(f.name, f.label, f.required, f.options) for f in panel.fields] == [
        ("amount", "Amount", True, []), ("kind", "kind", False, ["travel", "food"])]
    events = run(state.try_fill({"amount": "", "kind": "food"}))  # amount is required
    assert "amount" in str(events) and state.try_panel.fill
    run(state.try_fill({"amount": "12.5", "kind": "food"}))
    assert state.trial["circles"]["claim"]["result"] == {"amount": 12.5, "kind": "food"}
    assert state.trial_path == ["claim: done"]
    path = [e["id"] for e in state.graph["edges"] if e.get("className") == "dc-path"]
    assert path == ["a:approve:0:claim"]  # into the approval it reached

    state.selected = "approve"
    assert state.try_panel.decide and not state.try_panel.fill
    run(state.try_decide("approved"))
    state.selected = "wait"
    assert state.try_panel.fire and state.try_panel.fires_at
    run(state.try_fire())
    assert state.trial_status == "completed"
    assert {n["id"]: n["data"]["state"] for n in state.graph["nodes"]} == dict.fromkeys(
        states, "success")
    assert len([e for e in state.graph["edges"] if e.get("className") == "dc-path"]) == 3
    events = run(state.try_fire())  # nothing waits any more
    assert events and state.trial_status == "completed"
    tried = str(state.draft)

    # the sandbox is in no list; stopping deletes it and the canvas draws the draft again
    assert web_store.sandbox(str(state.draft)) is not None
    run(state.stop_trying())
    assert not state.trying and web_store.sandbox(str(state.draft)) is None
    assert all("state" not in n["data"] for n in state.graph["nodes"])
    run(state.try_it())  # tried again, then published: the sandbox goes with the draft
    run(state.publish())
    assert web_store.template("claimed")[0] == 1
    assert not state.trying and web_store.sandbox(tried) is None


def test_a_draft_with_errors_is_not_tried_and_answers_are_checked(make_state, web_store):
    state = _designer(make_state)
    run(state.add("http"))
    assert state.errors > 0  # no name yet
    events = run(state.try_it())
    assert "Fix the problems" in str(events) and not state.trying
    run(state.set_template("name", "called"))
    run(state.try_it())
    state.selected = "http"
    assert state.try_panel.answer
    events = run(state.try_answer({"status": "twenty", "body": ""}))
    assert "100 to 599" in str(events)
    events = run(state.try_answer({"status": "200", "body": "{oops"}))
    assert "Not valid JSON" in str(events) and state.try_panel.answer
    run(state.try_answer({"status": "200", "body": '{"ok": true}'}))
    assert state.trial_status == "completed"
    assert state.trial["circles"]["http"]["state"] == "success"


def test_trying_speaks_the_readers_language_comments_and_returns_to_any_step(
        make_state, web_store):
    """The try card as the real pages are: the form's labels in the reader's language
    (not the template's first one), a comment with a decision, and an approval sent
    back to any earlier step the real "Return to…" lists, saying why."""
    state = _designer(make_state)
    state.choice = "zh-CN"
    state.set_json(json.dumps({"name": "leave", "circles": [
        {"uri": "ask", "description": {"en": "Ask", "zh-CN": "申请"}, "box": {"form": [
            {"name": "days", "type": "integer", "label": {"en": "Days", "zh-CN": "天数"}},
            {"name": "kind", "type": "select", "options": [
                {"value": "sick", "label": {"en": "Sick", "zh-CN": "病假"}}, "other"]}]}},
        {"uri": "check", "deps": [["ask"]], "box": {"confirm": "Fine?"}},
        {"uri": "sign", "deps": [["check"]],
         "box": {"action": {"type": "approval", "to": "bob"}}},
        {"uri": "done", "deps": [["sign"]]}]}))
    run(state.try_it())
    state.selected = "ask"
    assert [(f.label, f.options, f.option_labels) for f in state.try_panel.fields] == [
        ("天数", [], []), ("kind", ["sick", "other"], ["病假", "other"])]
    state.choice = "en"
    assert [f.label for f in state.try_panel.fields] == ["Days", "kind"]
    run(state.try_fill({"days": "2", "kind": "sick"}))
    state.selected = "check"
    run(state.try_confirm(True))

    state.selected = "sign"
    assert state.try_panel.decide and not state.try_panel.returning
    events = run(state.try_decide("returned"))  # sending back needs a comment
    assert "needs a comment" in str(events)
    assert state.trial["circles"]["sign"]["can"] == ["decide"]
    state.choice = "zh-CN"
    run(state.try_ask_return())
    assert [(t.step, t.label) for t in state.try_targets] == [
        ("ask", "申请"), ("check", "check"), ("@start", "开始（申请）")]
    assert state.try_target == "check" and state.try_panel.returning  # the nearest
    state.set_try_target("ask")
    state.set_try_comment("  two days, not three  ")
    run(state.try_return())
    circles = state.trial["circles"]
    assert circles["ask"]["can"] == ["fill"] and circles["check"]["state"] == "waiting"
    assert not state.try_panel.decide and state.try_comment == "" and state.try_back == ""
    [back] = web_store.history(state.trial["instance"], ["circle_returned"])
    assert (back["data"]["comment"], back["data"]["back_to"]) == ("two days, not three",
                                                                  ["ask"])

    # again, then approved with a comment the result keeps
    state.selected = "ask"
    run(state.try_fill({"days": "2"}))
    state.selected = "check"
    run(state.try_confirm(True))
    state.selected = "sign"
    state.set_try_comment("ok")
    run(state.try_decide("approved"))
    assert state.trial_status == "completed"
    assert state.trial["circles"]["sign"]["result"]["decisions"] == [
        {"approver": "root", "decision": "approved", "comment": "ok"}]
    assert web_store.mail_page(Caller.of(web_store.user("bob")), None, None, 50, 0) == []
