"""The designer's properties panel (SPEC §16): pickers of the tenant's users and roles
where a circle names people, completion of `${...}` names and functions in the fields
that take them, inputs of their own for retry, timeout, due, remind and cc, and moving a
form's fields said for screen readers."""

from __future__ import annotations

import json

from bpflow.auth import issue_token
from bpflow.tenancy import create_tenant
from bpflow_app import designhints as dh
from bpflow_app.pages.design_state import DesignState
from engine.expression_ops import FUNCTIONS, LAZY
from tests.app.helpers import run


def _claim(make_state, circle: str = "approve") -> DesignState:
    """The shipped expense claim open in the designer, `circle` selected."""
    state = make_state(DesignState, user="root", path="/design/reimbursement")
    run(state.load())
    state.selected = circle
    return state


def _circle(state: DesignState, uri: str) -> dict:
    return next(c for c in state._body["circles"] if c["uri"] == uri)


def test_the_pickers_offer_the_names_of_the_designers_tenant_only(make_state, web_store):
    acme = create_tenant(web_store, "acme", "acmeadmin", "acmeadmin-password")
    acme.add_user("acmefin", "acmefin-password", ["user", "finance"])
    web_store.add_user("gone", "gone-password", ["auditor"])
    web_store.disable_user("gone")
    state = _claim(make_state)
    assert state.people_users == ["alice", "bob", "carol", "root"]
    assert "finance" not in state.people_roles and "auditor" not in state.people_roles
    assert {"admin", "approver", "user", "designer", "integration"} <= set(state.people_roles)
    theirs = make_state(DesignState, path="/design")
    theirs.token = issue_token(acme.user("acmeadmin"))
    run(theirs.load())
    assert theirs.people_users == ["acmeadmin", "acmefin"] and "finance" in theirs.people_roles


def test_an_approver_is_picked_and_a_name_that_is_nobody_is_refused(make_state):
    state = _claim(make_state)
    assert state.extra.has_to and [(p.name, p.known) for p in state.extra.recipients] == [
        ("${claim.manager}", True)]  # a placeholder names a user field's choice
    assert "to" not in [r.key for r in state.panel.action]  # a picker, not a text
    run(state.pick("to", {"name": " bob "}))
    assert _circle(state, "approve")["box"]["action"]["to"] == ["${claim.manager}", "bob"]
    before = state._body
    run(state.pick("to", {"name": "zed"}))
    assert state._body == before and "zed" in state.extra.notes["to"]
    run(state.pick("to", {"name": "alice"}))
    assert state.extra.notes["to"] == ""
    run(state.unpick("to", "${claim.manager}"))
    run(state.unpick("to", "bob"))
    assert _circle(state, "approve")["box"]["action"]["to"] == "alice"  # one name: a string
    run(state.unpick("to", "alice"))  # nobody: the analysis says so under the picker
    assert "to" not in _circle(state, "approve")["box"]["action"]
    assert "'to' must name a user" in state.extra.notes["to"]
    run(state.pick("to", {"name": "alice"}))
    # a name written in the JSON view that is nobody is shown as such
    body = json.loads(state._json_text)
    _circle_of = next(c for c in body["circles"] if c["uri"] == "approve")
    _circle_of["box"]["action"]["to"] = ["alice", "nobody"]
    state.set_json(json.dumps(body))
    assert [(p.name, p.known) for p in state.extra.recipients] == [("alice", True),
                                                                   ("nobody", False)]
    assert "nobody" in state.extra.notes["to"]


def test_assignees_and_copies_are_picked_by_user_and_role(make_state):
    state = _claim(make_state, "review")
    # the shipped claim assigns finance, a role nobody of this tenant has
    assert [(p.name, p.known) for p in state.extra.assign_roles] == [("finance", False)]
    assert "finance" in state.extra.notes["assign.roles"]
    run(state.pick("assign.roles", {"name": "auditor"}))
    assert "auditor" in state.extra.notes["assign.roles"]
    assert _circle(state, "review")["assign"] == {"roles": ["finance"]}
    run(state.unpick("assign.roles", "finance"))
    run(state.pick("assign.roles", {"name": "approver"}))
    assert state.extra.notes["assign.roles"] == ""
    run(state.pick("assign.users", {"name": "${claim.manager}"}))
    run(state.pick("cc.users", {"name": "carol"}))
    state.set_timing("cc_on", "ready")
    review = _circle(state, "review")
    assert review["assign"] == {"roles": ["approver"], "users": ["${claim.manager}"]}
    assert review["cc"] == {"users": ["carol"], "on": "ready"}
    assert state.errors == 0 and state.extra.timing.cc_on == "ready"
    run(state.unpick("cc.users", "carol"))
    assert "cc" not in _circle(state, "review")  # nobody to copy: no cc at all
    run(state.pick("cc.users", {"name": "${claim.nothing"}))  # not a placeholder
    assert "cc" not in _circle(state, "review") and state.extra.notes["cc.users"]


