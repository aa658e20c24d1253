"""Issue #12 (SPEC §13): the analysis reports and never raises, is bounded (`too_large`),
runs in linear time, and rejects what would only fail at run time."""

from __future__ import annotations

import gc
import json
import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import shape
from engine.analysis import analyze, load_template
from engine.circles import _scan
from engine.limits import Limits
from engine.placeholders import malformed, references
from engine.runtime import Engine
from tests.engine.helpers import FORM, KEY, Clock, circle


def body(*circles: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "t", "circles": list(circles), **extra}


def codes(report) -> list[tuple[str, str]]:
    return [(e["code"], e["path"]) for e in report.errors]


def well_formed(report) -> bool:
    return all(set(e) == {"code", "path", "message"} and isinstance(e["path"], str)
               and isinstance(e["message"], str) and e["message"] for e in report.errors)


# ------------------------------------------------------------ reports, never raises
@pytest.mark.parametrize(("template", "expected"), [
    (body(circle("a", box={"form": "x"})), ("schema", "/circles/0/box/form")),
    (body(circle("a", box="x")), ("schema", "/circles/0/box")),
    (body(circle("a", timeout={"seconds": 5, "policy": {}})),
     ("invalid_timeout", "/circles/0/timeout")),
    (body(circle("a", retry={"count": 1, "logic": []})), ("invalid_retry", "/circles/0/retry")),
    (body({"uri": {}}), ("schema", "/circles/0/uri")),
    (body(circle("a", box={"form": [{"name": {}, "type": "string"}, {"name": "password",
                                                                      "type": "password"}],
                           "action": {"type": "auth"}})),
     ("invalid_box", "/circles/0/box/form/0/name")),
    (body(circle("a", box={"form": 7, "action": {"type": "auth"}})),
     ("schema", "/circles/0/box/form")),
    (body(circle("a", box={"form": [{"type": []}]})),
     ("invalid_box", "/circles/0/box/form/0/type")),
])
def test_mutated_templates_are_reported_not_raised(template, expected):
    report = analyze(template)
    assert expected in codes(report), report.errors
    assert well_formed(report) and report.template is None


def test_a_flow_without_a_usable_uri_reports_only_the_schema():
    assert codes(analyze(body({"uri": {}}))) == [("schema", "/circles/0/uri")]


def _inline(depth: int) -> dict[str, Any]:
    circles = [circle("a")]
    for _ in range(depth):
        circles = [circle("a", box={"action": {"type": "flow", "circles": circles}})]
    return body(*circles)


def test_inline_flows_nested_100_deep_are_too_large():
    assert codes(analyze(_inline(100))) == [("too_large", "")]  # JSON 400 levels deep
    report = analyze(_inline(40))
    assert codes(report) == [("too_large", "/circles/0/box/action" * 33 + "/circles")]
    assert "32 levels" in report.errors[0]["message"]
    assert analyze(_inline(32)).valid


def test_named_templates_nested_100_deep_are_too_large():
    known = {f"t{i}": body(circle("a", box={"action": {"type": "flow", "template": f"t{i + 1}"}}),
                           name=f"t{i}") for i in range(100)}
    known["t100"] = body(circle("a"), name="t100")
    report = analyze(known["t0"], known.get)
    assert {c for c, _ in codes(report)} == {"too_large"}
    assert well_formed(report)
    assert analyze(known["t80"], known.get).valid  # 20 levels


def test_a_template_nested_many_times_is_analysed_once():
    asked: list[str] = []
    inner = body(*[circle(f"c{i}", *([f"c{i - 1}"] if i else [])) for i in range(500)],
                 name="inner")

    def resolve(name: str) -> dict[str, Any] | None:
        asked.append(name)
        return inner if name == "inner" else None

    outer = body(*[circle(f"s{i}", *([f"s{i - 1}"] if i else []),
                          box={"action": {"type": "flow", "template": "inner"}})
                   for i in range(50)])
    start = time.thread_time()
    report = analyze(outer, resolve)
    assert report.valid, report.errors[:3]
    assert asked == ["inner"] and report.circles == 50 + 50 * 500
    assert time.thread_time() - start < 10


