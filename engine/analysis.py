"""Analysis of a template before it is accepted (SPEC §3).

Every problem is collected, each as `{"code", "path", "message"}` with a JSON
pointer into the template. The checks read the raw JSON defensively, so they
still run (and report) on a body the schema already rejected.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
import networkx as nx

from engine import boxes
from engine.errors import DefinitionError, ExpressionError
from engine.expressions import compile_expression
from engine.layout import layout
from engine.model import (
    Flow,
    Invalid,
    Template,
    build_flow,
    linear_deps,
    normalize_retry,
    normalize_timeout,
)
from engine.placeholders import escape_pointer, iter_strings, malformed, references

TemplateResolver = Callable[[str], "dict[str, Any] | None"]
BUILTIN_ROOTS = ("workflow", "user", "instance")


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of the DSL, shipped in the package."""
    text = resources.files("engine").joinpath("schema/template.schema.json").read_text()
    return json.loads(text)


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema())


@dataclass
class Report:
    errors: list[dict[str, Any]] = field(default_factory=list)
    analysis: dict[str, Any] | None = None
    template: Template | None = None

    @property
    def valid(self) -> bool:
        return not self.errors

    def add(self, code: str, path: str, message: str) -> None:
        self.errors.append({"code": code, "path": path, "message": message})


@dataclass
class _Context:
    report: Report
    resolve: TemplateResolver
    stack: tuple[str, ...]  # names of templates being expanded, outermost first
    inputs: dict[str, Any] | None


def analyze(body: Any, resolve: TemplateResolver | None = None,
            _stack: tuple[str, ...] = ()) -> Report:
    """Check `body`; on success the report carries the analysis and the Template."""
    report = Report()
    if not isinstance(body, dict):
        report.add("schema", "", "a template must be a JSON object")
        return report
    for err in _validator().iter_errors(body):
        pointer = "".join(f"/{escape_pointer(str(p))}" for p in err.absolute_path)
        report.add("schema", pointer, _schema_message(err))
    name = body.get("name") if isinstance(body.get("name"), str) else None
    inputs = body.get("inputs") if isinstance(body.get("inputs"), dict) else None
    ctx = _Context(report, resolve or (lambda _name: None), _stack + ((name or "?"),), inputs)
    circles = body.get("circles")
    kind = body.get("kind", "dag")
    if isinstance(circles, list) and circles:
        result = _check_flow(circles, kind, "", ctx, frozenset())
        if report.valid and result is not None:
            analysis, flow = result
            report.analysis = analysis
            report.template = Template(
                name=name or "", flow=flow, body=body, analysis=analysis,
                title=body.get("title", ""), description=body.get("description", ""),
                kind=kind, inputs=dict(inputs or {}))
    report.errors.sort(key=lambda e: (e["path"], e["code"]))
    return report


def load_template(body: Any, resolve: TemplateResolver | None = None) -> Template:
    """The Template of a valid body; raises DefinitionError with every problem."""
    report = analyze(body, resolve)
    if not report.valid:
        raise DefinitionError(report.errors)
    assert report.template is not None
    return report.template


def _schema_message(err: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in err.absolute_path) or "template"
    return f"{where}: {err.message}"


