"""Drafts (SPEC §16): templates being designed in the browser, kept across reloads and
sign-outs until they are published or deleted.

The one home of a draft's rules for the REST API (`/api/drafts`) and the web app's
designer alike. Who may is `bpflow.access`'s (`may_design`, `may_see_draft`,
`draft_changeable`): admins and users of the role `designer`, each draft its author's,
the tenant's admins seeing them all; someone else's draft is not found. A draft holds any
JSON object (unfinished work), within `MAX_DRAFT_BYTES` and `bpflow.limits`; an author
keeps at most `MAX_DRAFTS`. Its problems are the analysis' (`problems`), what publishing
it changes is `engine.changes`' against the latest version (`changes`), and publishing
goes through `Store.put_template`, the path of `POST /api/templates`: analysed, no new
version when only positions moved (they become the template's layout), never a change
to a stored version; the draft is then deleted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from bpflow import access, limits
from bpflow.access import Caller
from bpflow.errors import Conflict, NotFound, Refused
from bpflow.store import Store
from engine.analysis import analyze
from engine.changes import Changes, with_positions
from engine.changes import changes as compare
from engine.messages import N_

log = logging.getLogger("bpflow.drafts")
MAX_DRAFTS = 50  # drafts one author keeps at once
MAX_DRAFT_BYTES = limits.MAX_BODY  # a draft's body as compact JSON
NAME_MAX = 100  # characters of the name a draft is listed by (a template's longest)


@dataclass(frozen=True)
class Draft:
    """A draft: `name` is its body's (`""` while it has none); times in seconds since the
    epoch. In a list (`list_drafts`) `body` is empty: `open_draft` reads it."""

    id: int
    tenant: str
    author: str
    name: str
    body: dict[str, Any]
    created: float
    updated: float


@dataclass(frozen=True)
class Problem:
    """One finding of the analysis: a JSON pointer into the body, the code (SPEC §3), the
    message, and whether it is only a warning (which does not stop publishing)."""

    pointer: str
    code: str
    message: str
    warning: bool = False


def list_drafts(store: Store, caller: Caller) -> list[Draft]:
    """The caller's drafts (an admin's: every author's of the tenant), the latest changed
    first, without their bodies."""
    return [_draft(row) for row in store.drafts(access.drafts_scope(caller))]


def open_draft(store: Store, caller: Caller, draft_id: int) -> Draft:
    """A draft the caller may see (NotFound otherwise, whether or not it exists)."""
    return _draft(_row(store, caller, draft_id))


def create_draft(store: Store, caller: Caller, body: dict[str, Any]) -> Draft:
    """A new draft of the caller holding `body`. Forbidden unless a designer or an admin;
    Refused for a body that is not an object or breaks the limits; Conflict once the
    caller keeps `MAX_DRAFTS`."""
    access.require_designer(caller)
    _check(body)
    if store.count_drafts(caller.id) >= MAX_DRAFTS:
        raise Conflict(N_("you keep %(n)s drafts already, the most there may be: publish or"
                          " delete one first", n=MAX_DRAFTS))
    draft_id = store.add_draft(caller.id, _name(body), body)
    log.info("draft %s (%s) created by %s", draft_id, _name(body) or "-", caller.username)
    return open_draft(store, caller, draft_id)


def save_draft(store: Store, caller: Caller, draft_id: int, body: dict[str, Any]) -> Draft:
    """Replace the body of one of the caller's drafts."""
    row = _row(store, caller, draft_id)
    access.draft_changeable(caller, row["author_id"])
    _check(body)
    if not store.save_draft(draft_id, _name(body), body):
        raise NotFound(N_("no draft %(id)s", id=draft_id))  # deleted meanwhile
    return open_draft(store, caller, draft_id)


