"""What the templates page shows, as plain data: the templates with their versions, an
upload's analysis errors, per-circle counts, and instances as links to their flow pages
(at a circle, or named by a migration); and the page's inputs parsed (an uploaded body, a
migration's map of renamed circles).

The page's states (`pages/templates_state.py`, `pages/migration_state.py`) read the
store and build these, in the reader's language: a template's own texts may be one
string or a map of language → text (`pick`), and the page's own messages here are
made with the state's `gettext` (`say`, English without one).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bpflow import languages
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.store import Store
from bpflow_app import routes
from bpflow_app.catalogs import N_, translate
from engine.errors import DefinitionError

# A message in the reader's language: `LangState.gettext` (English: `translate("en", ...)`).
Say = Callable[..., str]
ENGLISH: Say = partial(translate, languages.DEFAULT)


def in_every_language(text: Any, otherwise: str = "") -> dict[str, str]:
    """`languages.pick` of `text` for a reader of each of our languages (`otherwise` where
    it has none): the page shows the one of its language, and a change of language
    shows another at once."""
    return {code: languages.pick(text, code) or otherwise for code in languages.LANGUAGES}


@dataclass
class VersionLine:
    version: int
    locked: bool


@dataclass
class TemplateLine:
    name: str
    titles: dict[str, str]  # language -> the title its readers see (else the name)
    latest: int
    versions: list[VersionLine] = field(default_factory=list)
    retired: bool = False
    retirable: bool = True  # not the outer flow signing in starts


@dataclass
class DraftLine:
    """A draft of the designer (SPEC §16), as the templates page lists it."""
    id: int
    name: str  # the name its body gives ("" while it has none)
    author: str
    updated: str  # ISO


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


def proposed(versions: list[str]) -> tuple[str, str]:
    """The migration a panel proposes for a template's versions (oldest first): from the
    one before the last to the last ("" when there are none)."""
    to = versions[-1] if versions else ""
    return (versions[-2] if len(versions) > 1 else to), to


def parse_map(text: str, say: Say = ENGLISH) -> dict[str, str]:
    """A migration's map as typed: a JSON object, or one `old -> new` per line (`old = new`
    too); ValueError saying (in `say`'s language) what is wrong."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            found = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(say(N_("The map is not JSON: %(error)s at line %(line)s"),
                                 error=exc.msg, line=exc.lineno)) from None
        if not isinstance(found, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
            raise ValueError(say(N_('The map must name circle uris: {"old": "new"}')))
        return found
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        sep = "->" if "->" in line else "="
        old, _, new = line.partition(sep)
        if not _ or not old.strip() or not new.strip():
            raise ValueError(say(N_("Line %(line)s of the map is not “old -> new”: "
                                    "%(text)s"), line=number, text=line.strip()))
        out[old.strip()] = new.strip()
    return out


def template_lines(store: Store) -> list[TemplateLine]:
    """The templates of `store`'s tenant (an admin's own: `store_for(caller)`), with
    their titles in every language."""
    retired = store.retired_templates()
    out = []
    for name, versions in sorted(store.template_versions().items()):
        locked = store.locked_versions(name)
        _, t = store.template(name)
        out.append(TemplateLine(name, in_every_language(t.title, name), versions[-1],
                                [VersionLine(v, v in locked) for v in reversed(versions)],
                                name in retired, name != SIGNIN_TEMPLATE))
    return out


def parse_body(text: str, say: Say = ENGLISH) -> Any:
    """The uploaded JSON, or DefinitionError with one `json` error saying (in `say`'s
    language) where it broke."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        message = say(N_("Not JSON: %(error)s at line %(line)s, column %(column)s"),
                      error=exc.msg, line=exc.lineno, column=exc.colno)
        raise DefinitionError([{"code": "json", "path": "", "message": message}]) from None


def refused_link(refusal: dict[str, Any], rows: dict[str, dict[str, Any]],
                 say: Callable[[str], str] = str) -> InstanceLink:
    """An instance a migration refuses (`rows`: the instances' rows by id), with why
    (each reason as `say` says it: the reader's language)."""
    row = rows.get(refusal["id"], {})
    return InstanceLink(refusal["id"], routes.flow(refusal["id"]), row.get("version", 0),
                        row.get("status", ""),
                        reasons="; ".join(say(r) for r in refusal["reasons"]))
