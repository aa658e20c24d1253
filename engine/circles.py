"""The checks of one circle: retry, timeout, box, and the references it makes.

References to `workflow`, `user` and `instance` are checked here; a reference to a
circle becomes a question ("is it upstream of this circle?") that the flow answers for
all its circles at once (`engine.graph.Ancestry`), passing on to the enclosing flow the
ones its own circles do not answer. Strings are walked without recursion, and a nested
flow's circles are left to the nested flow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from engine import boxes, texts
from engine.definition import (
    Invalid,
    normalize_assign,
    normalize_cc,
    normalize_due,
    normalize_remind,
    normalize_retry,
    normalize_timeout,
)
from engine.errors import ExpressionError
from engine.expression_ops import BOOL, LIST, NUMBER, OBJECT, STRING
from engine.expressions import TypeOf, compile_expression
from engine.messages import N_, message_of
from engine.placeholders import OPENING, PATH, escape_pointer, references

BUILTIN_ROOTS = ("workflow", "user", "instance")
WHOLE_PATH = re.compile(PATH + r"\Z")
Add = Callable[[str, str, str], None]  # (code, path, message)
# A question about a reference: (root uri, (where, circle uri, path)).
Question = tuple[str, tuple[str, str, tuple[str, ...]]]
Forms = dict[str, dict[str, str]]  # circle uri -> form field -> its value's kind
# The kinds of the values a field (`forms.validate`) or a declared input holds; a select
# holds whatever its options are, `any` anything.
FIELD_KINDS = {**dict.fromkeys(("string", "text", "email", "date", "password", "user"), STRING),
               "number": NUMBER, "integer": NUMBER, "boolean": BOOL}
INPUT_KINDS = {**dict.fromkeys(("string", "text", "email", "date"), STRING),
               "number": NUMBER, "integer": NUMBER, "boolean": BOOL, "object": OBJECT,
               "array": LIST}


def check_circle(c: dict[str, Any], ptr: str, add: Add, inputs: dict[str, Any] | None,
                 forms: Forms | None = None, warn: Add | None = None) -> list[Question]:
    """The circle's own checks; returns the references to circles, to be answered. `forms`
    (`form_kinds` of its flow) and `inputs` tell the kinds of the values its expressions
    read, so a comparison that could never work is refused here. `warn` hears of what
    is allowed but worth a look (a text without English)."""
    uri = c["uri"]
    check_texts(_texts(c), ptr, add, warn, uri)
    typeof = _typeof(inputs, forms or {})
    for key, normalize, code in (("retry", normalize_retry, "invalid_retry"),
                                 ("timeout", normalize_timeout, "invalid_timeout"),
                                 ("due", normalize_due, "invalid_timeout"),
                                 ("assign", normalize_assign, "invalid_box"),
                                 ("cc", normalize_cc, "invalid_box"),
                                 ("remind", normalize_remind, "invalid_timeout")):
        if key in c:
            try:
                normalize(c[key])
            except Invalid as exc:
                add(code, f"{ptr}/{key}", _in(uri, message_of(exc)))
    refs: list[tuple[str, tuple[str, ...]]] = _people_refs(c, ptr, add)
    when = c.get("when")
    if isinstance(when, str):
        refs += _expression_refs(when, f"{ptr}/when", add, uri, typeof)
    box = c.get("box")
    fields: set[Any] = set()
    if isinstance(box, dict):
        for where, message in boxes.check_box(box):
            add("invalid_box", f"{ptr}/box{where}", _in(uri, message))
        raw = box.get("action")
        action: dict[str, Any] = raw if isinstance(raw, dict) else {}
        outputs = action.get("outputs") if action.get("type") == "compute" else None
        for name, expr in (outputs.items() if isinstance(outputs, dict) else []):
            if isinstance(expr, str):
                refs += _expression_refs(expr, f"{ptr}/box/action/outputs/{escape_pointer(name)}",
                                         add, uri, typeof)
        for where, text in _placeholder_texts(box, f"{ptr}/box", outputs is not None):
            bad, paths = _scan(text)
            for opening in bad:
                add("invalid_expression", where,
                    _in(uri, N_("malformed placeholder '%(opening)s'", opening=opening)))
            refs += [(where, path) for path in paths]
        form = box.get("form")
        if isinstance(form, list):
            fields = {f.get("name") if isinstance(f.get("name"), str) else None
                      for f in form if isinstance(f, dict)}
    questions: list[Question] = []
    for where, path in refs:
        if path[0] == "form" and fields and where.startswith(f"{ptr}/box/action"):
            if len(path) > 1 and path[1] not in fields:
                add("unknown_variable", where, _in(uri, N_(
                    "${form.%(field)s} names no field of this circle's form", field=path[1])))
            continue  # the action layer reads the form it sits under
        problem = _builtin_problem(path, inputs)
        if problem:
            add("unknown_variable", where, _in(uri, problem))
        elif path[0] not in BUILTIN_ROOTS:
            questions.append((path[0], (where, uri, path)))
    return questions


# the texts whose type (a string or an object) the JSON Schema checks
SCHEMA_TYPED = ("/title", "/description", "/box/confirm")
Spot = tuple[str, Any, str, str]  # (pointer, value, what it is, error code)


def _texts(c: dict[str, Any]) -> list[Spot]:
    """The circle's texts for people (SPEC §17), pointers below the circle."""
    spots = [("/description", c["description"], N_("description"), "schema")] \
        if "description" in c else []
    box = c.get("box")
    if isinstance(box, dict):
        spots += [(f"/box{where}", value, what, "invalid_box")
                  for where, value, what in boxes.texts(box)]
    return spots


