"""Template versions: upload (analysed first; identical to the latest is no new version),
lookup, the versions instances lock, the Template objects built from them, retirement
(a retired template is started no more; its running instances go on), and each
template's layout (where the designer draws its circles, SPEC §16).

A version's identity (`digest`) leaves the circles' `ui` positions out: an upload that
only moves circles is the latest version, no new one. The positions an upload carries
are kept as the template's layout (`template_layouts`, one row per name) instead, so the
designer opens the template as last arranged and a locked version is never changed.

A version never changes once stored, so its row is read once per process and each
(version, pinned nested versions) is analysed once.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from bpflow.store import statements as sql
from bpflow.store.errors import Conflict, NotFound
from bpflow.store.parts import StoreParts
from bpflow.store.reads import straight
from bpflow.store.reuse import Reused
from bpflow.store.tables import instances_t, layouts_t, pinned_t, retired_t, templates_t
from engine.analysis import analyze
from engine.changes import Position, positions, without_positions
from engine.errors import DefinitionError
from engine.limits import DEFAULT_LIMITS
from engine.messages import N_
from engine.model import Template

TEMPLATE_ID = {False: straight(sql.template_id), True: straight(sql.template_version_id)}
RETIRED_TTL = 2.0  # seconds a start reuses this process's reading of the retired names
LATEST_TTL = 2.0  # seconds a start reuses this process's lookup of a template's latest version
TRIED_KEPT = 64  # sandboxes' Templates a process keeps (`_tried_template`)


def digest(body: dict[str, Any]) -> str:
    """A version's identity: its body without the designer's positions."""
    canonical = json.dumps(without_positions(body), sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class Templates(StoreParts):
    """The store's template versions (part of `Store`)."""

    retired_ttl = RETIRED_TTL
    latest_ttl = LATEST_TTL
    _retired: tuple[frozenset[str], float] | None = None
    _latest: Reused  # by (tenant of the view, name)

    def put_template(self, body: Any, stop: Callable[[], bool] | None = None,
                     by: str | None = None) -> tuple[int, bool]:
        """Store `body` as a new version unless identical to the latest (its circles'
        positions aside): (version, created). Positions it carries become the template's
        layout (`by`: who). `stop` ends the analysis early when it answers True (a client
        gone)."""
        limits = DEFAULT_LIMITS if stop is None else replace(DEFAULT_LIMITS, stop=stop)
        report = analyze(body, self.latest_body, limits=limits)
        if not report.valid:
            raise DefinitionError(report.errors)
        assert report.template is not None  # a valid report has its template
        name, fingerprint, tenant = body["name"], digest(body), self._owner()
        self._admit_template(name)
        for _ in range(5):
            with self.db.begin() as conn:
                latest = conn.execute(
                    select(templates_t.c.version, templates_t.c.digest)
                    .where(templates_t.c.tenant == tenant, templates_t.c.name == name)
                    .order_by(templates_t.c.version.desc()).limit(1)).first()
                if latest is not None and latest.digest == fingerprint:
                    self._keep_layout(conn, name, body, by)
                    return latest.version, False
                version = latest.version + 1 if latest else 1
                try:
                    conn.execute(insert(templates_t).values(
                        tenant=tenant, name=name, version=version, body=body, digest=fingerprint,
                        created_at=self.clock(), stop_at=report.template.stop_at))
                except IntegrityError:  # a concurrent upload took this number
                    conn.rollback()
                    continue
                self._keep_layout(conn, name, body, by)
            self._latest.forget()  # this process starts the new version at once
            return version, True
        raise Conflict(N_("template '%(name)s' is being uploaded concurrently; try again",
                          name=name))

    def _keep_layout(self, conn, name: str, body: dict[str, Any], by: str | None) -> None:
        """Keep the positions `body` carries as the layout of `name` (none: as it was)."""
        places = positions(body)
        if not places:
            return
        values = {"positions": places, "updated_at": self.clock(), "updated_by": by}
        # one statement, an upsert: two publishes of `name` at once (two processes) both
        # write it, the later one's positions last, neither refused for the other's row
        # (an update then an insert would let both insert, the second one failing)
        upsert = (pg_insert if self.postgres else sqlite_insert)(layouts_t).values(
            tenant=self._owner(), name=name, **values)
        conn.execute(upsert.on_conflict_do_update(
            index_elements=[layouts_t.c.tenant, layouts_t.c.name], set_=values))

    def layout(self, name: str) -> dict[str, Position]:
        """Where the designer last placed the circles of `name` (by path of uris; {} for
        none)."""
        with self.reader() as conn:
            found = conn.execute(select(layouts_t.c.positions).where(
                self._here(layouts_t), layouts_t.c.name == name)).scalar()
        return dict(found or {})

    def _latest_row(self, name: str):
        """The latest version row of `name` for a start (None: no such template); this
        process's lookup is reused for `latest_ttl` seconds (an upload through this
        process counts at once, one through another process within that time)."""
        return self._latest.get((self.tenant, name), self.latest_ttl,
                                lambda: self._template_row(name))

    def latest_body(self, name: str) -> dict[str, Any] | None:
        row = self._template_row(name)
        return row.body if row else None

    def _template_row(self, name: str, version: int | None = None,
                      tenant: str | None = None):
        """The version row (latest unless named) of this store's tenant (or `tenant`'s).
        Versions never change, so only the id is looked up each time; the row with its
        body is read once per process."""
        values = {"name": name, "version": version, "tenant": tenant or self._owner()}
        found = self._rows(TEMPLATE_ID[version is not None], values)  # an indexed lookup
        if not found:
            return None
        tid = found[0].id
        row = self._template_rows.get(tid)
        if row is None:
            with self.reader() as conn:
                row = conn.execute(select(templates_t).where(templates_t.c.id == tid)).first()
            self._template_rows[tid] = row
        return row

    def _version_id(self, name: str, version: int, tenant: str | None = None) -> int:
        """The row id of a version an instance pins (it exists: versions stay)."""
        row = self._template_row(name, version, tenant)
        if row is None:
            raise NotFound(N_("no template '%(name)s' version %(version)s", name=name,
                              version=version))
        return row.id

    def template_versions(self) -> dict[str, list[int]]:
        with self.reader() as conn:
            rows = conn.execute(select(templates_t.c.name, templates_t.c.version)
                                .where(self._listed(templates_t))
                                .order_by(templates_t.c.name, templates_t.c.version)).all()
        out: dict[str, list[int]] = {}
        for name, version in rows:
            out.setdefault(name, []).append(version)
        return out

    # ------------------------------------------------------------- retirement
    def retire_template(self, name: str, by: str | None = None) -> bool:
        """Retire `name` (every version): no new starts, running instances go on. False
        when it was retired already; NotFound for an unknown name."""
        self._known(name)
        try:
            with self.db.begin() as conn:
                conn.execute(insert(retired_t).values(tenant=self._owner(), name=name,
                                                      retired_at=self.clock(), retired_by=by))
        except IntegrityError:  # retired already (perhaps at the same moment)
            return False
        finally:
            self._retired = None
        return True

    def restore_template(self, name: str) -> bool:
        """Let `name` be started again. False when it was not retired; NotFound for an
        unknown name."""
        self._known(name)
        with self.db.begin() as conn:
            gone = conn.execute(delete(retired_t).where(self._here(retired_t),
                                                        retired_t.c.name == name)).rowcount
        self._retired = None
        return bool(gone)

    def retired_templates(self) -> frozenset[str]:
        """The names of the retired templates, as stored now."""
        with self.reader() as conn:
            names = frozenset(conn.execute(select(retired_t.c.name)
                                           .where(self._here(retired_t))).scalars())
        self._retired = (names, time.monotonic() + self.retired_ttl)
        return names

    def is_retired(self, name: str) -> bool:
        """Whether `name` is retired; this process's reading is reused for `retired_ttl`
        seconds (a retirement in this process counts at once, one in another process
        within that time)."""
        hit = self._retired
        if hit is None or hit[1] <= time.monotonic():
            return name in self.retired_templates()
        return name in hit[0]

    def startable_templates(self, may: Callable[[dict[str, Any]], bool] | None = None
                            ) -> list[tuple[str, int, Template]]:
        """(name, latest version, Template) of every template that can be started, by
        name: retired ones are left out, and so are those whose latest body `may` refuses
        (who may start what is `bpflow.access.may_start`)."""
        retired = self.retired_templates()
        out = []
        for name in sorted(self.template_versions()):
            if name in retired:
                continue
            row = self._template_row(name)
            if row is None or (may is not None and not may(row.body)):
                continue
            version, template = self.template(name, row.version)
            out.append((name, version, template))
        return out

    def _known(self, name: str) -> None:
        if self._template_row(name) is None:
            raise NotFound(N_("no template '%(name)s'", name=name))

    def locked_versions(self, name: str) -> set[int]:
        """Versions of `name` that instances use, as their own or nested (and so can never
        change)."""
        own = select(instances_t.c.version).where(self._here(instances_t),
                                                  instances_t.c.template == name)
        nested = (select(templates_t.c.version)
                  .join(pinned_t, pinned_t.c.template_id == templates_t.c.id)
                  .where(self._here(templates_t), templates_t.c.name == name))
        with self.reader() as conn:
            return set(conn.execute(own.union(nested)).scalars())

    def template(self, name: str, version: int | None = None) -> tuple[int, Template]:
        """(version, Template); nested templates resolved at their latest versions."""
        row = self._template_row(name, version)
        if row is None:
            raise NotFound(N_("no template '%(name)s'", name=name) if not version else
                           N_("no template '%(name)s' version %(version)s", name=name,
                              version=version))
        template, _ = self._build(row, None)
        return row.version, template

    def _built(self, row) -> Template | None:
        """The Template of a version row at the latest nested versions, if it was built
        already (None: building it means an analysis)."""
        key = (row.id, tuple(sorted(self._latest_pins(row.body, row.tenant).items())))
        return self._templates.get(key)

    def _build(self, row, pinned: dict[str, int] | None) -> tuple[Template, dict[str, int]]:
        """The Template of a version row with nested templates at `pinned` versions; with
        None, at their latest versions, which are returned so an instance can pin them."""
        if pinned is None:
            pinned = self._latest_pins(row.body, row.tenant, keep=not row.sandbox)
        pins = tuple(sorted(pinned.items()))
        if row.sandbox:
            return self._tried_template(row, pinned, pins), dict(pinned)
        key = (row.id, pins)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = self._analysed(row, pinned)
        return template, dict(pinned)

    def _tried_template(self, row, pinned: dict[str, int],
                        pins: tuple[tuple[str, int], ...]) -> Template:
        """The Template of a sandbox's row (SPEC §16 "Try it"). Such a row is replaced at
        each start, and on SQLite its id may be given again to the next row: the Template
        is kept by the row's `digest`, a token new at each start, and only for the last
        `TRIED_KEPT` sandboxes this process drove (what it forgets, it reads again)."""
        key = (row.id, row.digest, pins)  # a row of before the token: its id tells it
        with self._lock:
            template = self._tried.get(key)
            if template is not None:
                self._tried.move_to_end(key)
                return template
        template = self._analysed(row, pinned)
        with self._lock:
            self._tried[key] = template
            while len(self._tried) > TRIED_KEPT:
                _, gone = self._tried.popitem(last=False)
                self._evaluating.pop(id(gone), None)
        return template

    def _analysed(self, row, pinned: dict[str, int]) -> Template:
        """The analysis of a version row's body, nested templates at `pinned` versions."""
        def resolve(name: str) -> dict[str, Any] | None:  # in the version's tenant
            nested = self._template_row(name, pinned.get(name), row.tenant)
            return nested.body if nested is not None else None

        report = analyze(row.body, resolve)
        if report.template is None:
            raise DefinitionError(report.errors)
        return report.template

    def _latest_pins(self, body: dict[str, Any], tenant: str,
                     keep: bool = True) -> dict[str, int]:
        """Latest version of every template of `tenant` nested (transitively) in `body`
        (`keep`: remember `body`'s nested names, a stored version's)."""
        pins: dict[str, int] = {}
        todo = list(self._nested(body) if keep else nested_names(body))
        while todo:
            name = todo.pop()
            if name in pins:
                continue
            row = self._template_row(name, None, tenant)
            if row is not None:
                pins[name] = row.version
                todo.extend(self._nested(row.body))
        return pins

    def _nested(self, body: dict[str, Any]) -> frozenset[str]:
        """`_nested_names` of a stored body (they never change: remembered by identity)."""
        key = id(body)
        hit = self._nested_cache.get(key)
        if hit is None or hit[0] is not body:
            hit = self._nested_cache[key] = (body, frozenset(nested_names(body)))
        return hit[1]

    def import_dir(self, folder, only_new: bool = False) -> list[tuple[str, int, bool]]:
        """Load every `*.json` of `folder` as template versions. All files are checked
        first (nested ones resolved among them), so nothing is stored unless all are good;
        problems name their file. With `only_new` (the app's start-up import), a template
        whose name is known already is left as it is (what an admin uploaded stays the
        latest version): only unknown names are added."""
        bodies: dict[str, tuple[Path, dict[str, Any]]] = {}
        for path in sorted(Path(folder).glob("*.json")):
            try:
                body = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}: not readable JSON ({exc})") from exc
            if not isinstance(body, dict) or not isinstance(body.get("name"), str):
                raise ValueError(f"{path}: not a template (an object with a name)")
            if body["name"] in bodies:
                raise ValueError(f"{path}: template '{body['name']}' is also defined in"
                                 f" {bodies[body['name']][0]}")
            bodies[body["name"]] = (path, body)
        kept: list[tuple[str, int, bool]] = []
        if only_new:
            for name in list(bodies):
                row = self._template_row(name)
                if row is not None:
                    del bodies[name]
                    kept.append((name, row.version, False))

        def resolve(name: str) -> dict[str, Any] | None:
            return bodies[name][1] if name in bodies else self.latest_body(name)

        for path, body in bodies.values():
            report = analyze(body, resolve)
            if not report.valid:
                raise DefinitionError([{**e, "message": N_("%(where)s: %(problem)s",
                                                          where=path.name,
                                                          problem=e["message"])}
                                       for e in report.errors])
        done = kept
        pending = {name: body for name, (_, body) in bodies.items()}
        while pending:  # nested templates first, so each upload resolves its names
            ready = [n for n, b in pending.items() if not nested_names(b) & set(pending)]
            for name in ready or list(pending)[:1]:
                version, created = self.put_template(pending.pop(name))
                done.append((name, version, created))
        return done


def nested_names(body: Any) -> set[str]:
    """Names of templates nested by name anywhere in `body`."""
    found: set[str] = set()
    if isinstance(body, dict):
        action = body.get("action")
        if isinstance(action, dict) and action.get("type") == "flow" and \
                isinstance(action.get("template"), str):
            found.add(action["template"])
        for value in body.values():
            found |= nested_names(value)
    elif isinstance(body, list):
        for value in body:
            found |= nested_names(value)
    return found