def test_placeholder_names_come_from_upstream_and_a_suggestion_completes_them(make_state):
    state = _claim(make_state)
    run(state.set_action("subject", "Claim of ${cl"))
    row = next(r for r in state.panel.action if r.key == "subject")
    assert row.hints == ["${claim.amount}", "${claim.reason}", "${claim.manager}"]
    run(state.set_action("subject", "Claim of ${"))
    row = next(r for r in state.panel.action if r.key == "subject")
    assert not any(h.startswith(("${review", "${pay")) for h in row.hints)  # downstream
    run(state.set_action("subject", "Claim of ${am"))  # a name containing it, too
    run(state.complete("action:subject", "${claim.amount}"))
    assert _circle(state, "approve")["box"]["action"]["subject"] == "Claim of ${claim.amount}"
    assert next(r for r in state.panel.action if r.key == "subject").hints == []
    # further down: the approval's result and the compute circle's outputs
    state.selected = "done"
    state.set_circle("when", "${re")
    assert state.panel.when_hints == ["${review.accepted}", "${pay.reference}",
                                      "${claim.reason}"]  # starting with it, then holding it
    assert dh.names(state._body, "done")[:3] == ["pay.reference", "review.accepted",
                                                "approve.approved"]
    state.set_template("inputs", '{"currency": "string"}')
    state.set_circle("when", "${work")
    assert state.panel.when_hints == ["${workflow.input.currency}"]


def test_an_expression_completes_functions_of_the_expression_language(make_state):
    state = _claim(make_state, "pay")
    state.set_circle("when", "${claim.amount} > 0 and ye")
    assert state.panel.when_hints == ["year()"]
    run(state.complete("when", "year()"))
    assert _circle(state, "pay")["when"] == "${claim.amount} > 0 and year()"
    state.set_circle("when", "de")
    assert state.panel.when_hints == ["default("]
    # every function of the language is offered, written as it is called
    assert {c.split("(")[0] for c in dh.CALLS} == set(FUNCTIONS) | set(LAZY)
    state.set_circle("when", "${claim.amount} > 0 and ")
    assert state.panel.when_hints == []  # nothing being typed: nothing offered


def test_retry_timeout_due_and_remind_have_inputs_and_say_what_is_wrong(make_state):
    state = _claim(make_state, "pay")
    assert state.extra.timing.due == "86400"
    state.set_timing("due", "")
    state.set_timing("retry_count", "3")
    state.set_timing("retry_delay", "5")
    state.set_timing("retry_logic", "exponential")
    assert _circle(state, "pay")["retry"] == {"count": 3, "delay": 5, "logic": "exponential"}
    state.set_timing("retry_count", "many")
    assert _circle(state, "pay")["retry"]["count"] == 3
    assert "whole number" in state.extra.notes["retry"]
    state.set_timing("retry_count", "2")
    assert state.extra.notes["retry"] == ""
    state.set_timing("timeout_seconds", "3600")
    state.set_timing("timeout_policy", "escalate")  # needs whom to escalate to
    assert "escalate" in state.extra.notes["timeout"] and state.errors > 0
    run(state.pick("escalate.roles", {"name": "admin"}))
    assert _circle(state, "pay")["timeout"] == {"seconds": 3600, "policy": "escalate",
                                                "to": {"roles": ["admin"]}}
    state.set_timing("remind_before", "1")  # not a control: nothing happens
    state.set_timing("before_due", "600")  # remind before due needs a due
    assert "due" in state.extra.notes["remind"]
    state.set_timing("due", "86400")
    state.set_timing("every", "-4")
    assert "seconds" in state.extra.notes["remind"]
    state.set_timing("every", "3600")
    pay = _circle(state, "pay")
    assert pay["due"] == 86400 and pay["remind"] == {"before_due": 600, "every": 3600}
    assert state.errors == 0
    t = state.extra.timing
    assert (t.retry_count, t.timeout_policy, t.due, t.every) == ("2", "escalate", "86400",
                                                                  "3600")
    state.set_timing("timeout_seconds", "")
    assert "timeout" not in _circle(state, "pay")
    state.set_timing("retry_count", "")
    assert "retry" not in _circle(state, "pay")


def test_a_list_of_waits_shows_as_count_and_delay_until_changed():
    circle = {"uri": "a", "retry": [1, 5, 30]}
    t = dh.timing(circle)
    assert (t.retry_count, t.retry_delay, t.retry_waits) == ("3", "1", "1, 5, 30")
    assert dh.timing({"uri": "a", "retry": [2, 4, 8]}).retry_logic == "exponential"
    dh.set_timing(circle, "retry_delay", "10")
    assert circle["retry"] == {"count": 3, "delay": 10}


def test_moving_a_form_field_is_said_for_screen_readers(make_state):
    state = _claim(make_state, "claim")
    names = [f.name for f in state.panel.fields]
    state.move_field(2, -1)
    assert [f.name for f in state.panel.fields] == [names[0], names[2], names[1]]
    assert state.said == f"{names[2]} is now field 2 of 3"
    state.move_field(0, -1)  # the first goes no higher
    assert [f.name for f in state.panel.fields] == [names[0], names[2], names[1]]
