"""Tests for the expression language: syntax, semantics, errors and the safety guards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import BpflowError, ExpressionError, VariableError
from engine.expressions import MAX_DEPTH, MAX_LENGTH, Expression, compile_expression, evaluate

# Tuesday 5 March 2024, 09:30:05 UTC.
NOW = datetime(2024, 3, 5, 9, 30, 5, tzinfo=UTC)

VARS: dict[tuple[str, ...], Any] = {
    ("claim", "amount"): 1200,
    ("claim", "tier"): "gold",
    ("n",): 123,
    ("zero",): 0,
    ("s",): "hello",
    ("items",): [3, 1, 2],
    ("flag",): True,
    ("pattern",): "^h.l",
    ("bad_pattern",): "(",
    ("lines", "0", "qty"): 4,
}


def resolve(path: tuple[str, ...]) -> Any:
    """Look a path up in VARS; a KeyError stands in for an unset variable."""
    return VARS[path]


def run(source: str) -> Any:
    return evaluate(source, resolve, NOW)


def error_of(source: str) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        run(source)
    return info.value


# --- precedence and associativity ---------------------------------------------------------

@pytest.mark.parametrize(("source", "expected"), [
    ("1 + 2 * 3", 7),
    ("(1 + 2) * 3", 9),
    ("10 - 4 - 3", 3),            # left-associative
    ("100 / 10 / 5", 2),
    ("2 * 3 % 4", 2),             # (2 * 3) % 4
    ("-2 * 3", -6),
    ("-2 + 3", 1),                # unary minus binds tighter than +
    ("- -3", 3),
    ("2 - -3", 5),
    ("1 + 2 > 2", True),          # arithmetic before comparison
    ("not 1 == 2", True),         # comparison before not
    ("not true or true", True),   # not before or
    ("true or false and false", True),  # and before or
    ("false and false or true", True),
    ("!false && !false || false", True),
    ("(true or false) and false", False),
])
def test_precedence_and_associativity(source: str, expected: Any) -> None:
    assert run(source) == expected


# --- literals and operators -------------------------------------------------------------------

@pytest.mark.parametrize(("source", "expected"), [
    ("42", 42),
    ("1.5", 1.5),
    ("1e3", 1000.0),
    ("2.5E-1", 0.25),
    ("true", True),
    ("false", False),
    ("null", None),
    ("'single'", "single"),
    ('"double"', "double"),
    (r'"say \"hi\""', 'say "hi"'),
    (r"'it\'s'", "it's"),
    (r"'a\nb\tc'", "a\nb\tc"),
    (r"'back\\slash'", "back\\slash"),
    (r"'\u00e9'", "\u00e9"),
    (r"'\d+'", "\\d+"),           # unknown escapes stay verbatim, handy for regexes
])
def test_literals(source: str, expected: Any) -> None:
    result = run(source)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(("source", "expected"), [
    ("2 + 3", 5),
    ("'ab' + 'cd'", "abcd"),
    ("1.5 + 1", 2.5),
    ("7 - 10", -3),
    ("4 * 2.5", 10.0),
    ("6 / 3", 2),
    ("7 / 2", 3.5),
    ("-7 / 2", -3.5),
    ("1.0 / 4", 0.25),
    ("7 % 3", 1),
    ("-7 % 3", 2),                # Python's sign-of-divisor rule
    ("5.5 % 2", 1.5),
    ("-${n}", -123),
    ("1 == 1.0", True),
    ("'a' == 'a'", True),
    ("null == null", True),
    ("true == 1", False),         # bool is not a number
    ("1 != 2", True),
    ("'a' != 'a'", False),
    ("${items} == ${items}", True),
    ("3 > 2", True),
    ("3 >= 3", True),
    ("2 < 1.5", False),
    ("2 <= 2.0", True),
    ("'apple' < 'banana'", True),
    ("${claim.amount} > 1000 and ${claim.tier} == 'gold'", True),
])
def test_operators(source: str, expected: Any) -> None:
    result = run(source)
    assert result == expected and type(result) is type(expected)


def test_integer_division_is_int_only_when_exact() -> None:
    assert type(run("6 / 3")) is int
    assert type(run("7 / 2")) is float


@pytest.mark.parametrize(("source", "expected"), [
    ("1 and 'x'", True),
    ("0 or ''", False),
    ("not ''", True),
    ("!${items}", False),
    ("null || 0", False),
    ("${s} && ${n}", True),
])
def test_logical_operators_use_truthiness_and_return_bool(source: str, expected: bool) -> None:
    assert run(source) is expected


def test_and_or_short_circuit_without_resolving_the_rest() -> None:
    def exploding(path: tuple[str, ...]) -> Any:
        raise AssertionError(f"resolved {path}")

    assert evaluate("false and ${boom}", exploding, NOW) is False
    assert evaluate("true or ${boom}", exploding, NOW) is True


@pytest.mark.parametrize(("source", "expected"), [
    ("${s} ~ 'ell'", True),
    ("${s} ~ '^ell'", False),
    ("${s} !~ '^ell'", True),
    ("${s} !~ 'o$'", False),
    ("${n} ~ '^12'", True),               # the subject is converted with str()
    (r"${claim.amount} ~ '^\d{4}$'", True),
    ("${s} ~ ${pattern}", True),          # a dynamic pattern
    ("'ABC' ~ '(?i)abc'", True),
])
def test_regex_match_and_non_match(source: str, expected: bool) -> None:
    assert run(source) is expected


def test_invalid_literal_regex_fails_at_compile_time() -> None:
    with pytest.raises(ExpressionError, match="invalid regular expression"):
        compile_expression("${s} ~ '('")
    with pytest.raises(ExpressionError, match="must be a string"):
        compile_expression("${s} ~ 5")


def test_invalid_dynamic_regex_fails_at_run_time() -> None:
    expression = compile_expression("${s} ~ ${bad_pattern}")
    with pytest.raises(ExpressionError, match="invalid regular expression"):
        expression.evaluate(resolve, NOW)
    with pytest.raises(ExpressionError, match="must be a string"):
        run("${s} ~ ${n}")


# --- functions ----------------------------------------------------------------------------

@pytest.mark.parametrize(("source", "expected"), [
    ("year()", 2024),
    ("month()", 3),
    ("day()", 5),
    ("weekday()", 2),
    ("week()", 2),                # Busybee's: Sunday 0 ... Saturday 6
    ("time()", "093005"),         # Busybee's "hhmmss": a string, so the leading zero stays
    ("date()", "20240305"),       # Busybee's "yyyyMMdd", a string
    ("datetime()", "20240305093005"),  # Busybee's "yyyyMMddhhmmss", a string
    ("date() == '20240305'", True),
    ("timestamp()", 1709631005),
    ("time() >= '090000' and time() < '170000' and weekday() <= 5", True),
])
def test_time_functions_use_the_given_now(source: str, expected: Any) -> None:
    assert run(source) == expected


def test_time_functions_read_now_as_given_in_its_own_zone() -> None:
    local = datetime(2024, 3, 10, 11, 30, 5, tzinfo=timezone(timedelta(hours=2)))  # a Sunday
    assert evaluate("time()", resolve, local) == "113005"
    assert evaluate("weekday()", resolve, local) == 7
    assert evaluate("week()", resolve, local) == 0  # Busybee counts the week from Sunday
    assert evaluate("timestamp()", resolve, local) == int(local.timestamp())
    early = datetime(987, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert evaluate("datetime()", resolve, early) == "09870102030405"
    assert evaluate("date()", resolve, early) == "09870102"


@pytest.mark.parametrize(("source", "expected"), [
    ("len('abc')", 3),
    ("len(${items})", 3),
    ("int('12') + 1", 13),
    ("int(3.9)", 3),
    ("float('1.5')", 1.5),
    ("str(12) + 'x'", "12x"),
    ("abs(-4)", 4),
    ("abs(-2.5)", 2.5),
    ("min(3, 1, 2)", 1),
    ("max(3, 1.5)", 3),
    ("max('a', 'b')", "b"),
    ("min(${items})", 1),
    ("lower('AbC')", "abc"),
    ("upper(${claim.tier})", "GOLD"),
])
def test_helper_functions(source: str, expected: Any) -> None:
    assert run(source) == expected


@pytest.mark.parametrize(("source", "message"), [
    ("foo()", "unknown function 'foo'"),
    ("__import__('os')", "unknown function '__import__'"),
    ("len()", "'len' takes 1 argument, got 0"),
    ("len(1, 2)", "'len' takes 1 argument, got 2"),
    ("year(1)", "'year' takes 0 arguments, got 1"),
    ("min()", "'min' takes at least 1 argument, got 0"),
])
def test_unknown_function_and_wrong_arity_fail_at_compile_time(source: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        compile_expression(source)


# --- runtime errors -----------------------------------------------------------------------

@pytest.mark.parametrize(("source", "message"), [
    ("1 + 'a'", "'\\+' needs two numbers or two strings, got int and string"),
    ("'a' - 'b'", "'-' needs numbers"),
    ("true + 1", "got bool and int"),
    ("true * 2", "'\\*' needs numbers"),
    ("'a' < 1", "'<' needs two numbers or two strings"),
    ("null > 1", "got null and int"),
    ("-'x'", "unary '-' needs a number"),
    ("abs('x')", "needs a number"),
    ("lower(1)", "needs a string"),
    ("len(5)", "needs a string or list"),
    ("int('x')", "int\\(\\)"),
    ("min(1, 'a')", "all numbers or all strings"),
    ("min(${zero} + ${items})", "'\\+' needs"),
])
def test_type_errors_raise_expression_error(source: str, message: str) -> None:
    compile_expression(source)  # well-formed: the problem only shows at run time
    with pytest.raises(ExpressionError, match=message):
        run(source)


@pytest.mark.parametrize("source", ["1 / 0", "1 % 0", "1.5 / 0.0", "${n} / ${zero}", "2 % (1 - 1)"])
def test_division_and_modulo_by_zero(source: str) -> None:
    assert "by zero" in str(error_of(source))


def test_runtime_error_names_the_column_and_carries_the_source() -> None:
    error = error_of("${n} + 'x'")
    assert "column 6" in str(error)
    assert error.source == "${n} + 'x'"
    assert isinstance(error, BpflowError) and isinstance(error, ValueError)


# --- references ---------------------------------------------------------------------------

def test_references_are_ordered_deduplicated_and_keep_digit_segments_as_strings() -> None:
    expression = compile_expression(
        "${claim.amount} > 5 and ${lines.0.qty} + ${claim.amount} > ${main.approve-it.ok}")
    assert expression.references == (
        ("claim", "amount"), ("lines", "0", "qty"), ("main", "approve-it", "ok"))
    assert compile_expression("1 + 2").references == ()


def test_variables_are_resolved_with_their_path() -> None:
    seen: list[tuple[str, ...]] = []

    def recording(path: tuple[str, ...]) -> Any:
        seen.append(path)
        return 2

    assert evaluate("${workflow.input.k} * ${_x.9}", recording, NOW) == 4
    assert seen == [("workflow", "input", "k"), ("_x", "9")]


def test_resolver_failure_becomes_expression_error_naming_the_variable() -> None:
    error = error_of("${missing.var} + 1")
    assert "${missing.var}" in str(error)
    assert isinstance(error.__cause__, KeyError)


def test_resolver_bpflow_error_propagates_unchanged() -> None:
    raised = VariableError("missing.var")

    def failing(path: tuple[str, ...]) -> Any:
        raise raised

    with pytest.raises(VariableError) as info:
        evaluate("${missing.var} + 1", failing, NOW)
    assert info.value is raised


# --- guards, caching and the API ----------------------------------------------------------

def test_non_string_source_is_an_expression_error() -> None:
    with pytest.raises(ExpressionError, match="must be a string"):
        compile_expression(42)  # type: ignore[arg-type]


def test_nesting_up_to_the_limit_is_fine_and_beyond_it_is_an_error() -> None:
    assert run("(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH) == 1
    for deep in ("(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
                 "(" * 900 + "1" + ")" * 900,
                 "-" * 1000 + "1",
                 "not " * 400 + "true",
                 "abs(" * 300 + "1" + ")" * 300):
        with pytest.raises(ExpressionError, match="nests too deeply"):
            compile_expression(deep)


def test_long_flat_chains_do_not_count_as_nesting() -> None:
    assert run("1" + " + 1" * 400) == 401
    assert run(" and ".join(["true"] * 200)) is True


def test_source_length_limit() -> None:
    at_limit = "1" + "+1" * ((MAX_LENGTH - 1) // 2)
    assert len(at_limit) <= MAX_LENGTH
    assert run(at_limit) == (MAX_LENGTH - 1) // 2 + 1
    assert run(" " * (MAX_LENGTH - 1) + "7") == 7
    with pytest.raises(ExpressionError, match="too long"):
        compile_expression("1" * (MAX_LENGTH + 1))


def test_compile_is_cached_and_expressions_are_reusable() -> None:
    expression = compile_expression("${n} * 2")
    assert isinstance(expression, Expression)
    assert compile_expression("${n} * 2") is expression
    assert expression.source == "${n} * 2"
    assert expression.evaluate(resolve, NOW) == 246
    assert expression.evaluate(lambda path: 5, NOW) == 10


# --- property tests -----------------------------------------------------------------------

FRAGMENTS = ["1", "2.5", "0", "'a'", '"b\\"', "${a}", "${b.0}", "${", "}", "$", "true", "null",
             "not", "and", "or", "!", "&&", "||", "==", "!=", "<", ">=", "~", "!~", "+", "-",
             "*", "/", "%", "(", ")", ",", "len", "min", "int", "year", "foo", " ", "\n", "'("]
SAMPLES = [0, 1, -2, 2.5, "", "x", "(", True, None, [1, 2], {"k": 1}, 10 ** 400, float("nan")]


def sample_resolver(path: tuple[str, ...]) -> Any:
    """Deterministic but varied values, and sometimes a failure, for fuzzing evaluate."""
    index = sum(map(ord, ".".join(path))) % (len(SAMPLES) + 1)
    if index == len(SAMPLES):
        raise KeyError(path)
    return SAMPLES[index]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60),
                 st.lists(st.sampled_from(FRAGMENTS), max_size=25).map("".join)))
def test_any_text_either_compiles_or_raises_expression_error(source: str) -> None:
    try:
        expression = compile_expression(source)
    except ExpressionError:
        return
    try:
        expression.evaluate(sample_resolver, NOW)
    except ExpressionError:
        pass


class _ZeroDivision(Exception):
    """The reference evaluator's signal that the engine must report division by zero."""