def _check_flow(circles: list[Any], kind: Any, base: str, ctx: _Context,
                outer: frozenset[str]) -> tuple[dict[str, Any], Flow] | None:
    """Check one flow (top level or inline nested); returns its analysis and Flow."""
    rep = ctx.report
    errors_before = len(rep.errors)
    index: dict[str, int] = {}
    for i, c in enumerate(circles):
        uri = c.get("uri") if isinstance(c, dict) else None
        if not isinstance(uri, str):
            continue
        if uri in BUILTIN_ROOTS:
            rep.add("schema", f"{base}/circles/{i}/uri",
                    f"uri '{uri}' is reserved: ${{{uri}...}} names the {uri}, not a circle")
        if uri in index:
            rep.add("duplicate_uri", f"{base}/circles/{i}/uri",
                    f"uri '{uri}' is already used by circle #{index[uri]}")
        else:
            index[uri] = i
    good = [(i, c) for i, c in enumerate(circles)
            if isinstance(c, dict) and index.get(c.get("uri")) == i]

    graph = nx.DiGraph()
    graph.add_nodes_from(c["uri"] for _, c in good)
    if kind == "linear":
        implied = linear_deps([c for _, c in good])
        for (i, c), deps in zip(good, implied, strict=True):
            if "deps" in c:
                rep.add("schema", f"{base}/circles/{i}/deps",
                        "a linear flow takes no deps: each circle depends on the one before it")
            graph.add_edges_from((g[0], c["uri"]) for g in deps)
    for i, c in good:
        deps = c.get("deps") if kind != "linear" else None
        for g, group in enumerate(deps if isinstance(deps, list) else []):
            for k, dep in enumerate(group if isinstance(group, list) else []):
                if not isinstance(dep, str):
                    continue
                if dep in index:
                    graph.add_edge(dep, c["uri"])
                else:
                    rep.add("unknown_dependency", f"{base}/circles/{i}/deps/{g}/{k}",
                            f"circle '{c['uri']}' depends on '{dep}', which is not a circle"
                            " of this flow")
        weak = c.get("weak")
        for k, dep in enumerate(weak if isinstance(weak, list) else []):
            if isinstance(dep, str) and dep not in index:
                rep.add("unknown_dependency", f"{base}/circles/{i}/weak/{k}",
                        f"circle '{c['uri']}' has a weak dependency on '{dep}', which is not"
                        " a circle of this flow")

    terminal = _check_shape(graph, index, base, rep)
    nested: dict[str, Any] = {}
    nested_flows: dict[str, Flow] = {}
    for i, c in good:
        ptr = f"{base}/circles/{i}"
        ancestors = frozenset(nx.ancestors(graph, c["uri"])) | outer
        _check_circle(c, ptr, ancestors, ctx)
        sub = _check_nested(c, ptr, ancestors, ctx)
        if sub is not None:
            nested[c["uri"]], nested_flows[c["uri"]] = sub
    if len(rep.errors) > errors_before or terminal is None:
        return None
    order = [c["uri"] for _, c in good]
    analysis = layout(graph, terminal, order)
    analysis["edges"] = _edges([c for _, c in good], kind)
    if nested:
        analysis["nested"] = nested
    raw = [c for _, c in good]
    return analysis, build_flow(raw, kind if kind in ("dag", "linear") else "dag", terminal,
                                nested_flows)


def _edges(circles: list[dict[str, Any]], kind: Any) -> list[dict[str, Any]]:
    """Arrows for drawing; members of one OR-group share `group` and have `or` set."""
    deps = linear_deps(circles) if kind == "linear" else [c.get("deps", []) for c in circles]
    return [{"from": dep, "to": c["uri"], "group": g, "or": len(group) > 1}
            for c, groups in zip(circles, deps, strict=True)
            for g, group in enumerate(groups) for dep in group]


def _check_shape(graph: nx.DiGraph, index: dict[str, int], base: str, rep: Report) -> str | None:
    """Cycles, the unique terminal and reachability; returns the terminal when unique."""
    for scc in nx.strongly_connected_components(graph):
        first = min(scc, key=index.__getitem__)
        if len(scc) == 1 and not graph.has_edge(first, first):
            continue
        edges = nx.find_cycle(graph.subgraph(scc), source=first)
        names = [u for u, _ in edges] + [edges[0][0]]
        rep.add("cycle", f"{base}/circles/{index[first]}/deps",
                "cycle: " + " → ".join(names) + " (arrows must never lead back to a circle)")
    sinks = sorted((n for n in graph if graph.out_degree(n) == 0), key=index.__getitem__)
    if not sinks:
        rep.add("no_terminal", f"{base}/circles",
                "no circle ends the flow: every circle has an arrow out of it")
        return None
    if len(sinks) > 1:
        rep.add("multiple_terminals", f"{base}/circles",
                f"a flow ends in exactly one circle, but {len(sinks)} circles have no arrow"
                f" out of them: {', '.join(sinks)}")
        return None
    terminal = sinks[0]
    reach = nx.ancestors(graph, terminal) | {terminal}
    for n in sorted(set(graph) - reach, key=index.__getitem__):
        rep.add("unreachable", f"{base}/circles/{index[n]}",
                f"circle '{n}' cannot reach the terminal '{terminal}'")
    return terminal


