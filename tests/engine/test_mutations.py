"""Property tests over bad input (issue #12): random mutations of the example templates,
and bodies drawn from the template JSON Schema.
The analysis always returns a report — valid, or errors with code, path and message —
and never raises."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import shape
from engine.analysis import analyze
from engine.limits import DEFAULT_LIMITS, measure

CODES = {"schema", "duplicate_uri", "unknown_dependency", "cycle", "multiple_terminals",
         "no_terminal", "unreachable", "unknown_variable", "invalid_box", "invalid_retry",
         "invalid_timeout", "invalid_expression", "unknown_template", "nesting_cycle",
         "too_large"}
FOLDER = Path(__file__).resolve().parents[2] / "upload" / "workflow"
EXAMPLES = {p.stem: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(FOLDER.glob("*.json"))}
KNOWN = {b["name"]: b for b in EXAMPLES.values()}
ODD = [None, True, False, 0, -1, 1.5, 1e300, -1e300, 2**70, 10**400, float("nan"),
       float("inf"), "", "x", "a\n", "reimbursement\n", "${", "${a b}", "${ghost.x}",
       "${workflow.nope}", "((((", "0 0 31 2 *", "flow", "linear", [], {}, [1], [[]], {"a": 1},
       {"type": "flow"}, {"type": "flow", "template": "signin"}, ["a", "a"]]
SETTINGS = settings(max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def places(value: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every value inside `value`, without recursion."""
    found, todo = [], [value]
    while todo:
        cur = todo.pop()
        items = cur.items() if isinstance(cur, dict) else enumerate(cur) \
            if isinstance(cur, list) else ()
        for k, v in items:
            found.append((cur, k))
            todo.append(v)
    return found


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    body = copy.deepcopy(EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))])
    for _ in range(draw(st.integers(1, 4))):
        spots = places(body)
        container, key = draw(st.sampled_from(spots))
        op = draw(st.sampled_from(["delete", "retype", "retype", "swap", "nest", "key",
                                   "duplicate", "inline"]))
        if op == "delete":
            del container[key]
        elif op == "retype":
            container[key] = copy.deepcopy(draw(st.sampled_from(ODD)))
        elif op == "swap":
            other, okey = draw(st.sampled_from(spots))
            container[key], other[okey] = copy.deepcopy(other[okey]), copy.deepcopy(container[key])
        elif op == "nest":
            value = container[key]
            for _ in range(draw(st.sampled_from([1, 3, 50, 199, 250, 900]))):
                value = [value] if draw(st.booleans()) else {"x": value}
            container[key] = value
            break  # no copying of it afterwards: deepcopy recurses
        elif op == "key" and isinstance(container[key], dict):
            container[key][draw(st.sampled_from(["uri", "deps", "box", "action", "extra",
                                                 "circles", "policy", "delay"]))] = \
                copy.deepcopy(draw(st.sampled_from(ODD)))
        elif op == "duplicate" and isinstance(container, list):
            container.append(copy.deepcopy(container[key]))
        elif op == "inline" and isinstance(container[key], dict):  # a flow around a copy
            container[key]["box"] = {"action": {"type": "flow",
                                                "circles": copy.deepcopy(body["circles"])}} \
                if isinstance(body, dict) and isinstance(body.get("circles"), list) else {}
        if not isinstance(body, dict):
            break
    return body


def check_report(body: Any) -> None:
    report = analyze(body, KNOWN.get)
    assert report.valid == (report.template is not None) == (report.analysis is not None)
    for err in report.errors:
        assert set(err) == {"code", "path", "message"}
        assert err["code"] in CODES, err
        assert isinstance(err["path"], str) and (err["path"] == "" or err["path"][0] == "/")
        assert isinstance(err["message"], str) and 0 < len(err["message"]) <= 2000
    if report.valid:
        assert report.template.plan.terminal == report.analysis["terminal"]


@SETTINGS
@given(mutated())
def test_mutated_examples_always_get_a_report(body):
    check_report(body)