# Tree nodes: ("int", n) | ("neg", e) | ("bin", op, l, r) | ("cmp", op, l, r)
#             | ("not", e) | ("and"/"or", l, r); every node's last field is "wrap in parens".
_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6,
         "neg": 7, "int": 8}


def _arith(depth: int) -> st.SearchStrategy[tuple]:
    leaf = st.tuples(st.just("int"), st.integers(0, 20), st.booleans())
    if depth == 0:
        return leaf
    sub = _arith(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.just("neg"), sub, st.booleans()),
        st.tuples(st.just("bin"), st.sampled_from("+-*/%"), sub, sub, st.booleans()))


def _cond(depth: int) -> st.SearchStrategy[tuple]:
    compare = st.tuples(st.just("cmp"), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
                        _arith(2), _arith(2), st.booleans())
    if depth == 0:
        return compare
    sub = _cond(depth - 1)
    return st.one_of(
        compare,
        st.tuples(st.just("not"), st.sampled_from(["not ", "!"]), sub, st.booleans()),
        st.tuples(st.sampled_from(["and", "or"]), sub, sub, st.booleans()))


def reference(node: tuple) -> Any:
    """Evaluate a generated tree directly, with the language's documented semantics."""
    kind = node[0]
    if kind == "int":
        return node[1]
    if kind == "neg":
        return -reference(node[1])
    if kind == "not":
        return not reference(node[2])
    if kind == "and":
        return bool(reference(node[1])) and bool(reference(node[2]))
    if kind == "or":
        return bool(reference(node[1])) or bool(reference(node[2]))
    op, a, b = node[1], reference(node[2]), reference(node[3])
    if op in "/%" and b == 0:
        raise _ZeroDivision
    table = {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "%": lambda: a % b,
        "/": lambda: a // b if isinstance(a, int) and isinstance(b, int) and a % b == 0
        else a / b,
        "==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b, "<=": lambda: a <= b,
        ">": lambda: a > b, ">=": lambda: a >= b,
    }
    return table[op]()