def check_texts(spots: list[Spot], ptr: str, add: Add, warn: Add | None, uri: str | None = None,
                max_length: int | None = None) -> None:
    """Each text a string, or a map of our languages to strings (`engine.texts`); a map
    without English is a warning. A string's length, where the schema limits it, is the
    schema's to check. `uri`: the circle whose texts they are (its messages name it)."""
    for where, value, what, code in spots:
        if where in SCHEMA_TYPED and not isinstance(value, dict):
            continue  # a string, or the schema's error
        for below, message in texts.problems(value, what, max_length):
            add(code, f"{ptr}{where}{below}", message if uri is None else _in(uri, message))
        if warn is not None and texts.lacks_default(value):
            given = ", ".join(str(k) for k in value)
            message = N_("%(what)s has no %(default)s text (%(given)s only): readers of other"
                         " languages get the first one given", what=what,
                         default=texts.DEFAULT, given=given)
            warn("missing_en", f"{ptr}{where}", message if uri is None else _in(uri, message))


def _people_refs(c: dict[str, Any], ptr: str, add: Add) -> list[tuple[str, tuple[str, ...]]]:
    """The placeholders of `assign` users, of an escalation's `to` users and of `cc`
    users; `assign` or `due` on a circle no person acts on is an `invalid_box`, `remind`
    on a circle that waits for nobody an `invalid_timeout`."""
    uri, refs = c["uri"], []
    box = _object(c.get("box"))
    action = _object(box.get("action"))
    person = bool(box.get("form") or "confirm" in box) and action.get("type") != "auth"
    for key in ("assign", "due"):
        if key in c and not person:
            add("invalid_box", f"{ptr}/{key}", _in(uri, N_(
                "%(key)s applies to a circle a person acts on (a form or a confirmation); an"
                " approval names its approvers in 'to'", key=key)))
    if "remind" in c and not person and action.get("type") != "approval":
        add("invalid_timeout", f"{ptr}/remind", _in(uri, N_(
            "remind applies to a circle that waits for people (a form, a confirmation or an"
            " approval)")))
    if "before_due" in _object(c.get("remind")) and "due" not in c:
        add("invalid_timeout", f"{ptr}/remind/before_due", _in(uri, N_(
            "remind before_due needs the circle's 'due'")))
    timeout = _object(c.get("timeout"))
    if timeout.get("policy") == "escalate" and not person:
        add("invalid_timeout", f"{ptr}/timeout/policy", _in(uri, N_(
            "only a circle a person acts on can escalate")))
    for base, spec in ((f"{ptr}/assign", c.get("assign")),
                       (f"{ptr}/timeout/to", timeout.get("to")), (f"{ptr}/cc", c.get("cc"))):
        users = spec.get("users") if isinstance(spec, dict) else None
        for i, text in enumerate(users if isinstance(users, list) else []):
            if isinstance(text, str) and "${" in text:
                bad, paths = _scan(text)
                for opening in bad:
                    add("invalid_expression", f"{base}/users/{i}",
                        _in(uri, N_("malformed placeholder '%(opening)s'", opening=opening)))
                refs += [(f"{base}/users/{i}", path) for path in paths]
    return refs


