"""The JSON Schema check of a template, fast on the common path.

`conforms` is a hand-written reading of `schema/template.schema.json` that answers only
yes or no, about twenty times faster than the general validator; when it says no, the
general validator (`jsonschema`) runs to describe every violation with its pointer, so
the messages stay the validator's own.

Patterns are read as JSON Schema means them (ECMA-262): `$` ends the text. Python's `$`
also matches before a final newline, which would let `"reimbursement\\n"` through, so the
validator gets a `pattern` keyword that anchors with `\\Z`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, ValidationError, validators

from engine.messages import N_, Text

NAME = re.compile(r"[a-z0-9_-]+\Z")
URI = re.compile(r"[a-z][a-z0-9_-]*\Z")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KINDS = ("dag", "linear")
INPUT_TYPES = ("string", "text", "number", "integer", "boolean", "date", "email", "object",
               "array", "any")
ROLE = re.compile(r"[a-z][a-z0-9_-]{0,39}\Z")  # a role name, as `starters` lists them
MAX_STARTERS = 100
TOP_KEYS = {"name", "title", "description", "kind", "inputs", "starters", "stop_at", "circles"}
CIRCLE_KEYS = {"uri", "description", "deps", "weak", "when", "box", "retry", "timeout", "assign",
               "due", "enter", "leave", "cc", "remind", "ui"}
BOX_KEYS = {"form", "confirm", "action"}


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of the DSL, shipped in the package."""
    text = resources.files("engine").joinpath("schema/template.schema.json").read_text()
    return json.loads(text)


@lru_cache(maxsize=64)
def _anchored(pattern: str) -> re.Pattern[str]:
    """`pattern` with a final `$` meaning the end of the text, as in ECMA-262."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, _schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _anchored(pattern).search(instance):
        yield ValidationError(N_("%(value)s does not match %(pattern)s", value=repr(instance),
                                 pattern=repr(pattern)))


_Validator = validators.extend(Draft202012Validator, {"pattern": _pattern})


@cache
def validator() -> jsonschema.protocols.Validator:
    return _Validator(schema())


def errors(body: Any) -> list[tuple[str, str]]:
    """Every schema violation as (JSON pointer, message); none when `conforms(body)`."""
    if conforms(body):
        return []
    found = []
    for err in validator().iter_errors(body):
        pointer = "".join(f"/{_escape(str(p))}" for p in err.absolute_path)
        where = ".".join(str(p) for p in err.absolute_path) or N_("template")
        found.append((pointer, clip(N_("%(where)s: %(problem)s", where=where,
                                       problem=_problem(err)))))
    return found


EXTRAS = re.compile(r"Additional properties are not allowed \((.*) (was|were) unexpected\)\Z",
                    re.S)


def _problem(err: ValidationError) -> str:
    """The validator's message, marked for the catalogs where it is one of the few the
    template's schema gives (made again here, and used only if it reads the same)."""
    if isinstance(err.message, Text):
        return err.message
    kind, value, rule = err.validator, err.instance, err.validator_value
    made: list[str] = []
    if kind == "required" and isinstance(value, dict):
        made = [N_("%(name)s is a required property", name=repr(p)) for p in rule
                if p not in value]
    elif kind == "type":
        types = rule if isinstance(rule, list) else [rule]
        made = [N_("%(value)s is not of type %(types)s", value=repr(value),
                   types=", ".join(repr(t) for t in types))]
    elif kind == "additionalProperties" and (m := EXTRAS.match(err.message)):
        made = [N_("Additional properties are not allowed (%(names)s was unexpected)",
                   names=m.group(1)) if m.group(2) == "was" else
                N_("Additional properties are not allowed (%(names)s were unexpected)",
                   names=m.group(1))]
    elif kind == "enum":
        made = [N_("%(value)s is not one of %(allowed)s", value=repr(value),
                   allowed=repr(rule))]
    elif kind in ("minItems", "minLength"):
        made = [N_("%(value)s should be non-empty", value=repr(value)) if rule == 1 else
                N_("%(value)s is too short", value=repr(value))]
    elif kind in ("maxItems", "maxLength"):
        made = [N_("%(value)s is too long", value=repr(value))]
    elif kind in ("anyOf", "oneOf"):
        made = [N_("%(value)s is not valid under any of the given schemas", value=repr(value))]
    return next((m for m in made if m == err.message), err.message)


def clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _string(value: Any, max_length: int | None = None) -> bool:
    return type(value) is str and (max_length is None or len(value) <= max_length)


def _text(value: Any, max_length: int | None = None) -> bool:
    """A text for people: a string, or a map of language to text (whose codes and
    values the analysis checks)."""
    return type(value) is dict or _string(value, max_length)


def _strings(value: Any) -> bool:
    return type(value) is list and all(type(v) is str for v in value)


def _roles(value: Any) -> bool:
    return _strings(value) and len(value) <= MAX_STARTERS and all(ROLE.match(r) for r in value)


def conforms(body: Any) -> bool:
    """True when `body` satisfies the template schema (never raises)."""
    if type(body) is not dict or "name" not in body or "circles" not in body:
        return False
    if not TOP_KEYS.issuperset(body):
        return False
    name = body["name"]
    if not _string(name, 100) or not NAME.match(name):
        return False
    if "title" in body and not _text(body["title"], 200):
        return False
    if "description" in body and not _text(body["description"]):
        return False
    if "kind" in body and body["kind"] not in KINDS:
        return False
    if "starters" in body and not _roles(body["starters"]):
        return False
    if "stop_at" in body and not _string(body["stop_at"], 64):
        return False
    inputs = body.get("inputs", {})
    if type(inputs) is not dict or not all(
            type(k) is str and IDENTIFIER.match(k) and type(v) is str and v in INPUT_TYPES
            for k, v in inputs.items()):
        return False
    return _circles(body["circles"])


def _circles(circles: Any) -> bool:
    todo = [circles]  # inline nested flows, walked without recursion
    while todo:
        circles = todo.pop()
        if type(circles) is not list or not circles:
            return False
        for c in circles:
            if type(c) is not dict or "uri" not in c or not CIRCLE_KEYS.issuperset(c):
                return False
            uri = c["uri"]
            if not _string(uri, 100) or not URI.match(uri):
                return False
            if "description" in c and not _text(c["description"]):
                return False
            if "deps" in c:
                deps = c["deps"]
                if type(deps) is not list or not all(_strings(g) and g for g in deps):
                    return False
            if "weak" in c and not _strings(c["weak"]):
                return False
            if "when" in c and not _string(c["when"]):
                return False
            if "retry" in c and type(c["retry"]) not in (list, dict):
                return False
            if "timeout" in c and type(c["timeout"]) is not dict:
                return False
            if any(k in c and type(c[k]) is not dict for k in ("cc", "remind")):
                return False
            if "assign" in c and type(c["assign"]) is not dict:
                return False
            if "due" in c and type(c["due"]) not in (int, float):
                return False
            if "ui" in c and not _position(c["ui"]):
                return False
            if "box" in c and not _box(c["box"], todo):
                return False
    return True


def _position(ui: Any) -> bool:
    """A circle's place on the designer's canvas: `{"x": number, "y": number}`."""
    return type(ui) is dict and set(ui) == {"x", "y"} and all(
        type(v) in (int, float) and math.isfinite(v) for v in ui.values())


def _quorum(quorum: Any) -> bool:
    if type(quorum) is str:
        return quorum in ("all", "any", "sequence")
    if type(quorum) is int:
        return quorum >= 1
    if type(quorum) is dict and set(quorum) == {"ratio"}:
        ratio = quorum["ratio"]
        return type(ratio) in (int, float) and 0 < ratio <= 1
    return False


def _box(box: Any, todo: list[Any]) -> bool:
    if type(box) is not dict or not BOX_KEYS.issuperset(box):
        return False
    if "form" in box:
        form = box["form"]
        if type(form) is not list or not all(type(f) is dict for f in form):
            return False
    if "confirm" in box and not _text(box["confirm"]):
        return False
    if "action" not in box:
        return True
    action = box["action"]
    if type(action) is not dict or type(action.get("type")) is not str:
        return False
    if action["type"] == "approval":
        return "quorum" not in action or _quorum(action["quorum"])
    if action["type"] != "flow":
        return True
    if "template" in action and not _string(action["template"]):
        return False
    if "kind" in action and action["kind"] not in KINDS:
        return False
    if "circles" in action:
        todo.append(action["circles"])
    return True
