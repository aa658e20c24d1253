"""Sandboxes (SPEC §16 "Try it"): a draft run as an instance before it is published.

A sandbox's body is kept as a version row marked `sandbox`, named `~try.<key>` (outside
the names a template may have, so it is no version of any template and no lookup by
name finds it), and its instance is marked `sandbox` too: the store lists, counts and
feeds none of them (`Store._listed`), its circles carry none of the columns tasks,
people's lists and signals find circles by (`statements.snapshot`), and it is never due
for the worker (`Leases.due_at`). The database is its truth: any process may start a
sandbox and any other drive it (scaled out). Its row is read at each load, never kept
by id (a new start replaces it, and on SQLite the new row may get the old one's id);
its `digest` is a token new at each start, by which a process keeps the Template it
built (`Templates._tried_template`). One per key (a draft): a new start replaces it; the
worker deletes those older than a day (`bpflow.expiry`). Who may is `bpflow.sandbox`'s.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select

from bpflow.store.parts import StoreParts
from bpflow.store.tables import instances_t, templates_t
from engine.analysis import analyze
from engine.errors import DefinitionError
from engine.instance import Instance

PREFIX = "~try."  # a sandbox's version row: `~try.<key>` (a template's name is [a-z0-9_-])
SWEEP_AT_ONCE = 100  # sandboxes deleted per sweep


def sandbox_name(key: str) -> str:
    return PREFIX + key


class Sandboxes(StoreParts):
    """The store's sandboxes (part of `Store`)."""

    def start_sandbox(self, key: str, body: dict[str, Any], inputs: dict[str, Any] | None,
                      user: dict[str, Any]) -> Instance:
        """Run `body` (DefinitionError while the analysis finds errors) as sandbox `key`,
        started by `user`, in place of the one it had."""
        report = analyze(body, self.latest_body)
        if not report.valid:
            raise DefinitionError(report.errors)
        self.delete_sandbox(key)
        with self.db.begin() as conn:
            tid = conn.execute(insert(templates_t).values(
                tenant=self._owner(), name=sandbox_name(key), version=1, body=body,
                digest=uuid.uuid4().hex, created_at=self.clock(), stop_at=None, sandbox=True
            ).returning(templates_t.c.id)).scalar_one()
            row = conn.execute(select(templates_t).where(templates_t.c.id == tid)).one()
        try:
            loaded, new = self._new_instance(row, inputs, user)
            self.driver.insert(new)
        except BaseException:
            self._drop([tid])
            raise
        return self._begun(loaded, new)

    def sandbox(self, key: str) -> str | None:
        """The instance id of sandbox `key` of this tenant, None when there is none."""
        with self.reader() as conn:
            return conn.execute(select(instances_t.c.id).join(
                templates_t, templates_t.c.id == instances_t.c.template_id).where(
                self._here(templates_t), templates_t.c.sandbox,
                templates_t.c.name == sandbox_name(key))).scalar()

    def delete_sandbox(self, key: str) -> bool:
        """Delete sandbox `key` of this tenant (its instance, history and body); False
        when there was none."""
        with self.reader() as conn:
            ids = list(conn.execute(select(templates_t.c.id).where(
                self._here(templates_t), templates_t.c.sandbox,
                templates_t.c.name == sandbox_name(key))).scalars())
        return self._drop(ids) > 0

    def sweep_sandboxes(self, before: datetime) -> int:
        """Delete the sandboxes (of every tenant for the worker's view) started before
        `before`, a batch at a time; how many."""
        with self.reader() as conn:
            ids = list(conn.execute(select(templates_t.c.id).where(
                self._here(templates_t), templates_t.c.sandbox,
                templates_t.c.created_at < before).limit(SWEEP_AT_ONCE)).scalars())
        return self._drop(ids)

    def _drop(self, template_ids: list[int]) -> int:
        """Delete sandbox version rows and their instances (their circles, history, task
        rows and uploads go with them); how many version rows."""
        if not template_ids:
            return 0
        with self.db.begin() as conn:
            gone = list(conn.execute(delete(instances_t).where(
                instances_t.c.template_id.in_(template_ids), instances_t.c.sandbox.is_(True)
            ).returning(instances_t.c.id)).scalars())
            done = conn.execute(delete(templates_t).where(
                templates_t.c.id.in_(template_ids), templates_t.c.sandbox)).rowcount
        with self._lock:
            for iid in gone:
                self._cache.pop(iid, None)
        return done
