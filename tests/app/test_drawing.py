"""The drawing's shapes: columns from the analysis, OR-junctions, weak edges only in
intervention mode, nested flows as frames when expanded."""

from __future__ import annotations

from bpflow_app.drawing import OR_EDGE, STATE_STYLE, WEAK_EDGE, draw
from engine.analysis import analyze

ORDER = {"name": "order", "circles": [
    {"uri": "order"},
    {"uri": "north", "deps": [["order"]]},
    {"uri": "south", "deps": [["order"]]},
    {"uri": "reserved", "deps": [["north", "south"]]},
    {"uri": "ship", "deps": [["reserved"]], "weak": ["order"]},
]}
OUTER = {"name": "outer", "kind": "linear", "circles": [
    {"uri": "first"},
    {"uri": "main", "box": {"action": {"type": "flow", "circles": [
        {"uri": "a"}, {"uri": "b", "deps": [["a"]]}]}}},
]}


def _analysis(body):
    report = analyze(body)
    assert report.valid, report.errors
    return report.analysis


def test_terminal_is_alone_in_the_rightmost_column():
    d = draw(_analysis(ORDER), {})
    x = {n.id: n.x for n in d.nodes}
    assert x["ship"] == max(x.values())
    assert x["order"] < x["north"] == x["south"] < x["reserved"] < x["ship"]
    assert [n for n in d.nodes if n.x == x["ship"]] == [n for n in d.nodes if n.id == "ship"]


def test_or_arrows_meet_in_one_junction_before_their_target():
    d = draw(_analysis(ORDER), {})
    assert len(d.junctions) == 1
    reserved = next(n for n in d.nodes if n.id == "reserved")
    assert d.junctions[0].x < reserved.x and d.junctions[0].y == reserved.y
    or_edges = [e for e in d.edges if e.kind == "or"]
    assert len(or_edges) == 3 and all(e.stroke == OR_EDGE for e in or_edges)
    assert sum(e.arrow for e in or_edges) == 1  # one arrowhead, into the target


def test_weak_edges_only_when_asked():
    analysis = _analysis(ORDER)
    assert not [e for e in draw(analysis, {}).edges if e.kind == "weak"]
    weak = [e for e in draw(analysis, {}, weak={"ship": ("order",)}).edges if e.kind == "weak"]
    assert len(weak) == 1 and weak[0].stroke == WEAK_EDGE and weak[0].dash


def test_states_colour_the_circles():
    d = draw(_analysis(ORDER), {"order": "success", "north": "failure", "south": "ready"})
    by_id = {n.id: n for n in d.nodes}
    assert by_id["order"].fill == STATE_STYLE["success"][0]
    assert by_id["north"].stroke == STATE_STYLE["failure"][1]
    assert by_id["ship"].state == "waiting"
    assert by_id["south"].aria == "south: ready"


def test_nested_flow_is_a_circle_until_expanded():
    analysis = _analysis(OUTER)
    closed = draw(analysis, {})
    assert {n.id for n in closed.nodes} == {"first", "main"}
    assert next(n for n in closed.nodes if n.id == "main").nested
    opened = draw(analysis, {"main.a": "ready"}, expanded={"main"})
    assert {n.id for n in opened.nodes} == {"first", "main.a", "main.b"}
    frame = opened.frames[0]
    assert frame.id == "main"
    inner = [n for n in opened.nodes if n.id.startswith("main.")]
    assert all(frame.x < n.x < frame.x + frame.w and frame.y < n.y < frame.y + frame.h
               for n in inner)
    assert opened.width > closed.width


def test_labels_are_data_never_markup():
    body = {"name": "x", "circles": [{"uri": "a", "description": "<script>x</script>"}]}
    d = draw(_analysis(body), {}, tips={"a": "<script>x</script>"})
    assert d.nodes[0].tip == "<script>x</script>"  # rendered as an SVG text child


def test_circles_are_named_by_their_steps_and_long_names_cut_by_width():
    names = {"order": "Take the order", "north": "从北方仓库发货并登记物流单号",
             "south": "Ship from the southern warehouse"}
    d = draw(_analysis(ORDER), {"order": "success"}, names=names,
             aria=lambda name, state: f"{name} ({state})")
    by_id = {n.id: n for n in d.nodes}
    assert by_id["order"].label == "Take the order"
    assert by_id["order"].aria == "Take the order (success)"
    assert by_id["ship"].label == "ship"  # no name given: its uri
    assert by_id["south"].label == "Ship from the souther…"
    assert by_id["north"].label == "从北方仓库发货并登记…"  # a Chinese character is wide


def test_the_heat_map_darkens_the_circles_that_keep_flows_waiting_longest():
    from bpflow_app.drawing import HEAT, heated
    d = draw(_analysis({"name": "w", "circles": [
        {"uri": "a"}, {"uri": "b", "deps": [["a"]]}, {"uri": "c", "deps": [["b"]]}]}), {})
    figures = {"a": {"count": 4, "p50": 5.0, "p95": 10.0, "max": 12.0},
               "b": {"count": 4, "p50": 60.0, "p95": 100.0, "max": 130.0},
               "c": {"count": 0, "p50": None, "p95": None, "max": None}}
    hot = {n.id: n for n in heated(d, figures, lambda f: f"{f['count']} waits").nodes}
    plain = {n.id: n for n in d.nodes}
    assert hot["b"].fill == HEAT[-1] and hot["a"].fill == HEAT[0]  # 10 s of 100 s: the least
    assert hot["a"].tip == hot["b"].tip == "4 waits"
    assert hot["c"] == plain["c"]  # never waited: drawn as before
    assert heated(d, {}, str).nodes == d.nodes
