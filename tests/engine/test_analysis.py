"""Analysis (SPEC §3): every error code, collected with its path, and the layout rules."""

from __future__ import annotations

from typing import Any

import pytest

from engine.analysis import analyze, load_template, schema
from engine.errors import DefinitionError
from tests.engine.helpers import FORM, circle, waits


def body(*circles: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "t", "circles": list(circles), **extra}


def codes(report) -> list[tuple[str, str]]:
    return [(e["code"], e["path"]) for e in report.errors]


def only(report, code: str) -> dict[str, Any]:
    found = [e for e in report.errors if e["code"] == code]
    assert len(found) == 1, report.errors
    return found[0]


# ------------------------------------------------------------------ error codes
def test_schema_errors_carry_json_pointers():
    report = analyze({"name": "Bad Name", "circles": [{"uri": "A"}, {"deps": "x"}], "extra": 1})
    paths = {e["path"] for e in report.errors if e["code"] == "schema"}
    assert {"/name", "/circles/0/uri", "/circles/1", "/circles/1/deps", ""} <= paths


def test_schema_rejects_a_non_object_and_an_empty_flow():
    assert codes(analyze([1, 2])) == [("schema", "")]
    assert ("schema", "/circles") in codes(analyze({"name": "t", "circles": []}))


def test_schema_is_shipped_and_describes_the_dsl():
    s = schema()
    assert s["properties"]["name"]["pattern"] == "^[a-z0-9_-]+$"
    assert "circle" in s["$defs"]


def test_duplicate_uri():
    report = analyze(body(circle("a"), circle("a"), circle("b", "a")))
    err = only(report, "duplicate_uri")
    assert err["path"] == "/circles/1/uri" and "'a'" in err["message"]


def test_unknown_dependency_names_the_missing_uri():
    report = analyze(body(circle("a"), circle("b", ["a", "ghost"]), circle("c", "b"),
                          circle("d", "c", weak=["nobody"])))
    assert codes(report) == [("unknown_dependency", "/circles/1/deps/0/1"),
                             ("unknown_dependency", "/circles/3/weak/0")]
    assert "'ghost'" in report.errors[0]["message"]


def test_cycle_is_named():
    report = analyze(body(circle("a", "c"), circle("b", "a"), circle("c", "b"), circle("d", "c")))
    err = only(report, "cycle")
    assert err["path"] == "/circles/0/deps"
    assert "a → b → c → a" in err["message"]


def test_self_loop_is_a_cycle():
    report = analyze(body(circle("a", "a"), circle("b", "a")))
    assert "a → a" in only(report, "cycle")["message"]


def test_multiple_terminals_lists_them():
    report = analyze(body(circle("a"), circle("b", "a"), circle("c", "a")))
    err = only(report, "multiple_terminals")
    assert err["path"] == "/circles" and "b, c" in err["message"]


def test_no_terminal_when_every_circle_has_an_arrow_out():
    report = analyze(body(circle("a", "b"), circle("b", "a")))
    assert {c for c, _ in codes(report)} == {"cycle", "no_terminal"}


def test_unreachable_circle_cannot_reach_the_terminal():
    report = analyze(body(circle("a"), circle("b", "a", "c"), circle("c", "b"),
                          circle("end", "a")))
    unreachable = [e["path"] for e in report.errors if e["code"] == "unreachable"]
    assert unreachable == ["/circles/1", "/circles/2"]


def test_unknown_variable_must_be_an_ancestor():
    report = analyze(body(
        circle("a", box=FORM), circle("b", "a", box=FORM),
        circle("c", "a", box={"confirm": "${b.x} and ${a.x} and ${user.username}"}),
        circle("d", "b", "c", when="${later.x} > 1"), circle("later", "d")))
    found = [(e["path"], e["message"]) for e in report.errors if e["code"] == "unknown_variable"]
    assert [p for p, _ in found] == ["/circles/2/box/confirm", "/circles/3/when"]
    assert "'b'" in found[0][1] and "could not exist yet" in found[0][1]


def test_unknown_variable_checks_declared_inputs():
    report = analyze(body(circle("a", box={"confirm": "${workflow.input.nope} ${workflow.x}"}),
                          inputs={"amount": "number"}))
    assert [e["code"] for e in report.errors] == ["unknown_variable", "unknown_variable"]


