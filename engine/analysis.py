"""Analysis of a template before it is accepted (SPEC §3, bounded as §13 asks).

Every problem is collected, each as `{"code", "path", "message"}` with a JSON pointer
into the template; the analysis reports, it never raises. It reads the raw JSON
defensively, so the checks still run (and report) on a body the schema already
rejected, but nothing is built unless every check passed.

Cost: the limits (`engine.limits`) are checked first by one cheap walk; then the schema,
then each flow in one pass over its circles and arrows: structure (`engine.graph`), the
circles' own checks, and the "reads only upstream circles" questions answered together
by one sweep (`graph.Ancestry`). A nested flow's questions that its own circles do not
answer go up to the enclosing flow, asked about the flow circle. A template nested by
name is analysed once per analysis, however often it is nested.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine import shape, texts
from engine.circles import BUILTIN_ROOTS, Question, check_circle, check_texts, form_kinds, unknown
from engine.errors import DefinitionError
from engine.graph import Ancestry, FlowGraph
from engine.layout import layout
from engine.limits import (
    DEFAULT_LIMITS,
    PAUSE_FROM,
    Deadline,
    Limits,
    TooLarge,
    collector_paused,
    measure,
)
from engine.messages import N_, message_of
from engine.model import Flow, Template, build_flow, linear_deps

TemplateResolver = Callable[[str], "dict[str, Any] | None"]
PASSED_ON = ("nesting_cycle", "too_large")  # codes a named nested template keeps
TITLE_LENGTH = 200  # characters of a title (in each language), as the schema says
PASSED_AT_MOST = 10  # errors of a named nested template repeated where it is nested
schema = shape.schema


@dataclass
class Report:
    errors: list[dict[str, Any]] = field(default_factory=list)
    # allowed, but worth a look (`missing_en`: a text in other languages only); they do
    # not make a template invalid
    warnings: list[dict[str, Any]] = field(default_factory=list)
    analysis: dict[str, Any] | None = None
    template: Template | None = None
    circles: int = 0  # circles of a valid template, nested flows expanded
    nesting: int = 0  # levels of nested flows below the top of a valid template

    @property
    def valid(self) -> bool:
        return not self.errors

    def add(self, code: str, path: str, message: str) -> None:
        self.errors.append({"code": code, "path": path, "message": message})

    def warn(self, code: str, path: str, message: str) -> None:
        self.warnings.append({"code": code, "path": path, "message": message})


@dataclass
class _Shared:
    """What every template of one analysis shares, nested ones included."""
    resolve: TemplateResolver
    limits: Limits
    deadline: Deadline
    named: dict[str, Report] = field(default_factory=dict)


@dataclass
class _Context:
    report: Report
    shared: _Shared
    stack: tuple[str, ...]  # names of templates being expanded, outermost first
    inputs: dict[str, Any] | None


@dataclass
class _Checked:
    """A flow that passed its checks: what building and the figures need."""
    analysis: dict[str, Any]
    flow: Flow
    circles: int
    nesting: int


def analyze(body: Any, resolve: TemplateResolver | None = None,
            _stack: tuple[str, ...] = (), *, limits: Limits = DEFAULT_LIMITS) -> Report:
    """Check `body`; on success the report carries the analysis and the Template."""
    shared = _Shared(resolve or (lambda _name: None), limits, Deadline(limits.seconds, limits.stop))
    circles = body.get("circles") if isinstance(body, dict) else None
    large = isinstance(circles, list) and len(circles) >= PAUSE_FROM
    try:
        with collector_paused() if large else nullcontext():
            return _analyze(body, shared, _stack)
    except TooLarge as exc:
        report = Report()
        report.add("too_large", exc.path, message_of(exc))
        return report


def load_template(body: Any, resolve: TemplateResolver | None = None) -> Template:
    """The Template of a valid body; raises DefinitionError with every problem."""
    report = analyze(body, resolve)
    if not report.valid:
        raise DefinitionError(report.errors)
    assert report.template is not None
    return report.template


def _analyze(body: Any, shared: _Shared, stack: tuple[str, ...]) -> Report:
    report = Report()
    if not isinstance(body, dict):
        report.add("schema", "", N_("a template must be a JSON object"))
        return report
    problems, _ = measure(body, shared.limits)
    for code, path, message in problems:
        report.add(code, path, message)
    if any(code == "too_large" for code, _, _ in problems):
        return report
    for pointer, message in shape.errors(body):
        report.add("schema", pointer, message)
    for key, what, length in (("title", N_("title"), TITLE_LENGTH),
                              ("description", N_("description"), None)):
        if key in body:
            check_texts([(f"/{key}", body[key], what, "schema")], "", report.add, report.warn,
                        max_length=length)
    name = body.get("name") if isinstance(body.get("name"), str) else None
    inputs = body.get("inputs") if isinstance(body.get("inputs"), dict) else None
    stop_at = _stop_at(body.get("stop_at"), report)
    ctx = _Context(report, shared, stack + ((name or "?"),), inputs)
    circles = body.get("circles")
    kind = body.get("kind", "dag")
    if isinstance(circles, list) and circles:
        checked, unanswered = _check_flow(circles, kind, "", ctx)
        unknown(unanswered, report.add)
        limits = shared.limits
        if checked is not None and checked.circles > limits.circles:
            report.add("too_large", "", N_(
                "with its nested flows expanded the template has %(count)s circles, more"
                " than %(most)s", count=format(checked.circles, ","),
                most=format(limits.circles, ",")))
        if checked is not None and checked.nesting > limits.nesting:
            report.add("too_large", "", N_(
                "with its nested templates expanded flows nest %(levels)s levels deep, more"
                " than %(most)s", levels=checked.nesting, most=limits.nesting))
        if report.valid and checked is not None:
            report.analysis = checked.analysis
            report.circles, report.nesting = checked.circles, checked.nesting
            report.template = Template(
                name=name or "", flow=checked.flow, body=body, analysis=checked.analysis,
                title=texts.make(body.get("title", "")),
                description=texts.make(body.get("description", "")),
                kind=kind, inputs=dict(inputs or {}), stop_at=stop_at)
    report.errors.sort(key=lambda e: (e["path"], e["code"]))
    report.warnings.sort(key=lambda e: (e["path"], e["code"]))
    return report


def _stop_at(value: Any, report: Report) -> datetime | None:
    """The template's `stop_at` as a time (SPEC §11): ISO 8601 with a time zone."""
    if not isinstance(value, str):
        return None  # absent (or not a string: the schema says so)
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        report.add("schema", "/stop_at", N_("stop_at: %(value)s is not an ISO 8601 time",
                                             value=repr(value)))
        return None
    if at.tzinfo is None:
        report.add("schema", "/stop_at", N_("stop_at: %(value)s has no time zone (add Z or an"
                                             " offset such as +01:00)", value=repr(value)))
        return None
    return at.astimezone(UTC)


