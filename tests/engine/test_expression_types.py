"""Values of different types never compare silently (SPEC §5, §16): an analysis error
where the kinds are known (literals, functions, declared inputs, form fields), a runtime
failure with a reason otherwise; `exists` and `default` for values that may be unset."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.analysis import analyze
from engine.errors import ExpressionError, VariableError
from engine.expressions import compile_expression, evaluate
from engine.runtime import Engine
from tests.engine.helpers import KEY, Clock, circle, finish, template

NOW = datetime(2024, 3, 10, 9, 30, 5, tzinfo=UTC)  # a Sunday
VARS: dict[tuple[str, ...], Any] = {("n",): 5, ("s",): "5", ("none",): None,
                                    ("claim", "amount"): 1200}


def resolve(path: tuple[str, ...]) -> Any:
    """VARS, and an unset variable as the engine reports it."""
    if path not in VARS:
        raise VariableError(".".join(path))
    return VARS[path]


def run(source: str) -> Any:
    return evaluate(source, resolve, NOW)


@pytest.mark.parametrize("source", ["${s} == ${n}", "${n} != ${s}", "'5' == 5",
                                    "date() == 20240310"])
def test_a_string_compared_with_a_number_fails_with_a_reason(source: str) -> None:
    with pytest.raises(ExpressionError, match="cannot compare"):
        run(source)


@pytest.mark.parametrize(("source", "expected"), [
    ("${none} == null", True), ("${n} == null", False), ("true == 1", False),
    ("${s} == '5'", True), ("str(${n}) == ${s}", True), ("${n} == int(${s})", True),
])
def test_other_equalities_keep_their_answers(source: str, expected: bool) -> None:
    assert run(source) is expected


@pytest.mark.parametrize(("source", "expected"), [
    ("exists(${n})", True),
    ("exists(${missing.x})", False),
    ("exists(${none})", False),  # null counts as unset
    ("not exists(${missing.x}) or ${missing.x} > 1", True),
    ("default(${n}, 0)", 5),
    ("default(${missing.x}, 0)", 0),
    ("default(${none}, 'x')", "x"),
    ("default(${n}, 1 / 0)", 5),  # the fallback is evaluated only when it is needed
    ("default(${missing.x}, ${n}) + 1", 6),
])
def test_exists_and_default_read_an_unset_value_without_failing(source: str,
                                                                 expected: Any) -> None:
    assert run(source) == expected


@pytest.mark.parametrize("source", ["exists(1)", "exists(${n}, 2)", "default(${n})",
                                    "default('a', 1)", "exists((${n}))"])
def test_exists_and_default_take_a_variable(source: str) -> None:
    with pytest.raises(ExpressionError, match="variable"):
        compile_expression(source)


def test_an_unset_variable_still_fails_outside_exists_and_default() -> None:
    with pytest.raises(VariableError):
        run("${missing.x} > 1")


@pytest.mark.parametrize(("source", "problem"), [
    ("date() == 20240310", "'==' compares a string with a number"),
    ("'a' < 1", "'<' needs two numbers or two strings, here a string and a number"),
    ("week() + 'x'", "'+' needs two numbers or two strings"),
    ("len('ab') * 'x'", "'*' needs numbers"),
    ("${amount} == 'big'", "'==' compares a number with a string"),
    ("${amount} + 1 > ${name}", "'>' needs two numbers or two strings"),
])
def test_a_mix_the_kinds_show_is_a_problem_before_anything_runs(source: str,
                                                                problem: str) -> None:
    kinds = {("amount",): "number", ("name",): "string"}
    problems = compile_expression(source).type_problems(kinds.get)
    assert len(problems) == 1 and problems[0].startswith(problem), problems
    assert "column" in problems[0]


@pytest.mark.parametrize("source", ["${x} == 1", "${amount} == ${x}", "date() == '20240310'",
                                    "exists(${x}) and ${x} > 1", "default(${x}, 0) == 'a'",
                                    "${amount} > 1 and ${name} == 'a'", "1 == null"])
def test_unknown_kinds_and_matching_kinds_are_no_problem(source: str) -> None:
    kinds = {("amount",): "number", ("name",): "string"}
    assert compile_expression(source).type_problems(kinds.get) == []


def _errors(*circles: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    return analyze({"name": "t", "circles": list(circles), **extra}).errors


def test_the_analysis_refuses_a_comparison_of_a_number_field_with_a_string() -> None:
    form = {"form": [{"name": "amount", "type": "number"}, {"name": "tier"}]}
    [error] = _errors(circle("claim", box=form),
                      circle("big", "claim", when="${claim.amount} > 'big'"),
                      circle("end", "big"))
    assert error["code"] == "invalid_expression" and error["path"] == "/circles/1/when"
    assert "'>' needs two numbers or two strings, here a number and a string" in \
        error["message"]
    assert not _errors(circle("claim", box=form),
                       circle("big", "claim", when="${claim.amount} > 1000 and"
                              " ${claim.tier} == 'gold'"), circle("end", "big"))


def test_the_analysis_refuses_a_declared_input_compared_with_the_wrong_kind() -> None:
    outputs = {"x": "${workflow.input.count} == '3'", "y": "date() >= 20240101"}
    errors = _errors(circle("c", box={"action": {"type": "compute", "outputs": outputs}}),
                     inputs={"count": "integer"})
    assert sorted(e["path"] for e in errors) == ["/circles/0/box/action/outputs/x",
                                                "/circles/0/box/action/outputs/y"]
    assert all(e["code"] == "invalid_expression" for e in errors)


def test_a_mix_only_found_when_it_runs_fails_the_circle_with_the_reason() -> None:
    tpl = template(circle("get", box={"action": {"type": "http", "url": "http://x"}}),
                   circle("check", "get", when="${get.code} == 200"),
                   circle("end", "check"))
    engine = Engine(KEY, Clock())
    inst = engine.start(tpl)
    finish(engine, inst, "get", {"code": "200"})
    run_ = inst.circles["check"]
    assert run_.state == "failure" and "'==' cannot compare string and int" in run_.reason
    assert inst.status == "failed"


def test_a_when_with_exists_takes_the_path_that_was_not_skipped() -> None:
    tpl = template(circle("pick", box={"form": [{"name": "ok", "type": "boolean"}]}),
                   circle("a", "pick", when="${pick.ok} == true",
                          box={"action": {"type": "compute", "outputs": {"via": "'a'"}}}),
                   circle("b", "pick", when="${pick.ok} == false"),
                   circle("end", ["a", "b"], box={"action": {"type": "compute", "outputs": {
                       "path": "default(${a.via}, 'b')", "a_ran": "exists(${a.via})"}}}))
    engine = Engine(KEY, Clock())
    inst = engine.start(tpl)
    finish(engine, inst, "pick", {"ok": False})
    assert inst.status == "completed"
    assert inst.circles["end"].result == {"path": "b", "a_ran": False}
