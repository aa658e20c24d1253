"""The audit log (SPEC §18): every admin action of a tenant, with who, when, what, to
what, and the state before and after. `KINDS` is the one list of what an entry can be;
`record` is called by the one place each action happens (`bpflow.admin`,
`bpflow.accounts`, `bpflow.substitutes`, `bpflow.webhooks`, `bpflow.tenancy`,
`bpflow.operations`); the log is only ever appended to (`bpflow.store.audit`). Passwords
and secrets are never in it."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from bpflow.access import Caller, require_admin
from bpflow.store import Store

log = logging.getLogger("bpflow.audit")

KINDS = (
    "user_added",          # target: the username; after: {"roles"}
    "user_roles_changed",  # before/after: {"roles"}
    "user_disabled",       # before/after: {"disabled"}
    "password_reset",      # target: the username (never the password)
    "template_uploaded",   # target: the name; before/after: {"version"}
    "template_retired",    # before/after: {"retired"}
    "template_restored",   # before/after: {"retired"}
    "instances_migrated",  # before: {"version", "instances"}; after: {"version", "moved", ...}
    "webhook_added",       # target: the webhook's id; after: {"url", "events"} (no secret)
    "webhook_deleted",     # before: {"url", "events"}
    "quotas_changed",      # target: the tenant; before/after: its quotas
    "tenant_added",        # target: the tenant; after: {"admin", "quotas"}
    "substitute_set",      # target: whose; before/after: the substitution
    "substitute_cleared",  # before: the substitution
    "operation_started",   # a bulk operation (SPEC §18): target its id
    "operation_finished",  # after: {"action", "matched", "done", "refused"}
)
PAGE_MAX = 1000  # entries one read answers at most


def record(store: Store, by: Caller | None, kind: str, target: str | int,
           before: Any = None, after: Any = None) -> int:
    """Append what `by` (None: the installation's operator, on the command line) did to
    `target` in `store`'s tenant; the entry's id."""
    if kind not in KINDS:
        raise ValueError(f"not an audit kind: {kind!r}")
    entry = store.add_audit(by.id if by else None, by.username if by else None, kind,
                            str(target), before, after)
    log.info("audit %s %s by %s", kind, target, by.username if by else "(operator)")
    return entry


def entries(store: Store, caller: Caller, after: int | None = None, limit: int = 100, *,
            before: int | None = None, actor: str | None = None, kind: str | None = None,
            since: datetime | None = None, until: datetime | None = None
            ) -> list[dict[str, Any]]:
    """The caller's tenant's entries (admins only): oldest first after `after`, newest
    first before `before` (`bpflow.store.audit`)."""
    require_admin(caller)
    return store.audit_entries(after, min(limit, PAGE_MAX), before=before, actor=actor,
                               kind=kind, since=since, until=until)