def render(node: tuple) -> tuple[str, int]:
    """Print a tree with only the parentheses precedence needs, plus any asked-for extras."""
    kind = node[0]
    if kind == "int":
        text, prec = str(node[1]), _PREC["int"]
    elif kind == "neg":
        inner, inner_prec = render(node[1])
        text, prec = "-" + (inner if inner_prec >= _PREC["neg"] else f"({inner})"), _PREC["neg"]
    elif kind == "not":
        inner, inner_prec = render(node[2])
        text, prec = node[1] + (inner if inner_prec >= _PREC["not"] else f"({inner})"), 3
    else:
        op = node[1] if kind in ("bin", "cmp") else kind
        prec = _PREC["cmp" if kind == "cmp" else op]
        left, left_prec = render(node[-3])
        right, right_prec = render(node[-2])
        left = left if left_prec > prec or (left_prec == prec and kind != "cmp") else f"({left})"
        right = right if right_prec > prec else f"({right})"
        text = f"{left} {op} {right}"
    return (f"({text})", _PREC["int"]) if node[-1] else (text, prec)


@settings(max_examples=500, deadline=None)
@given(st.one_of(_arith(4), _cond(3)))
def test_generated_expressions_match_a_reference_evaluator(tree: tuple) -> None:
    source, _ = render(tree)
    try:
        expected = reference(tree)
    except _ZeroDivision:
        with pytest.raises(ExpressionError, match="by zero"):
            run(source)
        return
    result = run(source)
    assert result == expected, source
    assert type(result) is type(expected), source
