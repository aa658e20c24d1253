"""The template field `starters` (SPEC §10): a list of role names; anything else is a
`schema` error with its path, found by the fast check and the validator alike."""

from __future__ import annotations

import pytest

from engine import shape
from engine.analysis import analyze

BODY = {"name": "t", "circles": [{"uri": "a"}]}


@pytest.mark.parametrize("starters", [[], ["finance"], ["user", "approver", "team-2_x"],
                                      ["a" * 40]])
def test_role_names_are_starters(starters):
    body = {**BODY, "starters": starters}
    assert shape.conforms(body)
    report = analyze(body)
    assert report.valid and report.template.body["starters"] == starters


@pytest.mark.parametrize("starters, path", [
    ("finance", "/starters"), ({"roles": ["finance"]}, "/starters"), (None, "/starters"),
    (["Finance"], "/starters/0"), (["finance", 3], "/starters/1"), ([""], "/starters/0"),
    (["a" * 41], "/starters/0"), (["fin ance"], "/starters/0"), (["finance\n"], "/starters/0"),
    (["x"] * 101, "/starters"),
])
def test_malformed_starters_are_schema_errors_with_their_path(starters, path):
    body = {**BODY, "starters": starters}
    assert not shape.conforms(body)
    report = analyze(body)
    assert not report.valid
    assert {(e["code"], e["path"]) for e in report.errors} == {("schema", path)}
