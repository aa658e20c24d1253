"""Moving running instances from one template version to another (SPEC §11), and where
a circle is (the instances whose circle is in a state).

Each instance moves in one step of its own (`Steps.apply_many`, compare-and-set like
every step): the engine maps its circles (`engine.migration`) and settles it, and the
step's write (`Instances._step_write` → `_moved`) also deletes the circle rows of removed
circles (their task-audience rows with them), inserts the new ones and points the
instance row at the other version and its pinned nested versions. Template versions
never change; only the instance row does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select

from bpflow.store import statements as sql
from bpflow.store.errors import BadMigration, NotFound
from bpflow.store.parts import StoreParts
from bpflow.store.queries import SUMMARY
from bpflow.store.tables import circles_t, instances_t
from bpflow.store.writing import Write, moved_rows
from engine.errors import BpflowError
from engine.instance import WAITING
from engine.messages import N_, joined
from engine.migration import MIGRATABLE, MigrationRefused, map_problems, migrate, prepare

MAX_INSTANCES = 10_000  # instances one migration request moves (more: page with `instances`)
CHUNK = 200  # instances read and written together
CIRCLE_STATES = ("ready", "waiting", "success", "failure", "skipped")


class Migrating(StoreParts):
    """(part of `Store`)"""

    def migrate_instances(self, name: str, source: int, target: int,
                          mapping: Mapping[str, str] | None = None,
                          ids: list[str] | None = None, dry_run: bool = False,
                          actor: str | None = None) -> dict[str, Any]:
        """Move instances of `name` from version `source` to `target`: those of `ids`, or
        every running, failed or suspended one at `source` (the oldest MAX_INSTANCES).
        → {"migrated": [ids], "refused": [{"id", "reasons"}]}; with `dry_run`, what would
        happen, nothing written. NotFound for an unknown template, version or instance
        id; BadMigration for a map naming unknown circles."""
        mapping = dict(mapping or {})
        old_row, new_row = self._version_row(name, source), self._version_row(name, target)
        ids = self._migrating_ids(name, source, ids)
        if source == target:
            raise BadMigration(N_("version %(version)s is the version to migrate from already",
                                  version=source))
        old, _ = self._build(old_row, None)
        new, _ = self._build(new_row, None)
        problems = map_problems(old, new, mapping)
        if problems:
            raise BadMigration(joined(problems))
        migrated: list[str] = []
        refused: list[dict[str, Any]] = []

        def op(engine, inst):
            migrate(inst, new, target, mapping, source, engine.clock, actor)
            engine.tick(inst, actor)  # new circles may be ready, a failure may be gone

        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
            if dry_run:
                outcomes = self._dry_run(chunk, new, mapping, source)
            else:
                outcomes = self.apply_many(chunk, op)
            for iid in chunk:
                outcome = outcomes[iid]
                if isinstance(outcome, MigrationRefused):
                    refused.append({"id": iid, "reasons": outcome.reasons})
                elif isinstance(outcome, BpflowError):
                    refused.append({"id": iid, "reasons": [str(outcome)]})
                else:
                    migrated.append(iid)
        return {"migrated": migrated, "refused": refused}

    def _migrating_ids(self, name: str, source: int, ids: list[str] | None) -> list[str]:
        """The instances a migration is about: `ids` (each one of this tenant, else
        NotFound), or the oldest MAX_INSTANCES migratable ones of `name` at `source`."""
        if ids is not None:
            if len(ids) > MAX_INSTANCES:
                raise BadMigration(N_("at most %(n)s instances per request", n=MAX_INSTANCES))
            ids = list(dict.fromkeys(ids))
            found: set[str] = set()
            with self.reader() as conn:
                for start in range(0, len(ids), 1000):
                    found.update(conn.execute(select(instances_t.c.id).where(
                        self._here(instances_t),
                        instances_t.c.id.in_(ids[start:start + 1000]))).scalars())
            missing = [iid for iid in ids if iid not in found]
            if missing:
                raise NotFound(N_("no instance '%(id)s'", id=missing[0]))
            return ids
        q = (select(instances_t.c.id)
             .where(self._here(instances_t), instances_t.c.template == name,
                    instances_t.c.version == source,
                    instances_t.c.status.in_(MIGRATABLE))
             .order_by(instances_t.c.created_at, instances_t.c.id).limit(MAX_INSTANCES))
        with self.reader() as conn:
            return list(conn.execute(q).scalars())

    def _dry_run(self, ids: list[str], new, mapping: Mapping[str, str],
                 source: int) -> dict[str, Any]:
        """What a migration would say of each instance, read fresh, nothing changed."""
        loaded = self._load_many(ids)
        now = self.clock()
        out: dict[str, Any] = {}
        for iid in ids:
            inst = loaded[iid].inst
            reasons = prepare(inst, new, mapping, source, now).reasons
            out[iid] = MigrationRefused(iid, reasons) if reasons else None
        return out

    def _moved(self, write: Write) -> None:
        """Add to a step's write what moving its instance to another template version
        changes besides (`Instances._step_write`): circle rows gone and new, the
        instance row's version and its pinned nested versions."""
        loaded, inst = write.loaded, write.loaded.inst
        tenant = inst.tenant
        gone = [cid for cid in loaded.circles if cid not in write.circles]
        new = {cid for cid in write.circles if cid not in loaded.circles}
        write.changed = [c for c in write.changed if c["circle"] not in new]
        # an open task of a removed circle is listed no more
        write.retold += [{"instance_id": inst.id, "circle": cid} for cid in gone
                         if loaded.circles[cid][sql.AUDIENCE] is not None]
        row_id, pins = self._version_of(inst.template)
        instance = {"id": inst.id, "template_id": row_id, "version": inst.version,
                    "nested_versions": pins}
        pinned = [{"instance_id": inst.id, "tenant": tenant,
                   "template_id": self._version_id(n, v, tenant)}
                  for n, v in pins.items()]
        write.moved = moved_rows(
            [{"instance_id": inst.id, "circle": cid} for cid in gone],
            [sql.circle_row(inst.id, cid, write.circles[cid], tenant, loaded.batch)
             for cid in write.circles if cid in new], instance, pinned)

    def _version_of(self, template) -> tuple[int, dict[str, int]]:
        """(version row id, pinned nested versions) a built Template was made from."""
        for (row_id, pins), built in list(self._templates.items()):
            if built is template:
                return row_id, dict(pins)
        raise RuntimeError(f"template '{template.name}' was not built by this store")

    def instance_rows(self, ids: list[str]) -> list[dict[str, Any]]:
        """The summaries (as `list_instances` gives them) of these instances of this
        tenant; ids of none are left out."""
        out = []
        with self.reader() as conn:
            for start in range(0, len(ids), 1000):
                out += [dict(r) for r in conn.execute(select(*SUMMARY).where(
                    self._here(instances_t),
                    instances_t.c.id.in_(ids[start:start + 1000]))).mappings()]
        return out

    # ----------------------------------------------------------- where a circle is
    def circle_instances(self, name: str, uri: str, state: str, version: int | None = None,
                         user_id: int | None = None, limit: int = 50, offset: int = 0
                         ) -> tuple[list[dict[str, Any]], int]:
        """Instances of `name` (of one user unless `user_id` is None; of one version if
        named) whose circle `uri` is in `state` (`ready`: waiting and entered), newest
        first, and their number (Busybee's InstanceStepState)."""
        i, c = instances_t, circles_t
        cond = [self._here(i), i.c.template == name, c.c.circle == uri]
        if state == "ready":  # entered, in an instance that is not over
            cond += [c.c.state == WAITING, c.c.ready_at.is_not(None),
                     i.c.status.in_(MIGRATABLE)]
        else:
            cond.append(c.c.state == state)
        if version is not None:
            cond.append(i.c.version == version)
        if user_id is not None:
            cond.append(i.c.user_id == user_id)
        joined = i.join(c, (c.c.instance_id == i.c.id) & (c.c.tenant == i.c.tenant))
        q = (select(*SUMMARY).select_from(joined).where(*cond)
             .order_by(i.c.created_at.desc(), i.c.id).limit(limit).offset(offset))
        with self.reader() as conn:
            rows = conn.execute(q).mappings().all()
            total = conn.execute(select(func.count()).select_from(joined).where(*cond)
                                 ).scalar_one()
        return [dict(r) for r in rows], int(total)