def _check_flow(circles: list[Any], kind: Any, base: str,
                ctx: _Context) -> tuple[_Checked | None, list[Question]]:
    """Check one flow (top level or inline nested). Returns what was built when everything
    so far passed, and the references its circles could not answer (for the flow above)."""
    rep = ctx.report
    index: dict[str, int] = {}
    for i, c in enumerate(circles):
        uri = c.get("uri") if isinstance(c, dict) else None
        if not isinstance(uri, str):
            continue
        if uri in BUILTIN_ROOTS:
            rep.add("schema", f"{base}/circles/{i}/uri",
                    N_("uri '%(uri)s' is reserved: ${%(uri)s...} names the %(uri)s, not a circle",
                       uri=uri))
        if uri in index:
            rep.add("duplicate_uri", f"{base}/circles/{i}/uri",
                    N_("uri '%(uri)s' is already used by circle #%(index)s", uri=uri,
                       index=index[uri]))
        else:
            index[uri] = i
    good = [(i, c) for i, c in enumerate(circles)
            if isinstance(c, dict) and isinstance(c.get("uri"), str) and index[c["uri"]] == i]
    raw = [c for _, c in good]
    deps = _deps(good, kind, index, base, rep)
    graph = FlowGraph([c["uri"] for c in raw], deps)
    terminal = _check_shape(graph, good, base, rep) if good else None
    ancestry = Ancestry(graph)
    up: list[Question] = []
    nested: dict[str, _Checked] = {}
    forms = form_kinds(c for _, c in good)
    for v, (i, c) in enumerate(good):
        ctx.shared.deadline.check()
        ptr = f"{base}/circles/{i}"
        questions = check_circle(c, ptr, rep.add, ctx.inputs, forms, rep.warn)
        sub = _check_nested(c, ptr, ctx)
        if sub is not None:
            checked, inner = sub
            questions += inner
            if checked is not None:
                nested[c["uri"]] = checked
        for root, payload in questions:
            if root in graph.index:
                ancestry.ask(graph.index[root], v, payload)
            else:
                up.append((root, payload))
    up += [(payload[2][0], payload) for ok, payload in ancestry.answer(ctx.shared.deadline.check)
           if not ok]
    if rep.errors or terminal is None or (up and not base):  # at the top, `up` are errors
        return None, up
    analysis = layout(graph, terminal)
    analysis["edges"] = _edges(raw, kind)
    if nested:
        analysis["nested"] = {uri: n.analysis for uri, n in nested.items()}
    flow = build_flow(raw, kind if kind in ("dag", "linear") else "dag", graph.uris[terminal],
                      {uri: n.flow for uri, n in nested.items()})
    return _Checked(analysis, flow, len(raw) + sum(n.circles for n in nested.values()),
                    max((n.nesting + 1 for n in nested.values()), default=0)), up