def _object(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (the raw JSON is read
    defensively: the schema may have rejected it already)."""
    return value if isinstance(value, dict) else {}


def _placeholder_texts(box: dict[str, Any], pointer: str,
                       skip_outputs: bool) -> Iterator[tuple[str, str]]:
    """(pointer, text) of each string in the box that opens a placeholder, without
    recursion; the nested flow's circles and compute outputs are checked elsewhere."""
    stack: list[tuple[Any, Any]] = [(box, None)]
    while stack:
        value, link = stack.pop()
        in_action = link == (None, "action")
        for k, v in value.items() if type(value) is dict else enumerate(value):
            if in_action and (k == "circles" or (k == "outputs" and skip_outputs
                                                  and not isinstance(v, str))):
                continue  # checked as a nested flow, or as expressions
            if isinstance(v, str):
                if "${" in v:
                    yield _pointer(pointer, (link, str(k))), v
            elif isinstance(v, (dict, list)):
                stack.append((v, (link, str(k))))


def _scan(text: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """The malformed placeholder openings of `text` and its references, in one pass when
    there is nothing malformed (then every opening is a placeholder)."""
    bad, paths = [], []
    for m in OPENING.finditer(text):
        inner, close = m.groups()
        if close and WHOLE_PATH.match(inner):
            paths.append(tuple(inner.split(".")))
        else:
            bad.append(m.group(0))
    return (bad, references(text)) if bad else ([], paths)


def _pointer(base: str, link: Any) -> str:
    keys = []
    while link is not None:
        link, key = link
        keys.append(escape_pointer(key))
    return base + "".join(f"/{k}" for k in reversed(keys))


def _expression_refs(source: str, where: str, add: Add, uri: str,
                     typeof: TypeOf) -> list[tuple[str, tuple[str, ...]]]:
    try:
        expression = compile_expression(source)
        for problem in expression.type_problems(typeof):
            add("invalid_expression", where, _in(uri, problem))
        return [(where, path) for path in expression.references]
    except ExpressionError as exc:
        add("invalid_expression", where, _in(uri, message_of(exc)))
    except RecursionError:
        add("invalid_expression", where, _in(uri, N_("the expression is nested too deeply")))
    return []


def _in(uri: str, problem: str) -> str:
    """A problem of a circle, named by its uri."""
    return N_("circle '%(uri)s': %(problem)s", uri=uri, problem=problem)


def form_kinds(circles: Iterable[dict[str, Any]]) -> Forms:
    """The kind of each form field of the circles whose result is their form (a form and
    no action), by circle uri: what `${uri.field}` holds, as the form layer stores it."""
    out: Forms = {}
    for c in circles:
        box = _object(c.get("box"))
        form = box.get("form")
        if isinstance(form, list) and "action" not in box and isinstance(c.get("uri"), str):
            out[c["uri"]] = {f["name"]: FIELD_KINDS[kind] for f in form
                             if isinstance(f, dict) and isinstance(f.get("name"), str)
                             and isinstance(kind := f.get("type", "string"), str)
                             and kind in FIELD_KINDS}
    return out


def _typeof(inputs: dict[str, Any] | None, forms: Forms) -> TypeOf:
    """What the analysis knows of a `${...}`'s kind: a declared input's type, or a form
    field of a circle of the same flow (a deeper path, or anything else: nothing)."""
    def typeof(path: tuple[str, ...]) -> str | None:
        if len(path) == 3 and path[:2] == ("workflow", "input") and inputs:
            declared = inputs.get(path[2])
            return INPUT_KINDS.get(declared) if isinstance(declared, str) else None
        if len(path) == 2 and path[0] not in BUILTIN_ROOTS:
            return forms.get(path[0], {}).get(path[1])
        return None
    return typeof


def _builtin_problem(path: tuple[str, ...], inputs: dict[str, Any] | None) -> str | None:
    if path[0] != "workflow":
        return None
    ref = "${" + ".".join(path) + "}"
    if len(path) < 2 or path[1] != "input":
        return N_("%(ref)s: workflow values are read as ${workflow.input.<name>}", ref=ref)
    if inputs is not None and len(path) > 2 and path[2] not in inputs:
        return N_("%(ref)s: '%(name)s' is not one of the declared inputs", ref=ref,
                  name=path[2])
    return None


def unknown(questions: list[Question], add: Add) -> None:
    """References no enclosing flow answered: values that could not exist yet."""
    for root, (where, uri, path) in questions:
        ref = "${" + ".".join(path) + "}"
        add("unknown_variable", where, _in(uri, N_(
            "%(ref)s: '%(root)s' is neither workflow, user, instance nor a circle this one"
            " depends on, so its value could not exist yet", ref=ref, root=root)))