def test_invalid_box_reports_each_problem():
    report = analyze(body(
        circle("a", box={"form": [{"name": "x", "type": "colour"}, {"name": "s", "type": "select"},
                                  {"name": "x"}]}),
        circle("b", "a", box={"action": {"type": "teleport"}}),
        circle("c", "b", box={"action": {"type": "http"}}),
        circle("d", "c", box={"action": {"type": "approval", "to": ["a", "b"], "quorum": 3}}),
        circle("e", "d", box={"action": {"type": "timer", "cron": "every day"}}),
        circle("f", "e", box={"action": {"type": "auth"}}),
        circle("g", "f", box={"action": {"type": "flow"}}),
        circle("h", "g", box={"action": {"type": "compute", "outputs": {}}}),
    ))
    assert {p for c, p in codes(report) if c == "invalid_box"} == {
        "/circles/0/box/form/0/type", "/circles/0/box/form/1/options", "/circles/0/box/form/2/name",
        "/circles/1/box/action/type", "/circles/2/box/action/url",
        "/circles/3/box/action/quorum", "/circles/4/box/action/cron", "/circles/5/box/action",
        "/circles/6/box/action", "/circles/7/box/action/outputs"}
    assert {c for c, _ in codes(report)} == {"invalid_box"}


def test_invalid_retry_and_timeout():
    report = analyze(body(circle("a", retry=[1, -5]),
                          circle("b", "a", retry={"count": 2, "delay": 1, "logic": "random"}),
                          circle("c", "b", timeout={"seconds": 0}),
                          circle("d", "c", timeout={"seconds": 5, "policy": "explode"})))
    assert codes(report) == [("invalid_retry", "/circles/0/retry"),
                             ("invalid_retry", "/circles/1/retry"),
                             ("invalid_timeout", "/circles/2/timeout"),
                             ("invalid_timeout", "/circles/3/timeout")]


def test_invalid_expression_in_when_compute_and_placeholders():
    report = analyze(body(
        circle("a", when="1 +"),
        circle("b", "a", box={"action": {"type": "compute", "outputs": {"k": "nosuch(1)"}}}),
        circle("c", "b", box={"confirm": "hello ${a b}"})))
    assert codes(report) == [("invalid_expression", "/circles/0/when"),
                             ("invalid_expression", "/circles/1/box/action/outputs/k"),
                             ("invalid_expression", "/circles/2/box/confirm")]


def test_unknown_template_and_nesting_cycle():
    known = {
        "ping": body(circle("x", box={"action": {"type": "flow", "template": "pong"}}),
                     name="ping"),
        "pong": body(circle("y", box={"action": {"type": "flow", "template": "ping"}}),
                     name="pong"),
    }
    report = analyze(body(circle("a", box={"action": {"type": "flow", "template": "nope"}})),
                     known.get)
    assert codes(report) == [("unknown_template", "/circles/0/box/action/template")]
    report = analyze(known["ping"], known.get)
    err = only(report, "nesting_cycle")
    assert "ping → pong → ping" in err["message"]


def test_errors_are_all_collected_not_first_only():
    report = analyze({"name": "BAD", "circles": [
        circle("a", "ghost"), circle("a"), circle("b", "b", retry="x", when="(")]})
    assert {c for c, _ in codes(report)} >= {"schema", "duplicate_uri", "unknown_dependency",
                                             "cycle", "invalid_expression"}


def test_linear_flow_rejects_deps():
    report = analyze(body(circle("a"), circle("b", "a"), kind="linear"))
    assert codes(report) == [("schema", "/circles/1/deps")]


def test_load_template_raises_one_error_carrying_all():
    with pytest.raises(DefinitionError) as exc:
        load_template(body(circle("a", "x"), circle("a")))
    assert len(exc.value.errors) == 2
    assert isinstance(exc.value, ValueError)