def _check_circle(c: dict[str, Any], ptr: str, ancestors: frozenset[str], ctx: _Context) -> None:
    rep = ctx.report
    for key, normalize, code in (("retry", normalize_retry, "invalid_retry"),
                                 ("timeout", normalize_timeout, "invalid_timeout")):
        try:
            normalize(c.get(key))
        except Invalid as exc:
            rep.add(code, f"{ptr}/{key}", f"circle '{c['uri']}': {exc}")
    refs: list[tuple[str, tuple[str, ...]]] = []
    when = c.get("when")
    if isinstance(when, str):
        refs += _expression_refs(when, f"{ptr}/when", rep, c["uri"])
    box = c.get("box")
    if isinstance(box, dict):
        for where, message in boxes.check_box(box):
            rep.add("invalid_box", f"{ptr}/box{where}", f"circle '{c['uri']}': {message}")
        action = box.get("action") if isinstance(box.get("action"), dict) else {}
        outputs = action.get("outputs") if action.get("type") == "compute" else None
        for name, expr in (outputs.items() if isinstance(outputs, dict) else []):
            if isinstance(expr, str):
                refs += _expression_refs(expr, f"{ptr}/box/action/outputs/{escape_pointer(name)}",
                                         rep, c["uri"])
        skip = f"{ptr}/box/action/outputs/" if outputs is not None else None
        nested_circles = f"{ptr}/box/action/circles"
        for where, text in iter_strings(box, f"{ptr}/box"):
            if (skip and where.startswith(skip)) or where.startswith(nested_circles):
                continue
            for bad in malformed(text):
                rep.add("invalid_expression", where,
                        f"circle '{c['uri']}': malformed placeholder '{bad}'")
            refs += [(where, path) for path in references(text)]
    fields = {f.get("name") for f in (box or {}).get("form", []) if isinstance(f, dict)} \
        if isinstance(box, dict) and isinstance(box.get("form"), list) else set()
    for where, path in refs:
        if path[0] == "form" and fields and where.startswith(f"{ptr}/box/action"):
            if len(path) > 1 and path[1] not in fields:
                rep.add("unknown_variable", where, f"circle '{c['uri']}': ${{form.{path[1]}}}"
                        " names no field of this circle's form")
            continue  # the action layer reads the form it sits under
        problem = _unknown_variable(path, ancestors, ctx.inputs)
        if problem:
            rep.add("unknown_variable", where, f"circle '{c['uri']}': {problem}")


def _expression_refs(source: str, where: str, rep: Report,
                     uri: str) -> list[tuple[str, tuple[str, ...]]]:
    try:
        return [(where, path) for path in compile_expression(source).references]
    except ExpressionError as exc:
        rep.add("invalid_expression", where, f"circle '{uri}': {exc}")
        return []


def _unknown_variable(path: tuple[str, ...], ancestors: frozenset[str],
                      inputs: dict[str, Any] | None) -> str | None:
    ref = "${" + ".".join(path) + "}"
    root = path[0]
    if root == "workflow":
        if len(path) < 2 or path[1] != "input":
            return f"{ref}: workflow values are read as ${{workflow.input.<name>}}"
        if inputs is not None and len(path) > 2 and path[2] not in inputs:
            return f"{ref}: '{path[2]}' is not one of the declared inputs"
        return None
    if root in BUILTIN_ROOTS or root in ancestors:
        return None
    return (f"{ref}: '{root}' is neither workflow, user, instance nor a circle this one"
            " depends on, so its value could not exist yet")


def _check_nested(c: dict[str, Any], ptr: str, ancestors: frozenset[str],
                  ctx: _Context) -> tuple[dict[str, Any], Flow] | None:
    """Inline nested flows are checked in place; named ones are resolved and analysed."""
    box = c.get("box")
    action = box.get("action") if isinstance(box, dict) else None
    if not isinstance(action, dict) or action.get("type") != "flow":
        return None
    circles = action.get("circles")
    if isinstance(circles, list) and circles:
        return _check_flow(circles, action.get("kind", "dag"), f"{ptr}/box/action", ctx,
                           ancestors)
    name = action.get("template")
    if not isinstance(name, str):
        return None
    where = f"{ptr}/box/action/template"
    if name in ctx.stack:
        chain = " → ".join(ctx.stack[ctx.stack.index(name):] + (name,))
        ctx.report.add("nesting_cycle", where, f"templates nest each other: {chain}")
        return None
    body = ctx.resolve(name)
    if body is None:
        ctx.report.add("unknown_template", where, f"no template named '{name}' is known")
        return None
    sub = analyze(body, ctx.resolve, ctx.stack)
    for err in sub.errors:
        code = err["code"] if err["code"] == "nesting_cycle" else "invalid_box"
        ctx.report.add(code, where, f"nested template '{name}' is invalid at"
                       f" {err['path'] or '/'}: {err['message']}")
    if sub.template is None:
        return None
    flow = sub.template.flow
    return sub.analysis or {}, Flow(flow.circles, flow.terminal, name=name)
