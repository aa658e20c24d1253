"""Tenants as the services see them (SPEC §12): a new tenant gets the app's own frame
(the outer `signin` flow, as shipped) and its first admin; every tenant's frame is kept
as shipped when the server starts.

Which tenant a request reads and writes is its caller's (`Caller.tenant`, from the users
table); the store keeps every query to one tenant (`Store.of`), and `bpflow.access`
asks `same_tenant` before any other rule.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from bpflow import audit
from bpflow.access import ADMIN
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.security import valid_username
from bpflow.store import Store

log = logging.getLogger("bpflow")
TEMPLATES = Path(__file__).resolve().parents[1] / "upload" / "workflow"


def current_frame(store: Store, folder: Path = TEMPLATES) -> None:
    """The outer flow (`signin`) is the app's own frame, not a business template: it is
    kept as shipped in the store's tenant, so a database made by an older bpflow (whose
    `main` circle nested an expense claim, started at every first sign-in) gets the frame
    that starts nothing."""
    shipped = folder / f"{SIGNIN_TEMPLATE}.json"
    if shipped.is_file():
        version, created = store.put_template(json.loads(shipped.read_text(encoding="utf-8")))
        if created:
            log.info("tenant %s: the outer flow %s is now version %s", store.tenant,
                     SIGNIN_TEMPLATE, version)


def current_frames(store: Store, folder: Path = TEMPLATES) -> None:
    """`current_frame` in every tenant."""
    for name in store.tenant_names():
        current_frame(store.of(name), folder)


def create_tenant(store: Store, name: str, admin: str, password: str,
                  quotas: dict[str, Any] | None = None) -> Store:
    """A new tenant with the app's frame and its first admin: the store seen from it.
    ValueError (nothing created) for a bad or taken tenant name, a bad or taken
    username, bad quotas."""
    admin = valid_username(admin)
    if store.username_taken(admin):
        raise ValueError(f"user '{admin}' already exists (usernames are unique across"
                         " tenants)")
    if not password:
        raise ValueError("an empty password")
    tenant = store.of(store.add_tenant(name, quotas))
    current_frame(tenant)
    tenant.add_user(admin, password, [ADMIN])
    audit.record(tenant, None, "tenant_added", tenant.tenant or name, None,
                 {"admin": admin, "quotas": tenant.quotas()})
    return tenant
