"""Tenants (SPEC §12): the organisations one installation serves, and their quotas.

Every row of the other tables names its tenant; which tenant a store reads and writes is
the store's (`Store.of`). This module keeps the tenants table itself and answers whether
a tenant's quota allows one more running instance, template or byte of variables.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

from bpflow.store.errors import NotFound, QuotaExceeded, StorageQuotaExceeded
from bpflow.store.parts import StoreParts
from bpflow.store.tables import instances_t, templates_t, tenants_t
from engine.instance import SUSPENDED
from engine.messages import N_
from engine.moves import ACTIVE

TENANT_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")  # a DNS label
QUOTAS = {  # quota name → what it bounds
    "instances": "running instances (running, failed or suspended)",
    "templates": "templates (names; every version of one counts once)",
    "variables_bytes": "bytes of variables one instance may store (JSON)",
}
QUOTA_TTL = 2.0  # seconds this process reuses its reading of a tenant's quotas
FRAME_TEMPLATE = "signin"  # the app's outer flow (one per signed-in user): not counted


def valid_tenant(name: str) -> str:
    """A tenant name as stored (lower case letters, digits and inner hyphens, at most 63:
    it is a path segment, `/guest/{tenant}`); ValueError otherwise."""
    name = (name or "").strip().lower()
    if not TENANT_NAME.fullmatch(name):
        raise ValueError("a tenant name is 1-63 lower-case letters, digits and inner hyphens")
    return name


def valid_quotas(quotas: dict[str, Any]) -> dict[str, int]:
    """Quotas as stored: known names, whole numbers ≥ 0 (None removes one)."""
    out = {}
    for key, value in quotas.items():
        if key not in QUOTAS:
            raise ValueError(f"unknown quota '{key}' (known: {', '.join(QUOTAS)})")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"quota '{key}' must be a whole number ≥ 0")
        out[key] = value
    return out


class Tenants(StoreParts):
    """The store's tenants and their quotas (part of `Store`)."""

    quota_ttl = QUOTA_TTL

    def add_tenant(self, name: str, quotas: dict[str, Any] | None = None) -> str:
        """Create a tenant; ValueError for a bad or taken name."""
        name = valid_tenant(name)
        try:
            with self.db.begin() as conn:
                conn.execute(insert(tenants_t).values(
                    name=name, created_at=self.clock(), quotas=valid_quotas(quotas or {})))
        except IntegrityError as exc:
            raise ValueError(N_("tenant '%(name)s' already exists", name=name)) from exc
        return name

    def tenant_names(self) -> list[str]:
        with self.reader() as conn:
            return list(conn.execute(select(tenants_t.c.name).order_by(tenants_t.c.name))
                        .scalars())

    def has_tenant(self, name: str) -> bool:
        with self.reader() as conn:
            return conn.execute(select(tenants_t.c.name).where(tenants_t.c.name == name)
                                ).first() is not None

    def set_quotas(self, quotas: dict[str, Any]) -> dict[str, int]:
        """Change this store's tenant's quotas (None removes one): the quotas as stored."""
        valid_quotas(quotas)  # refused before anything is read
        with self.db.begin() as conn:
            row = conn.execute(select(tenants_t.c.quotas).where(
                tenants_t.c.name == self._owner())).first()
            if row is None:
                raise NotFound(N_("no tenant '%(name)s'", name=self.tenant))
            merged = {**(row.quotas or {}), **quotas}
            stored = valid_quotas(merged)
            conn.execute(update(tenants_t).where(tenants_t.c.name == self.tenant)
                         .values(quotas=stored))
        self._quota_cache.forget(self.tenant)
        return stored

    def quotas(self) -> dict[str, int]:
        """This store's tenant's quotas (read again every `quota_ttl` seconds)."""
        def load() -> dict[str, int]:
            with self.reader() as conn:
                return conn.execute(select(tenants_t.c.quotas).where(
                    tenants_t.c.name == self.tenant)).scalar() or {}
        return self._quota_cache.get(self.tenant, self.quota_ttl, load)

    def usage(self) -> dict[str, int]:
        """What this store's tenant uses of what quotas bound."""
        with self.reader() as conn:
            running = conn.execute(select(func.count()).select_from(instances_t).where(
                self._listed(instances_t), instances_t.c.template != FRAME_TEMPLATE,
                instances_t.c.status.in_(sorted(ACTIVE | {SUSPENDED})))).scalar_one()
            names = conn.execute(select(func.count(templates_t.c.name.distinct())).where(
                self._listed(templates_t))).scalar_one()
        return {"instances": int(running), "templates": int(names)}

    # ------------------------------------------------------------- the checks
    def _admit_instance(self, count: int = 1) -> None:
        """QuotaExceeded when `count` more running instances would pass the tenant's
        quota."""
        limit = self.quotas().get("instances")
        if limit is None:
            return
        running = self.usage()["instances"]
        if running + count > limit:
            if count == 1:
                raise QuotaExceeded(N_("tenant '%(name)s' runs %(limit)s instances, its quota;"
                                       " finish or abort some first", name=self.tenant,
                                       limit=limit))
            raise QuotaExceeded(N_("tenant '%(name)s' runs %(running)s instances and its quota"
                                   " is %(limit)s: %(count)s more do not fit",
                                   name=self.tenant, running=running, limit=limit,
                                   count=count))

    def _admit_template(self, name: str) -> None:
        """QuotaExceeded when a new template name would pass the tenant's quota."""
        limit = self.quotas().get("templates")
        if limit is not None and self._template_row(name) is None and \
                self.usage()["templates"] >= limit:
            raise QuotaExceeded(N_("tenant '%(name)s' has %(limit)s templates, its quota",
                                   name=self.tenant, limit=limit))

    def _admit_variables(self, variables: Any) -> None:
        """StorageQuotaExceeded when an instance's variables are larger than the quota."""
        limit = self.quotas().get("variables_bytes") if self.tenant is not None else None
        if limit is not None:
            size = len(orjson.dumps(variables, option=orjson.OPT_NON_STR_KEYS))
            if size > limit:
                raise StorageQuotaExceeded(
                    N_("the instance's variables would take %(size)s bytes; the quota of"
                       " tenant '%(name)s' allows %(limit)s", size=size, name=self.tenant,
                       limit=limit))