def test_nesting_that_doubles_at_each_level_is_too_large():
    known = {f"t{i}": body(circle("a", box={"action": {"type": "flow", "template": f"t{i + 1}"}}),
                           circle("b", "a", box={"action": {"type": "flow",
                                                            "template": f"t{i + 1}"}}),
                           name=f"t{i}") for i in range(20)}
    known["t20"] = body(circle("a"), name="t20")
    report = analyze(known["t0"], known.get)  # 2**20 circles once expanded
    assert {c for c, _ in codes(report)} == {"too_large"}
    assert len(report.errors) <= 22  # a named template's errors are passed on ten at most
    assert "more than 100,000" in report.errors[0]["message"]
    known["t20"] = body(circle("a", "ghost"), name="t20")  # an error at the bottom
    report = analyze(known["t14"], known.get)  # would be repeated 2**6 times
    assert len(report.errors) <= 22 and well_formed(report)


# ------------------------------------------------------------------ limits
def test_cheap_limits_come_first_and_stop_the_analysis():
    chain = body(*[circle(f"c{i}", *([f"c{i - 1}"] if i else []), when="((") for i in range(50)])
    report = analyze(chain, limits=Limits(circles=10))
    assert codes(report) == [("too_large", "")] and "10" in report.errors[0]["message"]
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    report = analyze(body(circle("a", box={"action": {"type": "http", "url": "u",
                                                      "json": deep}})))
    assert codes(report) == [("too_large", "")]
    assert codes(analyze(body(circle("a", description="x" * 100)), limits=Limits(text=50))) \
        == [("too_large", "")]
    assert codes(analyze(body(*[circle(f"c{i}") for i in range(10)]), limits=Limits(values=20))) \
        == [("too_large", "")]


def test_the_deadline_is_a_too_large_error():
    chain = body(*[circle(f"c{i}", *([f"c{i - 1}"] if i else [])) for i in range(100)])
    report = analyze(chain, limits=Limits(seconds=0))
    assert codes(report) == [("too_large", "")] and "longer than" in report.errors[0]["message"]


def test_integers_beyond_64_bits_are_too_large_and_never_printed():
    report = analyze(body(circle("a", retry=[10**5000])))  # repr() of it would raise
    assert codes(report) == [("too_large", "/circles/0/retry/0")]
    assert codes(analyze(body(circle("a", retry=[2**64])))) == [("too_large",
                                                                  "/circles/0/retry/0")]


# ------------------------------------------------------- what would fail at run time
@pytest.mark.parametrize(("extra", "expected"), [
    ({"box": {"action": {"type": "timer", "delay": 1e300}}},
     ("invalid_box", "/circles/0/box/action/delay")),
    ({"box": {"action": {"type": "timer", "delay": 11 * 365 * 86400}}},
     ("invalid_box", "/circles/0/box/action/delay")),
    ({"timeout": {"seconds": 1e300}}, ("invalid_timeout", "/circles/0/timeout")),
    ({"retry": [1e308]}, ("invalid_retry", "/circles/0/retry")),
    ({"retry": {"count": 60, "delay": 1, "logic": "exponential"}},
     ("invalid_retry", "/circles/0/retry")),
    ({"retry": {"count": 1, "delay": 1e300}}, ("invalid_retry", "/circles/0/retry")),
    ({"box": {"action": {"type": "http", "url": "http://x", "timeout": 1e300}}},
     ("invalid_box", "/circles/0/box/action/timeout")),
    ({"box": {"action": {"type": "timer", "cron": "0 0 31 2 *"}}},
     ("invalid_box", "/circles/0/box/action/cron")),
])
def test_what_would_fail_at_run_time_is_an_analysis_error(extra, expected):
    report = analyze(body(circle("a", **extra)))
    assert codes(report) == [expected], report.errors


def test_the_limits_themselves_pass():
    ten_years = 315_576_000
    report = analyze(body(circle("a", retry=[ten_years], timeout={"seconds": ten_years},
                                 box={"action": {"type": "timer", "delay": ten_years}}),
                          circle("b", "a", box={"action": {"type": "timer",
                                                           "cron": "0 0 29 2 *"}})))
    assert report.valid, report.errors