def _deps(good: list[tuple[int, dict[str, Any]]], kind: Any, index: dict[str, int],
          base: str, rep: Report) -> list[list[str]]:
    """Each good circle's dependencies (groups flattened, known circles only)."""
    found: list[list[str]] = []
    if kind == "linear":
        for i, c in good:
            if "deps" in c:
                rep.add("schema", f"{base}/circles/{i}/deps",
                        N_("a linear flow takes no deps: each circle depends on the one before"
                           " it"))
        found = [[d for g in groups for d in g] for groups in linear_deps([c for _, c in good])]
    else:
        for i, c in good:
            groups = c.get("deps", [])
            if type(groups) is list and all(type(g) is list for g in groups):
                mine = [d for group in groups for d in group]  # the common case: all known
                if all(type(d) is str and d in index for d in mine):
                    found.append(mine)
                    continue
            found.append(mine := [])
            for g, group in enumerate(groups if isinstance(groups, list) else []):
                for k, dep in enumerate(group if isinstance(group, list) else []):
                    if not isinstance(dep, str):
                        continue
                    if dep in index:
                        mine.append(dep)
                    else:
                        rep.add("unknown_dependency", f"{base}/circles/{i}/deps/{g}/{k}",
                                N_("circle '%(uri)s' depends on '%(dep)s', which is not a circle of"
                                   " this flow", uri=c["uri"], dep=dep))
    for i, c in good:
        weak = c.get("weak")
        for k, dep in enumerate(weak if isinstance(weak, list) else []):
            if isinstance(dep, str) and dep not in index:
                rep.add("unknown_dependency", f"{base}/circles/{i}/weak/{k}",
                        N_("circle '%(uri)s' has a weak dependency on '%(dep)s', which is not a"
                           " circle of this flow", uri=c["uri"], dep=dep))
    return found


def _edges(circles: list[dict[str, Any]], kind: Any) -> list[dict[str, Any]]:
    """Arrows for drawing; members of one OR-group share `group` and have `or` set."""
    deps = linear_deps(circles) if kind == "linear" else [c.get("deps", []) for c in circles]
    return [{"from": dep, "to": c["uri"], "group": g, "or": len(group) > 1}
            for c, groups in zip(circles, deps, strict=True)
            for g, group in enumerate(groups) for dep in group]


