"""Substitutes (代理人, SPEC §15): a user away names someone who does their work meanwhile.

`put`, `get` and `clear` are the one home of a substitution's rules for the REST API
(`/api/me/substitute`, `/api/users/{name}/substitute`) and the web app alike: who may set
one is `bpflow.access`'s (`substitute_settable`), and so is what the substitute is then
offered (`access.stands_in`); here a substitution is checked (a known, enabled
substitute, not the user, no cycle, `until` after `from` and not past, at most
`access.SUBSTITUTE_TEMPLATES_MAX` existing templates) and written, and who set it is kept
and logged.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from bpflow import access, audit
from bpflow.access import Caller
from bpflow.errors import NotFound, Refused
from bpflow.store import Store
from engine.messages import N_

log = logging.getLogger("bpflow.substitutes")
LONGEST = timedelta(days=366)  # the longest substitution
CHAIN_MAX = 1000  # substitutes followed at most when looking for a cycle


def put(store: Store, caller: Caller, username: str, to: str, starts: datetime,
        ends: datetime, templates: list[str] | None = None) -> dict[str, Any]:
    """Make `to` the substitute of `username` from `starts` until `ends` (for the listed
    `templates`, or all): the substitution as `get` answers it. Forbidden for someone
    else's unless an admin; NotFound for an unknown user; Refused (why) for a
    substitution that cannot be."""
    access.substitute_settable(caller, username)
    user = _user(store, username)
    starts, ends = _utc(starts), _utc(ends)
    if ends <= starts:
        raise Refused(N_("'until' must be after 'from'"))
    if ends <= store.clock():
        raise Refused(N_("'until' is in the past"))
    if ends - starts > LONGEST:
        raise Refused(N_("a substitution lasts at most %(n)s days", n=LONGEST.days))
    names = _templates(store, templates)
    target = store.user(to) if isinstance(to, str) and to else None
    why = access.substitute_refusal(user["username"], target["username"] if target else to,
                                    target is not None,
                                    _chain(store, target["id"]) if target else [])
    if why:
        raise Refused(why)
    assert target is not None
    before = get(store, caller, user["username"])
    store.put_substitute(user["id"], target["id"], starts, ends, names, caller.username)
    log.info("substitute of %s set to %s from %s until %s (templates %s) by %s",
             user["username"], target["username"], starts.isoformat(), ends.isoformat(),
             names, caller.username)
    found = get(store, caller, user["username"])
    assert found is not None
    if user["id"] != caller.id:  # set for someone else: an admin's act
        audit.record(store, caller, "substitute_set", user["username"], before, found)
    return found


def get(store: Store, caller: Caller, username: str) -> dict[str, Any] | None:
    """A user's substitute: {"user", "to", "from", "until", "templates", "active",
    "set_by", "set_at"} (times in ISO 8601), None when they have none."""
    access.substitute_settable(caller, username)
    row = store.substitute_of(_user(store, username)["id"])
    if row is None:
        return None
    now = store.clock()
    return {"user": row["user"], "to": row["to"], "from": row["from"].isoformat(),
            "until": row["until"].isoformat(), "templates": row["templates"],
            "active": row["from"] <= now < row["until"], "set_by": row["set_by"],
            "set_at": row["set_at"].isoformat()}


def clear(store: Store, caller: Caller, username: str) -> bool:
    """Remove a user's substitute (False when they had none)."""
    access.substitute_settable(caller, username)
    user = _user(store, username)
    before = get(store, caller, user["username"])
    done = store.clear_substitute(user["id"])
    if done and user["id"] != caller.id:
        audit.record(store, caller, "substitute_cleared", user["username"], before)
    if done:
        log.info("substitute of %s cleared by %s", user["username"], caller.username)
    return done


def _user(store: Store, username: str) -> dict[str, Any]:
    user = store.user(username)
    if user is None:
        raise NotFound(N_("no user '%(name)s'", name=username))
    return user


def _utc(when: datetime) -> datetime:
    """A time in UTC (one without a zone is taken as UTC)."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _templates(store: Store, templates: list[str] | None) -> list[str] | None:
    """The templates a substitution names, unique and sorted, each an existing one of the
    tenant; None (every template) for none given."""
    if templates is None:
        return None
    if len(templates) > access.SUBSTITUTE_TEMPLATES_MAX:
        raise Refused(N_("a substitution names at most %(n)s templates",
                            n=access.SUBSTITUTE_TEMPLATES_MAX))
    known = store.template_versions()
    missing = sorted({t for t in templates if t not in known})
    if missing:
        raise Refused(N_("no template %(names)s", names=", ".join(missing)))
    return sorted(set(templates)) or None


def _chain(store: Store, start: int) -> list[str]:
    """`start`'s substitute, theirs, and so on (their usernames, in order), until one
    has none or a name comes again."""
    seen: list[int] = []
    at: int | None = start
    while at is not None and at not in seen and len(seen) < CHAIN_MAX:
        seen.append(at)
        at = store.substitute_ids([at]).get(at)
    names = {u["id"]: u["username"] for u in store.list_users()}
    return [names[i] for i in seen[1:] if i in names] + ([names[at]] if at in names else [])