def delete_draft(store: Store, caller: Caller, draft_id: int) -> None:
    """Remove a draft (its author, or an admin of its tenant)."""
    _row(store, caller, draft_id)
    if not store.delete_draft(draft_id):
        raise NotFound(N_("no draft %(id)s", id=draft_id))
    log.info("draft %s deleted by %s", draft_id, caller.username)


def draft_from_template(store: Store, caller: Caller, name: str) -> dict[str, Any]:
    """The body of the latest version of `name`, its circles where the template's layout
    last placed them: what a draft of it starts from."""
    access.require_designer(caller)
    body = store.latest_body(name)
    if body is None:
        raise NotFound(N_("no template '%(name)s'", name=name))
    return with_positions(body, store.layout(name))


def problems(store: Store, body: Any) -> list[Problem]:
    """What the analysis finds in `body` (errors, then warnings; none: it can be
    published), templates it nests by name resolved among the tenant's."""
    report = analyze(body, store.latest_body)
    return [*(Problem(e["path"], e["code"], e["message"]) for e in report.errors),
            *(Problem(w["path"], w["code"], w["message"], True) for w in report.warnings)]


def changes(store: Store, body: Any) -> Changes:
    """What publishing `body` changes against the latest version of its name (as laid
    out now): circles added, removed, changed (which keys), template keys, positions."""
    name = _name(body) if isinstance(body, dict) else ""
    latest = store.latest_body(name) if name else None
    return compare(with_positions(latest, store.layout(name)) if latest is not None else None,
                   body)


def publish(store: Store, caller: Caller, draft_id: int) -> tuple[str, int, bool]:
    """Publish one of the caller's drafts as `POST /api/templates` does (DefinitionError
    with every problem while the analysis finds errors; 'created' False when only
    positions moved: the layout is kept, no version made) and delete the draft:
    (name, version, created)."""
    row = _row(store, caller, draft_id)
    access.draft_changeable(caller, row["author_id"])
    body = row["body"]
    version, created = store.put_template(body, by=caller.username)
    store.delete_draft(draft_id)
    log.info("draft %s published by %s as %s version %s%s", draft_id, caller.username,
             body["name"], version, "" if created else " (no change)")
    return body["name"], version, created


@dataclass(frozen=True)
class People:
    """Whom a template may name (the designer's pickers): the enabled users of the
    caller's tenant and the roles there are (the built-in ones and those its users hold),
    each sorted."""
    users: list[str]
    roles: list[str]


def people(store: Store, caller: Caller) -> People:
    """The names a designer picks among: those of their own tenant only (`store` is the
    caller's tenant's); Forbidden for anyone who may not design."""
    access.require_designer(caller)
    everyone = [u for u in store.list_users() if u["disabled_at"] is None]
    held = {r for u in everyone for r in u["roles"]}
    return People([u["username"] for u in everyone],
                  sorted(held | {*access.ROLES, access.DESIGNER, access.INTEGRATION}))


def _row(store: Store, caller: Caller, draft_id: int) -> dict[str, Any]:
    access.require_designer(caller)
    row = store.draft(draft_id)
    if row is None or not access.may_see_draft(caller, row["tenant"], row["author_id"]):
        raise NotFound(N_("no draft %(id)s", id=draft_id))
    return row


def _check(body: Any) -> None:
    if not isinstance(body, dict):
        raise Refused(N_("a draft is a JSON object (a template, finished or not)"))
    limits.check(body)
    limits.small(body, N_("a draft"), MAX_DRAFT_BYTES)


def _name(body: dict[str, Any]) -> str:
    """The name a draft is listed by: its body's, printable characters only."""
    name = body.get("name")
    return "".join(ch for ch in name[:NAME_MAX] if ch.isprintable()) \
        if isinstance(name, str) else ""


def _draft(row: dict[str, Any]) -> Draft:
    return Draft(row["id"], row["tenant"], row["author"], row["name"], row.get("body") or {},
                 row["created_at"].timestamp(), row["updated_at"].timestamp())
