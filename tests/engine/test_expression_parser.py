"""Tests for the expression syntax: the grammar's edges and the wording of parse errors."""

from __future__ import annotations

import pytest

from engine.errors import ExpressionError
from engine.expressions import compile_expression


def test_chained_comparison_is_a_parse_error() -> None:
    with pytest.raises(ExpressionError, match="cannot be chained"):
        compile_expression("1 < 2 < 3")


def test_keywords_need_a_word_boundary() -> None:
    with pytest.raises(ExpressionError, match="unknown function 'order'"):
        compile_expression("${n} or order(1)")
    with pytest.raises(ExpressionError, match="unknown function 'nothing'"):
        compile_expression("nothing()")


@pytest.mark.parametrize(("source", "fragment"), [
    ("(1 + 2))", "unexpected ')' at column 8"),
    ("1 +", "unexpected end of expression; expected a value"),
    ("1 2", "unexpected '2' at column 3; expected an operator or end of expression"),
    ("f(1", "expected ')' or ','"),
    ("1 # 2", "unexpected character '#' at column 3"),
    ("${ a }", "malformed variable reference at column 1"),
    ("${a.1b}", "malformed variable reference"),
    ("${a.}", "malformed variable reference"),
    ("1 + $x", "malformed variable reference at column 5"),
    ("'abc", "unterminated string starting at column 1"),
    ("amount > 5", "write ${amount} for a variable"),
    ("10 ** 2", "unexpected '*' at column 5"),
    ("1 +\n)", "line 2, column 1"),
    ("", "empty expression"),
    ("   ", "empty expression"),
])
def test_parse_errors_name_the_position_and_what_was_expected(source: str, fragment: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(source)
    assert fragment in str(info.value)
    assert info.value.source == source