# ------------------------------------------------------------------- layout
def test_layout_of_a_diamond_with_or_arrow():
    report = analyze(body(circle("start"), circle("left", "start"), circle("right", "start"),
                          circle("join", ["left", "right"]), circle("end", "join", "start")))
    a = report.analysis
    assert a["entries"] == ["start"] and a["terminal"] == "end"
    assert a["longest_path"] == 4 and a["width"] == 2
    cols = {u: p["col"] for u, p in a["layout"].items()}
    assert cols == {"start": 0, "left": 1, "right": 1, "join": 2, "end": 3}
    assert sorted(a["layout"][u]["row"] for u in ("left", "right")) == [0, 1]
    assert {e["or"] for e in a["edges"] if e["to"] == "join"} == {True}


def test_terminal_is_alone_in_the_rightmost_column_and_arrows_point_right():
    report = analyze(body(circle("a"), circle("b"), circle("c", "a"), circle("d", "b", "c"),
                          circle("e", "a"), circle("end", "d", "e")))
    a = report.analysis
    layout = a["layout"]
    right = a["longest_path"] - 1
    assert [u for u, p in layout.items() if p["col"] == right] == ["end"]
    for e in a["edges"]:
        assert layout[e["from"]]["col"] < layout[e["to"]]["col"]
    assert a["entries"] == ["a", "b"]


def test_col_is_longest_path_minus_one_minus_depth():
    # depth(a) = 3 (a→c→d→end), depth(b) = 2, depth(e) = 1
    report = analyze(body(circle("a"), circle("b"), circle("c", "a"), circle("d", "b", "c"),
                          circle("e", "a"), circle("end", "d", "e")))
    a = report.analysis
    assert a["longest_path"] == 4
    assert {u: p["col"] for u, p in a["layout"].items()} == {
        "a": 0, "b": 1, "c": 1, "d": 2, "e": 2, "end": 3}


def test_rows_are_dense_per_column_and_width_is_the_tallest_column():
    circles = [circle("s")] + [circle(f"m{i}", "s") for i in range(5)]
    circles.append(circle("end", *[f"m{i}" for i in range(5)]))
    a = analyze(body(*circles)).analysis
    assert a["width"] == 5
    assert sorted(a["layout"][f"m{i}"]["row"] for i in range(5)) == [0, 1, 2, 3, 4]


def test_rows_keep_arrows_short():
    # x feeds p (row 0 on the right) and y feeds q (row 1): x should sit above y.
    a = analyze(body(circle("y"), circle("x"), circle("p", "x"), circle("q", "y"),
                     circle("end", "p", "q"))).analysis
    assert a["layout"]["p"]["row"] < a["layout"]["q"]["row"]
    assert a["layout"]["x"]["row"] < a["layout"]["y"]["row"]


def test_weak_edges_play_no_part_in_analysis():
    plain = analyze(body(circle("a"), circle("b", "a"), circle("end", "b"))).analysis
    weak = analyze(body(circle("a", weak=["end"]), circle("b", "a"),
                        circle("end", "b", weak=["a"]))).analysis
    assert plain["layout"] == weak["layout"] and plain["longest_path"] == weak["longest_path"]


def test_linear_flow_chains_the_circles():
    a = analyze(body(circle("a"), circle("b"), circle("c"), kind="linear")).analysis
    assert a["terminal"] == "c" and a["longest_path"] == 3 and a["entries"] == ["a"]


def test_nested_inline_flow_is_analysed_and_may_read_outer_ancestors():
    inner = [circle("x", box={"confirm": "${a.x}"}), circle("y", "x", box={"confirm": "${x}"})]
    report = analyze(body(circle("a", box=FORM),
                          circle("sub", "a", box={"action": {"type": "flow", "circles": inner}}),
                          circle("end", "sub", box={"confirm": "${sub.y}"})))
    assert report.valid, report.errors
    assert report.analysis["nested"]["sub"]["terminal"] == "y"


def test_nested_inline_errors_have_full_paths():
    inner = [circle("x", "ghost"), circle("y", "x", box={"confirm": "${end}"})]
    report = analyze(body(circle("sub", box={"action": {"type": "flow", "circles": inner}}),
                          circle("end", "sub")))
    assert codes(report) == [
        ("unknown_dependency", "/circles/0/box/action/circles/0/deps/0/0"),
        ("unknown_variable", "/circles/0/box/action/circles/1/box/confirm")]


