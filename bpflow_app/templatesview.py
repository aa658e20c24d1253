"""What the templates page shows, as plain data: the templates with their versions, an
upload's analysis errors, per-circle counts, and instances as links to their flow pages
(at a circle, or named by a migration); and the page's inputs parsed (an uploaded body, a
migration's map of renamed circles).

The page's states (`pages/templates_state.py`, `pages/migration_state.py`) read the
store and build these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.store import Store
from bpflow_app import routes
from engine.errors import DefinitionError


@dataclass
class VersionLine:
    version: int
    locked: bool


@dataclass
class TemplateLine:
    name: str
    title: str
    latest: int
    versions: list[VersionLine] = field(default_factory=list)
    retired: bool = False
    retirable: bool = True  # not the outer flow signing in starts


@dataclass
class ErrorLine:
    code: str
    path: str
    message: str


@dataclass
class StatLine:
    circle: str
    waiting: int = 0
    success: int = 0
    failure: int = 0
    skipped: int = 0


@dataclass
class InstanceLink:
    """An instance in a list, with the path of its flow page."""

    id: str
    href: str
    version: int = 0
    status: str = ""
    user: str = ""
    reasons: str = ""  # why a migration refuses it


def link(row: dict[str, Any]) -> InstanceLink:
    return InstanceLink(row["id"], routes.flow(row["id"]), row["version"], row["status"],
                        (row.get("user") or {}).get("username") or "")


def parse_map(text: str) -> dict[str, str]:
    """A migration's map as typed: a JSON object, or one `old -> new` per line (`old = new`
    too); ValueError saying what is wrong."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            found = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the map is not JSON: {exc.msg} at line {exc.lineno}") from None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
            raise ValueError("the map must name circle uris: {\"old\": \"new\"}")
        return found
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        sep = "->" if "->" in line else "="
        old, _, new = line.partition(sep)
        if not _ or not old.strip() or not new.strip():
            raise ValueError(f"line {number} of the map is not 'old -> new': {line.strip()!r}")
        out[old.strip()] = new.strip()
    return out


def template_lines(store: Store) -> list[TemplateLine]:
    """The templates of `store`'s tenant (an admin's own: `store_for(caller)`)."""
    retired = store.retired_templates()
    out = []
    for name, versions in sorted(store.template_versions().items()):
        locked = store.locked_versions(name)
        _, t = store.template(name)
        out.append(TemplateLine(name, t.title or name, versions[-1],
                                [VersionLine(v, v in locked) for v in reversed(versions)],
                                name in retired, name != SIGNIN_TEMPLATE))
    return out


def parse_body(text: str) -> Any:
    """The uploaded JSON, or DefinitionError with one `json` error saying where it broke."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DefinitionError([{"code": "json", "path": "",
                                "message": f"not JSON: {exc.msg} at line {exc.lineno} "
                                           f"column {exc.colno}"}]) from None


def refused_link(refusal: dict[str, Any], rows: dict[str, dict[str, Any]]) -> InstanceLink:
    """An instance a migration refuses (`rows`: the instances' rows by id), with why."""
    row = rows.get(refusal["id"], {})
    return InstanceLink(refusal["id"], routes.flow(refusal["id"]), row.get("version", 0),
                        row.get("status", ""), reasons="; ".join(refusal["reasons"]))