def _check_shape(graph: FlowGraph, good: list[tuple[int, dict[str, Any]]], base: str,
                 rep: Report) -> int | None:
    """Cycles, the unique terminal and reachability; returns the terminal when unique."""
    where = [i for i, _ in good]
    for first, names in graph.cycles():
        rep.add("cycle", f"{base}/circles/{where[first]}/deps",
                N_("cycle: %(circles)s (arrows must never lead back to a circle)",
                   circles=" → ".join(names)))
    sinks = graph.sinks()
    if not sinks:
        rep.add("no_terminal", f"{base}/circles",
                N_("no circle ends the flow: every circle has an arrow out of it"))
        return None
    if len(sinks) > 1:
        shown = ", ".join(graph.uris[v] for v in sinks[:20])
        if len(sinks) > 20:
            shown = N_("%(shown)s and %(more)s more", shown=shown, more=len(sinks) - 20)
        rep.add("multiple_terminals", f"{base}/circles",
                N_("a flow ends in exactly one circle, but %(count)s circles have no arrow out"
                   " of them: %(circles)s", count=len(sinks), circles=shown))
        return None
    terminal = sinks[0]
    reach = graph.upstream(terminal)
    for v in range(len(graph.uris)):
        if v not in reach:
            rep.add("unreachable", f"{base}/circles/{where[v]}",
                    N_("circle '%(uri)s' cannot reach the terminal '%(terminal)s'",
                       uri=graph.uris[v], terminal=graph.uris[terminal]))
    return terminal


def _check_nested(c: dict[str, Any], ptr: str,
                  ctx: _Context) -> tuple[_Checked | None, list[Question]] | None:
    """Inline nested flows are checked in place; named ones are resolved and analysed."""
    box = c.get("box")
    action = box.get("action") if isinstance(box, dict) else None
    if not isinstance(action, dict) or action.get("type") != "flow":
        return None
    circles = action.get("circles")
    if isinstance(circles, list) and circles:
        return _check_flow(circles, action.get("kind", "dag"), f"{ptr}/box/action", ctx)
    name = action.get("template")
    if not isinstance(name, str):
        return None
    return _named(name, f"{ptr}/box/action/template", ctx), []


def _named(name: str, where: str, ctx: _Context) -> _Checked | None:
    rep = ctx.report
    if name in ctx.stack:
        chain = " → ".join(ctx.stack[ctx.stack.index(name):] + (name,))
        rep.add("nesting_cycle", where, N_("templates nest each other: %(chain)s",
                                             chain=chain))
        return None
    shared = ctx.shared
    sub = shared.named.get(name)
    if sub is None:
        if len(ctx.stack) > shared.limits.nesting:
            rep.add("too_large", where, N_("templates nest each other more than %(most)s levels"
                                             " deep", most=shared.limits.nesting))
            return None
        body = shared.resolve(name)
        if body is None:
            rep.add("unknown_template", where, N_("no template named '%(name)s' is known",
                                                    name=name))
            return None
        sub = shared.named[name] = _analyze(body, shared, ctx.stack)
    for err in sub.errors[:PASSED_AT_MOST]:  # at most: nested twice at each level, a
        code = err["code"] if err["code"] in PASSED_ON else "invalid_box"  # count doubles
        rep.add(code, where, N_("nested template '%(name)s' is invalid at %(path)s: %(problem)s",
                                 name=name, path=err["path"] or "/", problem=err["message"]))
    if len(sub.errors) > PASSED_AT_MOST:
        rest = sub.errors[PASSED_AT_MOST:]
        code = rest[0]["code"] if rest[0]["code"] in PASSED_ON else "invalid_box"
        rep.add(code, where, N_("nested template '%(name)s' has %(count)s more errors",
                                 name=name, count=len(rest)))
    if sub.template is None:
        return None
    flow = sub.template.flow
    return _Checked(sub.analysis or {}, Flow(flow.circles, flow.terminal, name=name),
                    sub.circles, sub.nesting)