def test_non_finite_numbers_anywhere_are_schema_errors():
    parsed = json.loads('{"name": "t", "circles": [{"uri": "a", "box": {"action": {"type":'
                        ' "http", "url": "http://x", "json": {"k": NaN, "j": [Infinity]}}}}]}')
    assert codes(analyze(parsed)) == [("schema", "/circles/0/box/action/json/j/0"),
                                      ("schema", "/circles/0/box/action/json/k")]
    report = analyze(body(circle("a", retry=[math.inf])))
    assert ("invalid_retry", "/circles/0/retry") in codes(report)


def test_names_and_uris_with_a_trailing_newline_are_rejected():
    report = analyze({"name": "reimbursement\n", "circles": [circle("a\n")],
                      "inputs": {"x\n": "string"}})
    assert codes(report) == [("schema", "/circles/0/uri"), ("schema", "/inputs"),
                             ("schema", "/name")]
    assert not shape.conforms({"name": "t\n", "circles": [circle("a")]})
    form = {"form": [{"name": "x\n"}]}
    assert codes(analyze(body(circle("a", box=form)))) == [("invalid_box",
                                                             "/circles/0/box/form/0/name")]


# -------------------------------------------------------------- linear time
def _big(n: int) -> dict[str, Any]:
    """A chain with side branches, each circle reading an upstream circle."""
    circles = [circle("c0", box=FORM)]
    for i in range(1, n):
        deps = [f"c{i - 1}"] + ([[f"c{i - 2}", f"c{i // 2}"]] if i > 2 else [])
        circles.append(circle(f"c{i}", *deps, box={"confirm": f"${{c{i // 3}.x}} ${{c0.x}}"}))
    return body(*circles)


def test_ten_thousand_circles_are_analysed_in_seconds_not_minutes():
    template = _big(10_000)
    start = time.thread_time()
    report = analyze(template)
    assert report.valid, report.errors[:3]
    assert time.thread_time() - start < 5  # was about 70 s (quadratic)


def test_a_large_template_starts_without_quadratic_planning():
    tpl = load_template(_big(10_000))
    start = time.thread_time()
    engine = Engine(KEY, Clock())
    inst = engine.start(tpl)
    assert time.thread_time() - start < 5
    assert inst.template.plan.nodes["c9999"].visible.get("c3333") == "c3333"
    assert inst.template.plan.nodes["c9999"].visible.get("c9999") is None


def test_a_late_reference_to_a_non_ancestor_is_still_found():
    template = _big(3_000)
    template["circles"][10]["box"] = {"confirm": "${c2000.x}"}
    report = analyze(template)
    assert codes(report) == [("unknown_variable", "/circles/10/box/confirm")]


def test_references_are_still_checked_around_a_cycle():
    report = analyze(body(circle("a", "c", box={"confirm": "${d.x}"}),
                          circle("b", "a", box={"confirm": "${c.x}"}),
                          circle("c", "b"), circle("d", "c", box={"confirm": "${a.x}"})))
    assert codes(report) == [("unknown_variable", "/circles/0/box/confirm"),
                             ("cycle", "/circles/0/deps")]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="${}.a b0_-x", max_size=30))
def test_one_pass_scan_finds_what_the_placeholder_functions_find(text):
    assert _scan(text) == (malformed(text), references(text))


def test_the_collector_is_paused_only_while_a_large_template_is_analysed():
    template = _big(2_500)
    seen: list[bool] = []
    report = analyze(template, limits=Limits())
    assert report.valid and gc.isenabled()
    body_with_probe = _big(2_500)

    def resolve(name: str) -> dict[str, Any] | None:
        seen.append(gc.isenabled())
        return {"name": name, "circles": [circle("x")]}
    body_with_probe["circles"][0]["box"] = {"action": {"type": "flow", "template": "inner"}}
    analyze(body_with_probe, resolve)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        analyze(template)
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()