def test_nested_by_name_is_resolved_into_the_template():
    known = {"inner": body(waits("q"), name="inner")}
    tpl = load_template(body(circle("sub", box={"action": {"type": "flow", "template": "inner"}})),
                        known.get)
    assert tpl.flow.circle("sub").flow.name == "inner"
    assert tpl.flow.circle("sub").flow.terminal == "q"


def test_retry_object_is_normalised_to_the_list_of_waits():
    tpl = load_template(body(circle("a", retry={"count": 3, "delay": 2, "logic": "exponential"}),
                             circle("b", "a", retry={"count": 2, "delay": 5}),
                             circle("c", "b", retry={"count": 2, "delay": 1,
                                                     "logic": "EXPONENTIAL_BACKOFF"})))
    assert tpl.flow.circle("a").retry == (2, 4, 8)
    assert tpl.flow.circle("b").retry == (5, 5)
    assert tpl.flow.circle("c").retry == (1, 2)


def test_template_is_immutable():
    tpl = load_template(body(circle("a")))
    with pytest.raises(AttributeError):
        tpl.name = "other"  # type: ignore[misc]


def test_reserved_names_cannot_be_circle_uris():
    report = analyze(body(circle("user"), circle("end", "user")))
    assert codes(report) == [("schema", "/circles/0/uri")]


def test_the_action_layer_reads_its_own_form_as_form():
    ok = analyze(body(circle("a", box={"form": [{"name": "q", "type": "string"}], "action": {
        "type": "http", "url": "http://x/${form.q}"}})))
    assert ok.valid, ok.errors
    bad = analyze(body(circle("a", box={"form": [{"name": "q"}], "action": {
        "type": "http", "url": "http://x/${form.nope}"}}), circle("b", "a", when="${form.q}")))
    assert codes(bad) == [("unknown_variable", "/circles/0/box/action/url"),
                          ("unknown_variable", "/circles/1/when")]


def test_password_fields_only_feed_auth():
    report = analyze(body(circle("a", box={"form": [{"name": "p", "type": "password"}]})))
    assert codes(report) == [("invalid_box", "/circles/0/box/form/0/type")]


def test_unknown_action_keys_are_reported():
    report = analyze(body(circle("a", box={"action": {"type": "http", "url": "http://x",
                                                      "jsn": {"a": 1}}})))
    err = only(report, "invalid_box")
    assert err["path"] == "/circles/0/box/action/jsn" and "unknown key 'jsn'" in err["message"]


def test_confirm_cannot_hold_an_action_and_approvers_are_named_once():
    report = analyze(body(circle("a", box={"confirm": "sure?", "action": {
        "type": "mail", "to": "x"}}), circle("b", "a", box={"action": {
            "type": "approval", "to": ["ann", "ann"]}})))
    assert codes(report) == [("invalid_box", "/circles/0/box/confirm"),
                             ("invalid_box", "/circles/1/box/action/to")]


def test_file_fields_name_their_extensions_and_size():
    good = analyze(body(circle("a", box={"form": [
        {"name": "receipt", "type": "file", "accept": [".pdf", ".png"], "max_bytes": 4096},
        {"name": "any", "type": "file"}]})))
    assert codes(good) == []
    field = load_template(body(circle("a", box={"form": [
        {"name": "receipt", "type": "file", "accept": [".pdf"], "max_bytes": 10}]}))
    ).plan.nodes["a"].circle.box.form[0]
    assert (field.type, field.accept, field.max_bytes) == ("file", (".pdf",), 10)
    bad = analyze(body(circle("a", box={"form": [
        {"name": "f", "type": "file", "accept": ["pdf", ".PDF"], "max_bytes": 0},
        {"name": "g", "type": "file", "accept": ".pdf", "default": "x",
         "max_bytes": True},
        {"name": "s", "type": "string", "accept": [".pdf"], "max_bytes": 5}]})))
    assert sorted(codes(bad)) == [("invalid_box", "/circles/0/box/form/0/accept"),
                          ("invalid_box", "/circles/0/box/form/0/max_bytes"),
                          ("invalid_box", "/circles/0/box/form/1/accept"),
                          ("invalid_box", "/circles/0/box/form/1/default"),
                          ("invalid_box", "/circles/0/box/form/1/max_bytes"),
                          ("invalid_box", "/circles/0/box/form/2/accept"),
                          ("invalid_box", "/circles/0/box/form/2/max_bytes")]
