"""State of the templates page's migration panel (admins): migrating running instances of
the chosen template from one version to another, a dry run first, whose answer is shown
before the migration may be run (SPEC §11).

Which template is chosen is `TemplatesState`'s: it offers each choice here (`offer`), with
the template's versions; the panel proposes the last two.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import reflex as rx

from bpflow import admin
from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import Unauthorized
from bpflow.store import Store
from bpflow_app.session import SessionState, expired
from bpflow_app.templatesview import InstanceLink, link, parse_map, proposed, refused_link
from engine.errors import BpflowError


class MigrationState(SessionState):
    template: str = ""  # the template chosen on the page
    versions: list[str] = []  # its versions, oldest first
    mig_from: str = ""
    mig_to: str = ""
    mig_map: str = ""
    mig_checked: str = ""  # the request the dry run shown answered ("": none shown)
    mig_dry: bool = True  # what is shown is a dry run's answer (else a migration's)
    mig_shown: bool = False
    mig_migrated: list[InstanceLink] = []
    mig_refused: list[InstanceLink] = []
    mig_error: str = ""

    @rx.var
    def can_migrate(self) -> bool:
        """The migration may run: the dry run shown answered exactly what is asked now."""
        return self.mig_shown and self.mig_dry and self.mig_checked == self._mig_key()

    def _mig_key(self) -> str:
        return json.dumps([self.template, self.mig_from, self.mig_to, self.mig_map.strip()])

    def offer(self, name: str, versions: list[str]) -> None:
        """The template chosen now, with its versions (`TemplatesState` tells): when they
        changed, the last two are proposed and what was shown is forgotten."""
        self.template = name
        if versions != self.versions or not self.mig_to:
            self.versions = versions
            self.mig_from, self.mig_to = proposed(versions)
            self._forget_migration()

    def _forget_migration(self) -> None:
        self.mig_checked, self.mig_shown, self.mig_error = "", False, ""
        self.mig_migrated, self.mig_refused = [], []

    @rx.event
    def set_mig_from(self, value: str):
        self.mig_from = value
        self._forget_migration()

    @rx.event
    def set_mig_to(self, value: str):
        self.mig_to = value
        self._forget_migration()

    @rx.event
    def set_mig_map(self, value: str):
        if value.strip() != self.mig_map.strip():
            self._forget_migration()
        self.mig_map = value

    @rx.event
    async def dry_run(self):
        """What migrating would do: shown, nothing changed; it enables `migrate`."""
        return await self._migrate(dry=True)

    @rx.event
    async def migrate(self):
        """Migrate, once a dry run of the same request was shown (the page then reads
        the template's counts again: `TemplatesState.choose`)."""
        if not self.can_migrate:
            return rx.toast.error(self.gettext("Run a dry run of this migration first"))
        return await self._migrate(dry=False)

    async def _migrate(self, dry: bool):
        """A migration (or its dry run) of what the form asks; the store's work runs on a
        thread (thousands of instances take seconds: the server goes on meanwhile)."""
        try:
            caller = self._admin()
        except Unauthorized as exc:
            return expired(self, exc)
        key = self._mig_key()
        self._forget_migration()
        if not (self.mig_from.isdigit() and self.mig_to.isdigit()):
            self.mig_error = self.gettext(
                "Choose the version to migrate from and the one to migrate to")
            return None
        source, target = int(self.mig_from), int(self.mig_to)
        try:
            mapping = parse_map(self.mig_map, self.gettext)
        except ValueError as exc:
            self.mig_error = str(exc)
            return None
        try:
            outcome, rows = await asyncio.to_thread(
                self._migrated, store_for(caller), source, target, mapping, dry,
                caller)
        except BpflowError as exc:  # an unknown version, a map naming unknown circles
            self.mig_error = self.explain(exc)
            return None
        self.mig_migrated = [link(rows[i]) for i in outcome["migrated"] if i in rows]
        self.mig_refused = [refused_link(r, rows, self.say) for r in outcome["refused"]]
        self.mig_dry, self.mig_shown = dry, True
        self.mig_checked = key if dry else ""
        if dry:
            return None
        return rx.toast.success(self.ngettext(
            "Migrated %(n)s flow to version %(version)s; %(refused)s refused",
            "Migrated %(n)s flows to version %(version)s; %(refused)s refused",
            len(self.mig_migrated), version=target, refused=len(self.mig_refused)))

    def _migrated(self, store: Store, source: int, target: int, mapping: dict[str, str],
                  dry: bool, caller: Caller) -> tuple[dict[str, Any], dict[str, Any]]:
        """The store's answer to the migration, and the rows of the instances it names."""
        outcome = admin.migrate(store, caller, self.template, source, target, mapping,
                                dry_run=dry)
        ids = outcome["migrated"] + [r["id"] for r in outcome["refused"]]
        return outcome, {r["id"]: r for r in store.instance_rows(ids)}
