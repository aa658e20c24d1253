"""What admins do to their tenant (SPEC §18's audit log names them): each move here is
the one the API's routes, the web app's pages and the command line call, and each is
recorded (`bpflow.audit`) once it is done. `by` is the admin; None is the installation's
operator on the command line, who may do everything and is recorded without a name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bpflow import audit
from bpflow.access import Caller, require_admin
from bpflow.errors import Conflict
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.store import Store
from engine.messages import N_


def _admin(by: Caller | None) -> None:
    if by is not None:
        require_admin(by)


# ------------------------------------------------------------------------- templates
def upload_template(store: Store, by: Caller | None, body: Any,
                    stop: Callable[[], bool] | None = None) -> tuple[int, bool]:
    """Store a template version (`Store.put_template`): (version, created); only a new
    version is recorded."""
    _admin(by)
    versions = (store.template_versions().get(str(body.get("name")))
                if isinstance(body, dict) else None)
    version, created = store.put_template(body, stop)
    if created:
        audit.record(store, by, "template_uploaded", body["name"],
                     {"version": versions[-1]} if versions else None, {"version": version})
    return version, created


def retire_template(store: Store, by: Caller | None, name: str) -> bool:
    """No new starts of `name` (Conflict for the flow signing in starts); False when it
    was retired already (nothing recorded)."""
    _admin(by)
    if name == SIGNIN_TEMPLATE:
        raise Conflict(N_("'%(name)s' is the flow signing in starts: it cannot be retired",
                          name=name))
    done = store.retire_template(name, by.username if by else None)
    if done:
        audit.record(store, by, "template_retired", name, {"retired": False},
                     {"retired": True})
    return done


def restore_template(store: Store, by: Caller | None, name: str) -> bool:
    """`name` can be started again; False when it was not retired (nothing recorded)."""
    _admin(by)
    done = store.restore_template(name)
    if done:
        audit.record(store, by, "template_restored", name, {"retired": True},
                     {"retired": False})
    return done


def migrate(store: Store, by: Caller | None, name: str, source: int, target: int,
            mapping: Mapping[str, str] | None = None, ids: list[str] | None = None,
            dry_run: bool = False) -> dict[str, Any]:
    """`Store.migrate_instances`; a migration that moved instances is recorded (a dry
    run, or one that moved none, is not)."""
    _admin(by)
    outcome = store.migrate_instances(name, source, target, mapping, ids, dry_run,
                                      by.username if by else None)
    if not dry_run and outcome["migrated"]:
        audit.record(store, by, "instances_migrated", name,
                     {"version": source, "instances": outcome["migrated"]},
                     {"version": target, "map": dict(mapping or {}),
                      "refused": [r["id"] for r in outcome["refused"]]})
    return outcome


# -------------------------------------------------------------------------- webhooks
def delete_webhook(store: Store, by: Caller | None, webhook_id: int) -> dict[str, Any]:
    """Stop and forget a webhook (`Store.delete_webhook`): it as it was."""
    _admin(by)
    hook = store.delete_webhook(webhook_id)
    audit.record(store, by, "webhook_deleted", webhook_id,
                 {"url": hook["url"], "events": hook["events"]})
    return hook


# ----------------------------------------------------------------------------- users
def add_user(store: Store, by: Caller | None, username: str, password: str,
             roles: Iterable[str]) -> int:
    """A new user of the tenant (`Store.add_user`): their id."""
    _admin(by)
    roles = list(roles)
    uid = store.add_user(username, password, roles)
    user = store.user(username)
    audit.record(store, by, "user_added", user["username"] if user else username,
                 None, {"roles": sorted(set(roles))})
    return uid


def set_roles(store: Store, by: Caller | None, username: str,
              roles: Iterable[str]) -> list[str]:
    """Give a user these roles (`Store.set_roles`): the roles as stored."""
    _admin(by)
    user = store.user(username)
    stored = store.set_roles(username, roles)
    if user is None or sorted(user["roles"]) != sorted(stored):
        audit.record(store, by, "user_roles_changed", user["username"] if user else username,
                     {"roles": sorted(user["roles"])} if user else None, {"roles": stored})
    return stored


def disable_user(store: Store, by: Caller | None, username: str) -> bool:
    """Disable an account (`Store.disable_user`); False when it was disabled already
    (nothing recorded)."""
    _admin(by)
    user = store.user(username)
    done = store.disable_user(username)
    if done:
        audit.record(store, by, "user_disabled", user["username"] if user else username,
                     {"disabled": False}, {"disabled": True})
    return done


# --------------------------------------------------------------------------- tenants
def set_quotas(store: Store, by: Caller | None, quotas: dict[str, Any]) -> dict[str, int]:
    """Change the tenant's quotas (`Store.set_quotas`): the quotas as stored."""
    _admin(by)
    before = dict(store.quotas())
    stored = store.set_quotas(quotas)
    if stored != before:
        audit.record(store, by, "quotas_changed", store.tenant or "", before, stored)
    return stored