@SETTINGS
@given(mutated())
def test_the_fast_schema_check_agrees_with_the_validator(body):
    problems, _ = measure(body, DEFAULT_LIMITS)
    if any(code == "too_large" for code, _, _ in problems):
        return  # the validator is never run on those
    assert shape.conforms(body) == (not list(shape.validator().iter_errors(body)))


def test_every_example_is_valid_and_every_mutation_kind_is_reached():
    for body in EXAMPLES.values():
        assert analyze(body, KNOWN.get).valid
    assert len(places(EXAMPLES["order"])) > 20


ANY: dict[str, Any] = {}  # a node that allows anything
_DRAWN: dict[tuple[int, int], tuple[dict[str, Any], st.SearchStrategy[Any]]] = {}


def from_schema(node: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """The strategy for a node, made once per node. The cache holds the node too: a node
    made on the way (`{**node, "type": k}`) would otherwise be freed and its id given to
    another, which would then draw from the first one's strategy (hypothesis saw the same
    test draw differently on a rerun)."""
    key = (id(node), depth)
    if key not in _DRAWN:
        _DRAWN[key] = (node, _from_schema(node, depth))
    return _DRAWN[key][1]


def _from_schema(node: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    """Valid instances of the template schema, drawn by reading it: the keywords it uses
    (type, properties, required, additionalProperties, propertyNames, items, min/maxItems,
    min/maxLength, pattern, enum, const, $ref, if/then, anyOf). hypothesis-jsonschema would do
    this, but it draws nothing from recursive references (nested flows) and 0.23.1 does
    not run with the hypothesis installed here."""
    defs = shape.schema()["$defs"]
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        depth += name == "circles"  # `depth`: how many flows deep
        node = defs[name]
    if "anyOf" in node:
        return st.one_of([from_schema(sub, depth) for sub in node["anyOf"]])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "const" in node:
        return st.just(node["const"])
    kind = node.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**node, "type": k}, depth) for k in kind])
    if kind == "string":
        if "pattern" in node:
            pattern = node["pattern"].removeprefix("^").removesuffix("$")
            return st.from_regex(pattern, fullmatch=True).filter(
                lambda s: node.get("minLength", 0) <= len(s) <= node.get("maxLength", 10**6))
        return st.sampled_from(["flow", "http", "timer", "compute", "", "${a.x}", "a"]) | \
            st.text(max_size=node.get("maxLength", 12))
    if kind == "number":
        return st.integers(-5, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    if kind == "array":
        return st.lists(from_schema(node.get("items", {}), depth),
                        min_size=node.get("minItems", 0), max_size=node.get("maxItems", 3))
    if kind == "object":
        if not node.get("properties") and "additionalProperties" not in node:
            return st.dictionaries(st.sampled_from(["a", "type", "name", "x"]),
                                   from_schema(ANY, depth), max_size=3)
        if isinstance(node.get("additionalProperties"), dict):
            keys = from_schema({"type": "string", **node.get("propertyNames", {})}, depth)
            return st.dictionaries(keys, from_schema(node["additionalProperties"], depth),
                                   max_size=3)
        return _objects(node, depth)
    return st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=4),
                        lambda inner: st.lists(inner, max_size=2)
                        | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=4)


@st.composite
def _objects(draw: st.DrawFn, node: dict[str, Any], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, sub in node.get("properties", {}).items():
        if key in node.get("required", ()) or draw(st.booleans()):
            out[key] = draw(from_schema(sub, depth))
    then = node.get("then", {}).get("properties", {})
    if then and all(out.get(k) == v.get("const") for k, v in
                    node["if"]["properties"].items()):
        for key, sub in then.items():
            if draw(st.booleans()) and (key != "circles" or depth < 3):  # 3 flows deep
                out[key] = draw(from_schema(sub, depth))
    return out


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.deferred(lambda: from_schema(shape.schema())))
def test_templates_drawn_from_the_schema_get_a_report(body):
    assert not list(shape.validator().iter_errors(body))  # the strategy draws valid ones
    assert shape.conforms(body)
    check_report(body)
