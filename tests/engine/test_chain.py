"""The approval chain (SPEC §16): a quick form's answers become a linear template the
analysis accepts, with one circle per approver step in order."""

from __future__ import annotations

import pytest

from engine.analysis import analyze
from engine.chain import approval_chain

FIELDS = [{"name": "amount", "type": "number", "label": "Amount", "required": True},
          {"name": "manager", "type": "user", "role": "approver", "required": True}]


def test_a_three_step_chain_is_a_valid_linear_template():
    body = approval_chain("leave", {"en": "Leave", "zh-CN": "请假"}, FIELDS, [
        {"field": "manager"},
        {"users": ["ann", "bob", "ann"], "quorum": "sequence"},
        {"roles": ["finance"]}])
    report = analyze(body)
    assert report.valid, report.errors
    assert [c["uri"] for c in body["circles"]] == [
        "request", "approve_1", "approve_2", "approve_3", "done"]
    assert report.analysis["terminal"] == "done"
    assert report.analysis["longest_path"] == 5
    first, second, third = body["circles"][1:4]
    assert first["box"]["action"]["to"] == "${request.manager}"
    assert second["box"]["action"]["to"] == ["ann", "bob"]
    assert second["box"]["action"]["quorum"] == "sequence"
    assert second["deps"] == [["approve_1"]]
    assert third["assign"] == {"roles": ["finance"]} and "confirm" in third["box"]
    assert second["box"]["action"]["subject"]["zh-CN"] == "请假 (${user.username})"


@pytest.mark.parametrize("quorum", ["all", "any", "sequence"])
def test_each_quorum_is_kept(quorum):
    body = approval_chain("q", "", [], [{"users": ["ann", "bob"], "quorum": quorum}])
    assert analyze(body).valid
    assert body["circles"][1]["box"]["action"]["quorum"] == quorum


@pytest.mark.parametrize("name, approvers, said", [
    ("Bad Name", [{"users": ["ann"]}], "is not a template name"),
    ("x", [], "at least one approver step"),
    ("x", [{"users": ["ann"], "roles": ["finance"]}], "by one of 'users', 'roles' or 'field'"),
    ("x", [{"users": ["ann"], "quorum": 2}], "the quorum is all, any or sequence"),
    ("x", [{"field": "amount"}], "'amount' is no user field"),
    ("x", [{"roles": ["finance"], "quorum": "all"}], "whoever of it takes the task"),
    ("x", [{"roles": ["Not A Role"]}], "a list of role names"),
    ("x", [{"users": []}], "a list of usernames"),
    ("x", [{"users": ["ann"]}] * 21, "at most 20 steps"),
])
def test_wrong_answers_are_refused_saying_why(name, approvers, said):
    with pytest.raises(ValueError, match=said):
        approval_chain(name, "T", FIELDS, approvers)
