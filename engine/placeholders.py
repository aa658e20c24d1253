"""`${...}` placeholders: finding them, and substituting them with type kept.

A string that is exactly one placeholder becomes the referenced value itself
(a number stays a number); any other string gets the values interpolated as
text. Containers are walked recursively, so a whole box can be rendered at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from engine.errors import VariableError
from engine.texts import Text

SEGMENT = r"(?:[A-Za-z_][A-Za-z0-9_-]*|\d+)"
PATH = rf"[A-Za-z_][A-Za-z0-9_-]*(?:\.{SEGMENT})*"
PLACEHOLDER = re.compile(r"\$\{(" + PATH + r")\}")
WHOLE = re.compile(r"\$\{(" + PATH + r")\}\Z")
# Anything that opens a placeholder; used to report malformed ones.
OPENING = re.compile(r"\$\{([^}]*)(\}?)")

Path = tuple[str, ...]
Resolver = Callable[[Path], Any]


def split(ref: str) -> Path:
    return tuple(ref.split("."))


def malformed(text: str) -> list[str]:
    """The `${...}` openings in `text` that are not well-formed placeholders."""
    bad = []
    for m in OPENING.finditer(text):
        if not m.group(2) or not re.fullmatch(PATH, m.group(1)):
            bad.append(m.group(0))
    return bad


def iter_strings(value: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside a JSON value with its JSON pointer (keys included)."""
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from iter_strings(v, f"{pointer}/{escape_pointer(str(k))}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from iter_strings(v, f"{pointer}/{i}")


def escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def references(text: str) -> list[Path]:
    return [split(m.group(1)) for m in PLACEHOLDER.finditer(text)]


def as_text(value: Any) -> str:
    """How a value reads when interpolated into a longer string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def substitute(value: Any, resolve: Resolver) -> Any:
    """Replace every placeholder in `value` (str, list or dict, recursively). A text in
    several languages (`Text`) stays one, each language's text substituted (as text)."""
    if isinstance(value, Text):
        return Text({lang: as_text(substitute(text, resolve))
                     for lang, text in value.translations.items()})
    if isinstance(value, str):
        whole = WHOLE.match(value)
        if whole:
            return resolve(split(whole.group(1)))
        if "${" not in value:
            return value
        return PLACEHOLDER.sub(lambda m: as_text(resolve(split(m.group(1)))), value)
    if isinstance(value, dict):
        return {k: substitute(v, resolve) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, resolve) for v in value]
    return value


def lookup(table: Any, path: Path, ref: str | None = None) -> Any:
    """Walk `path` into nested dicts/lists; a missing step is a VariableError."""
    current = table
    for i, seg in enumerate(path):
        if isinstance(current, dict) and seg in current:
            current = current[seg]
        elif isinstance(current, list) and seg.isdigit() and int(seg) < len(current):
            current = current[int(seg)]
        else:
            name = ref or ".".join(path)
            where = ".".join(path[: i + 1])
            raise VariableError(name, f"variable ${{{name}}} is not set ({where} does not exist)")
    return current
