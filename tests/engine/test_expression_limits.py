"""Expressions never block the server (SPEC §13): RE2 regexes, the step and time budget,
and the range and size of the values an evaluation produces."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from engine import expression_limits
from engine.analysis import analyze
from engine.errors import ExpressionError
from engine.expression_limits import MAX_VALUE_BYTES, ExpressionLimitError
from engine.expressions import MAX_LENGTH, compile_expression, evaluate
from tests.engine.helpers import circle, finish, states, template, waits

NOW = datetime(2024, 3, 5, 9, 30, 5, tzinfo=UTC)
CATASTROPHIC = r"^([a-zA-Z0-9]+)+@corp\.com$"


def run(source: str, **variables: Any) -> Any:
    """Evaluate with `${a.b}` read from variables["a.b"] (a missing one is a KeyError)."""
    return evaluate(source, lambda path: variables[".".join(path)], NOW)


def limit_error(source: str, **variables: Any) -> ExpressionLimitError:
    with pytest.raises(ExpressionLimitError) as info:
        run(source, **variables)
    assert isinstance(info.value, ExpressionError) and info.value.source == source
    return info.value


# --- regular expressions: RE2, linear time ---------------------------------------------------

@pytest.mark.parametrize(("source", "expected"), [
    (f"${{a.email}} ~ '{CATASTROPHIC}'", False),
    ("${a.email} ~ ${pattern}", False),   # a pattern from a variable, compiled when evaluated
    ("${a.email} !~ '^(a|aa)*$'", True),
    ("${a.email} ~ '(a*)*b'", False),
])
def test_catastrophic_regex_answers_at_once_on_a_long_input(source: str, expected: bool) -> None:
    expression = compile_expression(source)
    values = {("pattern",): CATASTROPHIC}
    for text in ("a" * 28 + "!", "a" * 10_000 + "!"):
        values["a", "email"] = text
        begun = time.thread_time()
        result = expression.evaluate(values.__getitem__, NOW)
        assert time.thread_time() - begun < 0.1
        assert result is expected


def test_a_costly_pattern_on_a_long_text_is_refused_before_it_runs() -> None:
    # 16,000 RE2 instructions: linear, but seconds on 64 KiB once RE2 falls back to its NFA.
    expression = compile_expression("${t} ~ '[^c]{1000}[^d]{1000}c'")
    begun = time.thread_time()
    with pytest.raises(ExpressionLimitError, match="step limit"):
        expression.evaluate(lambda path: "ab" * 32_000, NOW)
    assert time.thread_time() - begun < 0.1
    assert expression.evaluate(lambda path: "ab" * 50, NOW) is False  # a short text is fine


def test_a_pattern_too_large_for_re2_is_a_compile_time_error() -> None:
    with pytest.raises(ExpressionError, match="pattern too large.*25,000 RE2 instructions"):
        compile_expression(r"${s} ~ '\pL{100}'")


def test_catastrophic_pattern_still_matches_what_it_should() -> None:
    assert run(f"${{e}} ~ '{CATASTROPHIC}'", e="abc123@corp.com") is True
    assert run(f"${{e}} ~ '{CATASTROPHIC}'", e="abc@corp.com\n") is False  # `$` is the end


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(a)\1", "backreferences are not supported"),
    (r"(?P<x>a)(?P=x)", "named backreferences"),
    (r"a(?=b)", "lookahead is not supported"),
    (r"a(?!b)", "lookahead is not supported"),
    (r"(?<=a)b", "lookbehind is not supported"),
    (r"(?<!a)b", "lookbehind is not supported"),
    (r"(?>a+)b", "atomic groups are not supported"),
    (r"a++", "possessive quantifiers are not supported"),
    (r"a\Z", r"write \\z"),
    (r"a{1001}", "a count is at most 1000"),
    (r"(", "missing \\)"),
])
def test_unsupported_regex_syntax_is_a_compile_time_error(pattern: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match="invalid regular expression") as info:
        compile_expression(f"${{s}} ~ '{pattern}'")
    assert info.value.args[0].endswith("(patterns use RE2 syntax) (column 6)")
    with pytest.raises(ExpressionError, match=reason):
        compile_expression(f"${{s}} ~ '{pattern}'")


def test_unsupported_regex_is_reported_by_the_analysis() -> None:
    report = analyze({"name": "t", "circles": [
        circle("a", when=r"${workflow.input.email} ~ '^(\w+)@\1$'")]})
    assert [(e["code"], e["path"]) for e in report.errors] == [
        ("invalid_expression", "/circles/0/when")]
    assert "backreferences are not supported" in report.errors[0]["message"]


def test_unsupported_dynamic_regex_fails_when_evaluated() -> None:
    expression = compile_expression("${s} ~ ${p}")
    with pytest.raises(ExpressionError, match="lookbehind is not supported"):
        expression.evaluate({("s",): "x", ("p",): "(?<=a)b"}.__getitem__, NOW)
    with pytest.raises(ExpressionError, match="too long"):
        run("${s} ~ ${p}", s="x", p="a" * 2001)


@pytest.mark.parametrize(("source", "expected"), [
    (r"'2024' ~ '^\d{4}$'", True),
    ("'ABC' ~ '(?i)^abc$'", True),
    ("'a\nb' ~ '(?m)^b$'", True),
    ("'a\nb' ~ '(?s)a.b'", True),
    ("'ab' ~ '(?P<first>a)b'", True),
    (r"'ab' ~ '\Aab\z'", True),
    (r"'été' ~ '^\pL+$'", True),
    (r"'été' ~ '^\w+$'", False),          # \w is ASCII in RE2
    ("'abc\n' ~ 'abc$'", False),           # `$` is the very end, not before a last newline
    ("null ~ '^$'", True),                 # the subject reads as str() does
    ("true ~ '^true$'", True),
])
def test_re2_semantics(source: str, expected: bool) -> None:
    assert run(source) is expected


# --- integers and floats ----------------------------------------------------------------------

@pytest.mark.parametrize("source", [
    "4294967296 * 4294967296",              # 2**64
    "9223372036854775807 + 1",
    "-9223372036854775807 - 2",
    "abs(-9223372036854775807 - 1)",
    "-(-9223372036854775807 - 1)",
    "${big} * ${big}",
    "int(1e19)",
])
def test_integers_beyond_64_bits_are_an_error(source: str) -> None:
    error = limit_error(source, big=2 ** 62)
    assert "64 bits" in str(error) and "column" in str(error)


def test_integers_at_the_edges_of_64_bits_are_fine() -> None:
    assert run("9223372036854775807") == 2 ** 63 - 1
    assert run("-9223372036854775807 - 1") == -(2 ** 63)
    assert run("${n} * 2 + 1", n=2 ** 62 - 1) == 2 ** 63 - 1


@pytest.mark.parametrize("source", ["18446744073709551616", "9223372036854775808"])
def test_integer_literals_beyond_64_bits_fail_at_compile_time(source: str) -> None:
    with pytest.raises(ExpressionError, match="64 bits"):
        compile_expression(source)


@pytest.mark.parametrize("source", ["1e308 * 10", "float('inf')", "float('nan')",
                                    "-1e308 - 1e308", "float('-inf') + 1"])
def test_non_finite_floats_are_an_error(source: str) -> None:
    assert "not a finite number" in str(limit_error(source))


def test_non_finite_float_literal_fails_at_compile_time() -> None:
    with pytest.raises(ExpressionError, match="finite"):
        compile_expression("1e400 > 1")


def test_a_variable_out_of_range_is_refused_as_the_result() -> None:
    assert "64 bits" in str(limit_error("${x}", x=2 ** 64))
    assert "finite" in str(limit_error("${x}", x=[1, float("nan")]))
    assert run("${x} > 1", x=2 ** 64) is True  # read, compared, not produced


# --- sizes --------------------------------------------------------------------------------

def test_a_string_over_64_kib_is_an_error() -> None:
    half = "x" * 50_000
    error = limit_error("${s} + ${s}", s=half)
    assert "64 KiB" in str(error) and "100000 characters" in str(error)
    assert "64 KiB" in str(limit_error("upper(${s})", s="x" * 100_000))
    assert "64 KiB" in str(limit_error("'<' + ${s} + '>'", s="x" * (MAX_VALUE_BYTES - 1)))
    assert "64 KiB" in str(limit_error("str(${items})", items=["x" * 1000] * 100))


def test_a_string_of_exactly_64_kib_is_fine_counting_utf8_bytes() -> None:
    half = "x" * (MAX_VALUE_BYTES // 2)
    assert len(run("${s} + ${s}", s=half)) == MAX_VALUE_BYTES
    accented = "é" * (MAX_VALUE_BYTES // 4)  # 2 bytes each: half the limit
    assert len(run("${s} + ${s}", s=accented)) == MAX_VALUE_BYTES // 2
    assert "64 KiB" in str(limit_error("${s} + ${s} + 'é'", s=accented))


def test_a_list_or_object_result_over_64_kib_is_an_error() -> None:
    assert "list is too large" in str(limit_error("${x}", x=["y" * 1000] * 70))
    assert "object is too large" in str(limit_error("${x}", x={"k": [0] * 70_000}))
    assert run("${x}", x=["y" * 1000] * 10) == ["y" * 1000] * 10
    assert run("len(${x})", x=["y" * 1000] * 70) == 70  # only produced values are measured


def test_lone_surrogate_literal_fails_at_compile_time_and_pairs_join() -> None:
    with pytest.raises(ExpressionError, match="lone surrogate"):
        compile_expression(r"'a\ud800'")
    assert run(r"'\ud83d\ude00'") == "\U0001f600"


# --- the step and time budget ---------------------------------------------------------------

def test_long_computation_on_large_values_hits_the_step_budget() -> None:
    source = " + ".join(["len(${t} + ${t})"] * 60)
    assert len(source) <= MAX_LENGTH
    error = limit_error(source, t="x" * 30_000)
    assert "step limit (50000 steps)" in str(error)
    assert run(source, t="x" * 1000) == 60 * 2000  # the same work on small values is fine


def test_every_operation_counts_against_the_step_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "1" + " + 1" * 400
    assert run(source) == 401
    monkeypatch.setattr(expression_limits, "MAX_STEPS", 100)
    monkeypatch.setattr(expression_limits, "CHECK_EVERY", 10)
    assert "step limit (100 steps)" in str(limit_error(source))
    deep = "abs(" * 40 + "${n}" + ")" * 40 + " + ${n}" * 70
    assert "step limit" in str(limit_error(deep, n=1))
    assert run("abs(" * 40 + "${n}" + ")" * 40, n=-1) == 1  # within 100 steps


def test_min_and_max_pay_for_the_items_they_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expression_limits, "MAX_STEPS", 1000)
    assert run("max(${x})", x=list(range(900))) == 899
    assert "step limit" in str(limit_error("max(${x})", x=list(range(2000))))


def test_the_time_limit_stops_a_long_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expression_limits, "MAX_CPU_SECONDS", -1.0)  # always already over
    monkeypatch.setattr(expression_limits, "CHECK_EVERY", 10)
    assert "time limit" in str(limit_error("1" + " + 1" * 100))
    assert run("1 + 1") == 2  # too short to read the clock at all


# --- time() --------------------------------------------------------------------------------

@pytest.mark.parametrize(("now", "expected"), [
    (datetime(2024, 3, 5, 1, 40, 3, tzinfo=UTC), "014003"),
    (datetime(2024, 3, 5, 0, 0, 0, tzinfo=UTC), "000000"),
    (datetime(2024, 3, 5, 9, 5, 7, tzinfo=UTC), "090507"),
    (datetime(2024, 3, 5, 23, 59, 59, tzinfo=UTC), "235959"),
])
def test_time_keeps_its_leading_zero(now: datetime, expected: str) -> None:
    assert evaluate("time()", lambda path: None, now) == expected
    assert evaluate("time() < '120000'", lambda path: None, now) is (expected < "120000")


# --- through the engine: the circle fails with the limit as its reason ------------------------

def compute(uri: str, *deps: str, **outputs: str) -> dict[str, Any]:
    return circle(uri, *deps, box={"action": {"type": "compute", "outputs": outputs}})


def test_compute_beyond_64_bits_fails_the_circle_with_the_limit(engine) -> None:
    tpl = template(waits("a"), compute("calc", "a", n="${a.n} * ${a.n}"), circle("end", "calc"))
    inst = engine.start(tpl)
    finish(engine, inst, "a", {"n": 2 ** 32})
    assert states(inst)["calc"] == "failure" and "64 bits" in inst.circles["calc"].reason
    assert inst.status == "failed"


def test_compute_of_a_100_kb_string_fails_the_circle_with_the_limit(engine) -> None:
    tpl = template(waits("a"), compute("calc", "a", s="${a.s} + ${a.s}"), circle("end", "calc"))
    inst = engine.start(tpl)
    finish(engine, inst, "a", {"s": "x" * 50_000})
    assert states(inst)["calc"] == "failure" and "64 KiB" in inst.circles["calc"].reason


def test_when_with_a_catastrophic_regex_does_not_block_the_engine(engine) -> None:
    tpl = template(waits("a"), waits("b", "a", when=f"${{a.email}} ~ '{CATASTROPHIC}'"),
                   circle("end", "b"))
    inst = engine.start(tpl)
    begun = time.thread_time()
    finish(engine, inst, "a", {"email": "a" * 10_000 + "!"})
    assert time.thread_time() - begun < 1.0
    assert states(inst)["b"] == "skipped"
