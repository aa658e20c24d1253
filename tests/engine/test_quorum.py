"""An approval's quorum (SPEC §15) as the analysis checks it: the schema and the box
layer agree on what is one, and say what is wrong with what is not."""

from __future__ import annotations

from typing import Any

import pytest

from engine.analysis import analyze
from engine.boxes import quorum_problem
from engine.shape import conforms
from tests.engine.helpers import circle


def asking(quorum: Any, to: Any = ("ann", "bob", "cid")) -> dict[str, Any]:
    return {"name": "t", "circles": [circle("a", box={"action": {
        "type": "approval", "to": list(to) if not isinstance(to, str) else to,
        "quorum": quorum}})]}


@pytest.mark.parametrize("quorum", ["all", "any", "sequence", 1, 3, {"ratio": 0.6},
                                    {"ratio": 1}, {"ratio": 0.01}])
def test_the_quorums_are_taken(quorum):
    assert analyze(asking(quorum)).errors == []
    assert conforms(asking(quorum))


@pytest.mark.parametrize("quorum,code,message", [
    ("most", "schema", "quorum"),
    (0, "schema", "quorum"),
    (True, "schema", "quorum"),
    ({"ratio": 0}, "schema", "quorum"),
    ({"ratio": 1.5}, "schema", "quorum"),
    ({"ratio": "0.6"}, "schema", "quorum"),
    ({"ratio": 0.6, "of": 5}, "schema", "quorum"),
    ({}, "schema", "quorum"),
    (4, "invalid_box", "quorum 4 is more than the 3 approvers"),
])
def test_what_is_not_a_quorum_is_refused(quorum, code, message):
    body = asking(quorum)
    assert not conforms(body) or code != "schema"
    errors = analyze(body).errors
    assert {e["path"] for e in errors} == {"/circles/0/box/action/quorum"}, errors
    assert code in {e["code"] for e in errors}  # the schema's, and the box's in words
    assert any(message in e["message"] for e in errors), errors
    assert any(e["code"] == "invalid_box" for e in errors), errors


@pytest.mark.parametrize("quorum,count,problem", [
    ("sequence", None, None),
    ({"ratio": 0.6}, 5, None),
    ({"ratio": True}, 5, 'a vote\'s quorum is {"ratio": r} with 0 < r ≤ 1'),
    (6, 5, "quorum 6 is more than the 5 approvers"),
    (6, None, None),  # the addressees are known only when it runs
])
def test_quorum_problem_is_the_one_check(quorum, count, problem):
    assert quorum_problem(quorum, count) == problem
