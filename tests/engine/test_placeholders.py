"""`${...}` substitution: type kept for a whole placeholder, text otherwise."""

from __future__ import annotations

import pytest

from engine.errors import VariableError
from engine.placeholders import lookup, malformed, references, substitute

TABLE = {"a": {"n": 3, "f": 1.5, "ok": False, "none": None, "l": [1, {"k": "v"}], "s": "x"}}


def resolve(path):
    return lookup(TABLE, path)


@pytest.mark.parametrize("ref,value", [("a.n", 3), ("a.f", 1.5), ("a.ok", False),
                                       ("a.none", None), ("a.l", [1, {"k": "v"}]),
                                       ("a.l.1.k", "v")])
def test_whole_string_placeholder_keeps_the_type(ref, value):
    assert substitute("${" + ref + "}", resolve) == value


def test_placeholders_inside_text_are_interpolated_as_text():
    assert substitute("n=${a.n} ok=${a.ok} none=[${a.none}] l=${a.l}", resolve) == \
        'n=3 ok=false none=[] l=[1, {"k": "v"}]'


def test_containers_are_walked_and_other_values_left_alone():
    assert substitute({"x": ["${a.s}", 7, None], "y": {"z": "${a.n}"}}, resolve) == \
        {"x": ["x", 7, None], "y": {"z": 3}}


def test_missing_variable_names_what_is_missing():
    with pytest.raises(VariableError, match=r"a\.nope"):
        substitute("${a.nope}", resolve)
    with pytest.raises(VariableError):
        substitute("${a.l.9}", resolve)


def test_references_and_malformed_openings():
    assert references("${a.b} and ${c}") == [("a", "b"), ("c",)]
    assert malformed("${ok} ${not ok} ${unclosed") == ["${not ok}", "${unclosed"]
