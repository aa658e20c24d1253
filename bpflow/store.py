"""The SQL store: every engine transition persisted atomically, one writer per instance.

An operation runs against the instance in memory, then one transaction writes the
instance row with a compare-and-set on `lock_version`, the changed circle rows and the
new history events: all of it commits, or none of it. A lost race is re-run on fresh
state (where a used bookmark is refused), so updates are never lost nor applied twice,
across threads, processes and machines. Instances this process wrote last are kept in a
small cache and re-read only when the compare-and-set says someone else wrote since.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import bindparam, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from bpflow.db import make_engine
from bpflow.errors import Conflict, NotFound
from bpflow.fastpath import CIRCLE_COLUMNS, Lost, SqliteWriter, Write
from bpflow.models import (
    CircleStateRow,
    EventRow,
    InstanceRow,
    InstanceTemplate,
    TemplateVersion,
    User,
)
from bpflow.security import check_password, derive, hash_password, load_secret
from engine.analysis import analyze
from engine.errors import BpflowError, DefinitionError, TransitionError
from engine.instance import WAITING, CircleRun, Event, Instance
from engine.model import Template
from engine.runtime import Engine, utcnow

T = TypeVar("T")
ROLES = ("user", "approver", "admin")
instances_t = InstanceRow.__table__
circles_t = CircleStateRow.__table__
events_t = EventRow.__table__
templates_t = TemplateVersion.__table__
pinned_t = InstanceTemplate.__table__
users_t = User.__table__


@dataclass
class _Loaded:
    inst: Instance
    lock_version: int
    circles: dict[str, tuple[Any, ...]]  # circle rows as last written, to write only changes


def digest(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class Store:
    """Templates, instances, users and history in one SQL database."""

    def __init__(self, url: str | None = None, *, secret: bytes | None = None,
                 clock: Callable[[], datetime] = utcnow,
                 worker_actions: Iterable[str] = ("http", "mail", "approval"),
                 cache_size: int = 20000):
        self.db = make_engine(url)
        self.postgres = self.db.dialect.name == "postgresql"
        self.secret = secret or load_secret()
        self.clock = clock
        self.engine = Engine(derive(self.secret, "bookmarks"), clock)
        self.worker_actions = frozenset(worker_actions)
        self._templates: dict[tuple[int, tuple[tuple[str, int], ...]], Template] = {}
        self._cache: OrderedDict[str, _Loaded] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._sql = _Statements()
        self._template_rows: dict[int, Any] = {}
        self._nested_cache: dict[int, tuple[Any, frozenset[str]]] = {}
        self._on_due: Callable[[], None] | None = None
        database = self.db.url.database
        self._fast = (SqliteWriter(database) if self.db.dialect.name == "sqlite"
                      and database not in (None, "", ":memory:") else None)

    def on_due(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` after a write of this store leaves work due now (the worker of
        this process listens, so it does not wait for its next poll)."""
        self._on_due = callback

    def _notify(self, due_at: datetime | None) -> None:
        if self._on_due is not None and due_at is not None and due_at <= self.clock():
            self._on_due()

    def close(self) -> None:
        if self._fast is not None:
            self._fast.close()
        self.db.dispose()

    def _read(self):
        """A connection for reads (SQLite: a deferred transaction, no write lock)."""
        return self.db.connect().execution_options(sqlite_begin="DEFERRED")

    # ------------------------------------------------------------- templates
    def put_template(self, body: Any) -> tuple[int, bool]:
        """Store `body` as a new version unless identical to the latest: (version, created)."""
        report = analyze(body, self.latest_body)
        if not report.valid:
            raise DefinitionError(report.errors)
        name, fingerprint = body["name"], digest(body)
        for _ in range(5):
            with self.db.begin() as conn:
                latest = conn.execute(
                    select(templates_t.c.version, templates_t.c.digest)
                    .where(templates_t.c.name == name)
                    .order_by(templates_t.c.version.desc()).limit(1)).first()
                if latest is not None and latest.digest == fingerprint:
                    return latest.version, False
                version = latest.version + 1 if latest else 1
                try:
                    conn.execute(insert(templates_t).values(
                        name=name, version=version, body=body, digest=fingerprint,
                        created_at=self.clock()))
                except IntegrityError:  # a concurrent upload took this number
                    conn.rollback()
                    continue
                return version, True
        raise Conflict(f"template '{name}' is being uploaded concurrently; try again")

    def latest_body(self, name: str) -> dict[str, Any] | None:
        row = self._template_row(name)
        return row.body if row else None

    def _template_row(self, name: str, version: int | None = None):
        """The version row (latest unless named). Versions never change, so only the id
        is looked up each time; the row with its body is read once per process."""
        if self._fast is not None:  # an indexed lookup: sqlite3 costs a tenth of SQLAlchemy
            tid = self._fast.scalar(
                "SELECT id FROM templates WHERE name = ? ORDER BY version DESC LIMIT 1"
                if version is None else
                "SELECT id FROM templates WHERE name = ? AND version = ?",
                (name,) if version is None else (name, version))
            if tid is None:
                return None
            row = self._template_rows.get(tid)
            if row is not None:
                return row
        q = self._sql.template_id if version is None else self._sql.template_version_id
        with self._read() as conn:
            tid = conn.execute(q, {"b_name": name, "b_version": version}).scalar()
            if tid is None:
                return None
            row = self._template_rows.get(tid)
            if row is None:
                row = conn.execute(select(templates_t).where(templates_t.c.id == tid)).first()
                self._template_rows[tid] = row
            return row

    def template_versions(self) -> dict[str, list[int]]:
        with self._read() as conn:
            rows = conn.execute(select(templates_t.c.name, templates_t.c.version)
                                .order_by(templates_t.c.name, templates_t.c.version)).all()
        out: dict[str, list[int]] = {}
        for name, version in rows:
            out.setdefault(name, []).append(version)
        return out

    def locked_versions(self, name: str) -> set[int]:
        """Versions of `name` that instances use, as their own or nested (and so can never
        change)."""
        own = select(instances_t.c.version).where(instances_t.c.template == name)
        nested = (select(templates_t.c.version)
                  .join(pinned_t, pinned_t.c.template_id == templates_t.c.id)
                  .where(templates_t.c.name == name))
        with self._read() as conn:
            return set(conn.execute(own.union(nested)).scalars())

    def template(self, name: str, version: int | None = None) -> tuple[int, Template]:
        """(version, Template); nested templates resolved at their latest versions."""
        row = self._template_row(name, version)
        if row is None:
            raise NotFound(f"no template '{name}'" + (f" version {version}" if version else ""))
        template, _ = self._build(row, None)
        return row.version, template

    def _build(self, row, pinned: dict[str, int] | None) -> tuple[Template, dict[str, int]]:
        """The Template of a version row with nested templates at `pinned` versions; with
        None, at their latest versions, which are returned so an instance can pin them."""
        if pinned is None:
            pinned = self._latest_pins(row.body)
        key = (row.id, tuple(sorted(pinned.items())))
        template = self._templates.get(key)
        if template is None:
            def resolve(name: str) -> dict[str, Any] | None:
                nested = self._template_row(name, pinned.get(name))
                return nested.body if nested is not None else None

            report = analyze(row.body, resolve)
            if report.template is None:
                raise DefinitionError(report.errors)
            template = self._templates[key] = report.template
        return template, dict(pinned)

    def _latest_pins(self, body: dict[str, Any]) -> dict[str, int]:
        """Latest version of every template nested (transitively) in `body`."""
        pins: dict[str, int] = {}
        todo = list(self._nested(body))
        while todo:
            name = todo.pop()
            if name in pins:
                continue
            row = self._template_row(name)
            if row is not None:
                pins[name] = row.version
                todo.extend(self._nested(row.body))
        return pins

    def _nested(self, body: dict[str, Any]) -> frozenset[str]:
        """`_nested_names` of a stored body (they never change: remembered by identity)."""
        key = id(body)
        hit = self._nested_cache.get(key)
        if hit is None or hit[0] is not body:
            hit = self._nested_cache[key] = (body, frozenset(_nested_names(body)))
        return hit[1]

    def import_dir(self, folder) -> list[tuple[str, int, bool]]:
        """Load every `*.json` of `folder` as template versions. All files are checked
        first (nested ones resolved among them), so nothing is stored unless all are good;
        problems name their file."""
        from pathlib import Path
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

        def resolve(name: str) -> dict[str, Any] | None:
            return bodies[name][1] if name in bodies else self.latest_body(name)

        for path, body in bodies.values():
            report = analyze(body, resolve)
            if not report.valid:
                raise DefinitionError([{**e, "message": f"{path.name}: {e['message']}"}
                                       for e in report.errors])
        done: list[tuple[str, int, bool]] = []
        pending = {name: body for name, (_, body) in bodies.items()}
        while pending:  # nested templates first, so each upload resolves its names
            ready = [n for n, b in pending.items() if not _nested_names(b) & set(pending)]
            for name in ready or list(pending)[:1]:
                version, created = self.put_template(pending.pop(name))
                done.append((name, version, created))
        return done

    # ---------------------------------------------------------------- users
    def add_user(self, username: str, password: str, roles: Iterable[str] = ("user",)) -> int:
        roles = sorted(set(roles))
        bad = [r for r in roles if r not in ROLES]
        if bad or not roles:
            raise ValueError(f"roles must be among {', '.join(ROLES)}")
        if not username or len(username) > 100:
            raise ValueError("a username has 1 to 100 characters")
        try:
            with self.db.begin() as conn:
                return conn.execute(insert(users_t).values(
                    username=username, password_hash=hash_password(password), roles=roles,
                    created_at=self.clock())).inserted_primary_key[0]
        except IntegrityError as exc:
            raise ValueError(f"user '{username}' already exists") from exc

    def has_users(self) -> bool:
        with self._read() as conn:
            return conn.execute(select(users_t.c.id).limit(1)).first() is not None

    def user(self, username: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(select(users_t).where(users_t.c.username == username)).first()
        return {"id": row.id, "username": row.username, "roles": list(row.roles)} if row else None

    def authenticate(self, username: str, password: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(select(users_t).where(users_t.c.username == username)).first()
        if row is None:
            check_password(password, hash_password("timing"))  # same cost either way
            return None
        if not check_password(password, row.password_hash):
            return None
        return {"id": row.id, "username": row.username, "roles": list(row.roles)}

    # ------------------------------------------------------------ instances
    def start(self, name: str, inputs: dict[str, Any] | None = None,
              user: dict[str, Any] | None = None, version: int | None = None) -> Instance:
        inst, circles, values, rows = self._starting(name, inputs, user, version)
        if self._fast is not None:
            self._fast.insert(*rows)
        else:
            values_, circle_rows, event_rows, pinned = rows
            with self.db.begin() as conn:
                conn.execute(insert(instances_t).values(values_))
                conn.execute(insert(circles_t), circle_rows)
                if pinned:
                    conn.execute(insert(pinned_t), pinned)
                if event_rows:
                    conn.execute(self._sql.event_insert, event_rows)
        return self._started(inst, circles, values)

    async def start_async(self, name: str, inputs: dict[str, Any] | None = None,
                          user: dict[str, Any] | None = None,
                          version: int | None = None) -> Instance:
        """`start` for an event loop: the commit is awaited, not blocked on (SQLite's
        group commit); other databases run `start` on a thread."""
        if self._fast is None:
            return await asyncio.to_thread(self.start, name, inputs, user, version)
        inst, circles, values, rows = self._starting(name, inputs, user, version)
        await self._fast.run(self._fast.insert_job(*rows))
        return self._started(inst, circles, values)

    def _starting(self, name: str, inputs: dict[str, Any] | None,
                  user: dict[str, Any] | None, version: int | None):
        """A new instance and the rows that store it (written by the caller)."""
        row = self._template_row(name, version)
        if row is None:
            raise NotFound(f"no template '{name}'" + (f" version {version}" if version else ""))
        template, nested = self._build(row, None)
        user = user or {}
        inst = self.engine.start(template, inputs, user, version=row.version,
                                 actor=user.get("username"))
        events = inst.drain_events()
        circles = {cid: _snapshot(run) for cid, run in inst.circles.items()}
        values = {"id": inst.id, "template_id": row.id, "template": name,
                  "version": row.version, "nested_versions": nested, "user_id": user.get("id"),
                  "user": user, "status": inst.status, "reason": inst.reason,
                  "inputs": inst.inputs, "variables": self.engine.variables(inst),
                  "seq": inst.seq, "lock_version": 1, "due_at": self._due_at(inst),
                  "created_at": inst.created_at, "updated_at": inst.updated_at}
        circle_rows = [_circle_row(inst.id, cid, d) for cid, d in circles.items()]
        pinned = [{"instance_id": inst.id, "template_id": self._template_row(n, v).id}
                  for n, v in nested.items()]
        return inst, circles, values, (values, circle_rows,
                                       self._event_rows(inst.id, events), pinned)

    def _started(self, inst: Instance, circles: dict[str, tuple[Any, ...]],
                 values: dict[str, Any]) -> Instance:
        self._keep(_Loaded(inst, 1, circles))
        self._notify(values["due_at"])
        return inst

    def get(self, instance_id: str) -> Instance:
        """A fresh copy of the instance as stored."""
        return self._load(instance_id).inst

    def peek(self, instance_id: str) -> Instance:
        """The instance for what never changes in it (its owner, its template): the
        cached copy when there is one, else it is read and cached. Its state may be
        stale and must not be changed; use `apply` for that."""
        with self._lock:
            loaded = self._cache.get(instance_id)
        return loaded.inst if loaded is not None else self._peeked(self._load(instance_id))

    async def peek_async(self, instance_id: str) -> Instance:
        """`peek` for an event loop (a read the cache cannot serve runs on a thread)."""
        with self._lock:
            loaded = self._cache.get(instance_id)
        if loaded is not None:
            return loaded.inst
        return self._peeked(await asyncio.to_thread(self._load, instance_id))

    def _peeked(self, loaded: _Loaded) -> Instance:
        with self._lock:  # a step that finished meanwhile keeps its newer copy
            return self._cache.setdefault(loaded.inst.id, loaded).inst

    def apply(self, instance_id: str, op: Callable[[Engine, Instance], T],
              optimistic: int = 3) -> T:
        """Run `op` on the instance and persist what it did, as one atomic step.

        First optimistically (the cached or freshly read state, then a compare-and-set);
        after `optimistic` lost races, under a row lock held from read to write, so a
        busy instance still makes progress (one writer at a time, never a lost update).
        """
        fresh = False
        for _ in range(optimistic):
            loaded = self._take(instance_id) if not fresh else None
            if loaded is None:
                loaded, fresh = self._load(instance_id), True
            try:
                value = op(self.engine, loaded.inst)
            except BpflowError:
                if fresh:
                    raise  # refused on the stored state: a real refusal
                fresh = True  # our copy may be stale: decide on the stored state
                continue
            events = loaded.inst.drain_events()
            try:
                self._save(loaded, events)
            except Lost:
                fresh = True
                continue
            self._keep(loaded)
            return value
        return self._apply_locked(instance_id, op)

    async def apply_async(self, instance_id: str, op: Callable[[Engine, Instance], T],
                          optimistic: int = 3) -> T:
        """`apply` for an event loop: `op` runs on the loop, the commit is awaited (SQLite's
        group commit) and a read the cache cannot serve runs on a thread. Other databases
        run `apply` on a thread."""
        if self._fast is None:
            return await asyncio.to_thread(self.apply, instance_id, op, optimistic)
        fresh = False
        for _ in range(optimistic):
            loaded = self._take(instance_id) if not fresh else None
            if loaded is None:
                loaded, fresh = await asyncio.to_thread(self._load, instance_id), True
            try:
                value = op(self.engine, loaded.inst)
            except BpflowError:
                if fresh:
                    raise
                fresh = True
                continue
            write = self._prepare(loaded, loaded.inst.drain_events())
            if await self._fast.run(self._fast.save_job([write], self._event_rows)):
                fresh = True  # lost the compare-and-set
                continue
            self._saved([write])
            self._keep(loaded)
            return value
        return await asyncio.to_thread(self._apply_locked, instance_id, op)

    def _apply_locked(self, instance_id: str, op: Callable[[Engine, Instance], T]) -> T:
        with self.db.begin() as conn:  # SQLite: BEGIN IMMEDIATE already excludes writers
            loaded = self._load(instance_id, conn, lock=True)
            value = op(self.engine, loaded.inst)
            self._save(loaded, loaded.inst.drain_events(), conn)
        self._keep(loaded)
        return value

    def apply_many(self, ids: list[str], op: Callable[[Engine, Instance], T]) -> dict[str, Any]:
        """`apply` for many instances with one transaction (the worker's timer batches):
        each value, or the BpflowError that refused it, by id. An instance whose cached
        copy was stale or whose compare-and-set lost goes through `apply` on its own."""
        results: dict[str, Any] = {}
        writes: list[Write] = []
        alone: list[str] = []
        cached = {iid: loaded for iid in ids if (loaded := self._take(iid)) is not None}
        stored = self._load_many([iid for iid in ids if iid not in cached])
        for iid in ids:
            loaded = cached.get(iid) or stored.get(iid)
            if loaded is None:
                results[iid] = NotFound(f"no instance '{iid}'")
                continue
            try:
                results[iid] = op(self.engine, loaded.inst)
            except BpflowError:
                alone.append(iid)  # decided again on its own, on the stored state
                continue
            writes.append(self._prepare(loaded, loaded.inst.drain_events()))
        lost = self._save_all(writes) if writes else set()
        for w in writes:
            if w.loaded.inst.id not in lost:
                self._keep(w.loaded)
        for iid in alone + sorted(lost):
            try:
                results[iid] = self.apply(iid, op)
            except BpflowError as exc:
                results[iid] = exc
        return results

    def complete(self, instance_id: str, cid: str, bookmark: str, result: Any = None,
                 actor: str | None = None) -> Instance:
        return self.apply(instance_id, lambda e, i: (e.complete(i, cid, bookmark, result, actor),
                                                     i)[1])

    def fail(self, instance_id: str, cid: str, bookmark: str, reason: str,
             actor: str | None = None) -> Instance:
        return self.apply(instance_id, lambda e, i: (e.fail(i, cid, bookmark, reason, actor),
                                                     i)[1])

    def reset(self, instance_id: str, cid: str, scope: str = "self", levels: int | None = None,
              actor: str | None = None) -> Instance:
        return self.apply(instance_id, lambda e, i: (e.reset(i, cid, scope, levels, actor), i)[1])

    def suspend(self, instance_id: str, actor: str | None = None) -> Instance:
        return self.apply(instance_id, lambda e, i: (e.suspend(i, actor), i)[1])

    def resume(self, instance_id: str, actor: str | None = None) -> Instance:
        return self.apply(instance_id, lambda e, i: (e.resume(i, actor), i)[1])

    def abort(self, instance_id: str, reason: str = "aborted",
              actor: str | None = None) -> Instance:
        return self.apply(instance_id, lambda e, i: (e.abort(i, reason, actor), i)[1])

    def tick(self, instance_id: str) -> Instance:
        return self.apply(instance_id, lambda e, i: (e.tick(i), i)[1])

    def list_instances(self, user_id: int | None = None, template: str | None = None,
                       status: str | None = None, limit: int = 50,
                       offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Instances newest first (of one user unless `user_id` is None) and the total."""
        cond = []
        if user_id is not None:
            cond.append(instances_t.c.user_id == user_id)
        if template:
            cond.append(instances_t.c.template == template)
        if status:
            cond.append(instances_t.c.status == status)
        cols = [instances_t.c[k] for k in ("id", "template", "version", "status", "reason",
                                           "user", "created_at", "updated_at")]
        q = (select(*cols).where(*cond)
             .order_by(instances_t.c.created_at.desc(), instances_t.c.id).limit(limit)
             .offset(offset))
        with self._read() as conn:
            rows = conn.execute(q).mappings().all()
            total = conn.execute(select(func.count()).select_from(instances_t)
                                 .where(*cond)).scalar()
        return [dict(r) for r in rows], total

    def stats(self, template: str, user_id: int | None = None) -> dict[str, Any]:
        """Busybee's InstanceCountState: circles per state, instances per status."""
        cond = [instances_t.c.template == template]
        if user_id is not None:
            cond.append(instances_t.c.user_id == user_id)
        circles: dict[str, dict[str, int]] = {}
        with self._read() as conn:
            q = (select(circles_t.c.circle, circles_t.c.state, func.count())
                 .join(instances_t, instances_t.c.id == circles_t.c.instance_id)
                 .where(*cond).group_by(circles_t.c.circle, circles_t.c.state))
            for cid, state, n in conn.execute(q):
                circles.setdefault(cid, {s: 0 for s in ("waiting", "success", "failure",
                                                        "skipped")})[state] = n
            statuses = dict(conn.execute(select(instances_t.c.status, func.count())
                                         .where(*cond).group_by(instances_t.c.status)).all())
        return {"circles": circles, "instances": statuses}

    def latest_instance(self, template: str, user_id: int,
                        statuses: Iterable[str]) -> str | None:
        """The id of the user's newest instance of `template` in one of `statuses`."""
        q = (select(instances_t.c.id)
             .where(instances_t.c.template == template, instances_t.c.user_id == user_id,
                    instances_t.c.status.in_(list(statuses)))
             .order_by(instances_t.c.created_at.desc()).limit(1))
        with self._read() as conn:
            return conn.execute(q).scalar()

    def history(self, instance_id: str) -> list[dict[str, Any]]:
        q = select(events_t).where(events_t.c.instance_id == instance_id).order_by(
            events_t.c.seq)
        with self._read() as conn:
            rows = conn.execute(q).all()
        return [Event(r.seq, r.at, r.kind, r.actor, r.circle, r.before, r.after,
                      r.data or {}).to_dict() for r in rows]

    # --------------------------------------------------------------- worker
    def claim_due(self, owner: str, limit: int = 20, lease: float = 30.0) -> list[str]:
        """Lease up to `limit` instances with due work; a crashed holder's lease expires."""
        now = self.clock()
        q = (select(instances_t.c.id)
             .where(instances_t.c.due_at <= now,
                    or_(instances_t.c.lease_until.is_(None), instances_t.c.lease_until < now))
             .order_by(instances_t.c.due_at).limit(limit))
        if self.postgres:
            q = q.with_for_update(skip_locked=True)
        with self.db.begin() as conn:
            ids = list(conn.execute(q).scalars())
            if ids:
                conn.execute(update(instances_t).where(instances_t.c.id.in_(ids)).values(
                    lease_owner=owner, lease_until=now + timedelta(seconds=lease)))
        return ids

    def renew(self, instance_id: str, owner: str, lease: float) -> bool:
        """Extend `owner`'s lease before a long step; False when it was lost."""
        with self.db.begin() as conn:
            return conn.execute(update(instances_t).where(
                instances_t.c.id == instance_id, instances_t.c.lease_owner == owner).values(
                lease_until=self.clock() + timedelta(seconds=lease))).rowcount == 1

    def release(self, ids: str | list[str], owner: str) -> None:
        """End `owner`'s leases on these instances (one id or many)."""
        ids = [ids] if isinstance(ids, str) else ids
        if not ids:
            return
        with self.db.begin() as conn:
            conn.execute(update(instances_t).where(instances_t.c.id.in_(ids),
                                                   instances_t.c.lease_owner == owner)
                         .values(lease_owner=None, lease_until=None))

    def next_due(self) -> datetime | None:
        with self._read() as conn:
            return conn.execute(select(func.min(instances_t.c.due_at))).scalar()

    def _due_at(self, inst: Instance) -> datetime | None:
        """When a worker should look at the instance next: now if a ready circle runs on
        the worker (an HTTP call), else the engine's next retry, timer or timeout."""
        nodes = inst.template.plan.nodes
        for cid in self.engine.ready(inst):
            if nodes[cid].circle.box.action_type in self.worker_actions and \
                    _worker_may_run(nodes[cid].circle, inst.circles[cid].pending):
                return inst.circles[cid].ready_at or self.clock()
        return self.engine.wake_at(inst)

    # ------------------------------------------------------------ internals
    def _take(self, instance_id: str) -> _Loaded | None:
        with self._lock:
            return self._cache.pop(instance_id, None)

    def _keep(self, loaded: _Loaded) -> None:
        if loaded.inst.status in ("completed", "terminated"):
            return  # rarely touched again (a reset reads it back): not worth the memory
        with self._lock:
            self._cache[loaded.inst.id] = loaded
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _load(self, instance_id: str, conn=None, lock: bool = False) -> _Loaded:
        loaded = self._load_many([instance_id], conn, lock)
        if not loaded:
            raise NotFound(f"no instance '{instance_id}'")
        return loaded[instance_id]

    def _load_many(self, ids: list[str], conn=None, lock: bool = False) -> dict[str, _Loaded]:
        """Instances as stored (two queries however many); missing ids are left out."""
        if conn is None:
            with self._read() as conn:
                return self._load_many(ids, conn)
        q = select(instances_t).where(instances_t.c.id.in_(ids))
        if lock and self.postgres:
            q = q.with_for_update()
        rows = conn.execute(q).all()
        circle_rows: dict[str, list] = {}
        if rows:
            for r in conn.execute(select(circles_t).where(circles_t.c.instance_id.in_(ids))):
                circle_rows.setdefault(r.instance_id, []).append(r)
        out = {}
        for row in rows:
            trow = self._template_rows.get(row.template_id)
            if trow is None:
                trow = conn.execute(select(templates_t).where(
                    templates_t.c.id == row.template_id)).first()
                self._template_rows[row.template_id] = trow
            template, _ = self._build(trow, dict(row.nested_versions))
            inst = Instance(
                id=row.id, template=template, status=row.status, inputs=row.inputs,
                user=row.user, circles={r.circle: CircleRun(**{k: getattr(r, k)
                                                               for k in CIRCLE_COLUMNS})
                                        for r in circle_rows.get(row.id, [])},
                created_at=row.created_at, updated_at=row.updated_at, version=row.version,
                reason=row.reason, seq=row.seq)
            out[row.id] = _Loaded(inst, row.lock_version,
                                  {cid: _snapshot(run) for cid, run in inst.circles.items()})
        return out

    def _prepare(self, loaded: _Loaded, events: list[Event]) -> Write:
        inst = loaded.inst
        circles = {cid: _snapshot(run) for cid, run in inst.circles.items()}
        changed = [_circle_row(inst.id, cid, d) for cid, d in circles.items()
                   if loaded.circles.get(cid) != d]
        row = {"id": inst.id, "lock": loaded.lock_version, "status": inst.status,
               "reason": inst.reason, "seq": inst.seq, "variables": self.engine.variables(inst),
               "due_at": self._due_at(inst), "next_lock": loaded.lock_version + 1,
               "updated_at": inst.updated_at}
        return Write(loaded, circles, row, changed, events)

    def _save_all(self, writes: list[Write], conn=None) -> set[str]:
        """Write every prepared step in one transaction; returns the ids whose
        compare-and-set lost (nothing of those is written)."""
        if conn is not None:
            lost = self._write_all(conn, writes)
        elif self._fast is not None:
            lost = self._fast.save_all(writes, self._event_rows)
        else:
            with self.db.begin() as conn:
                lost = self._write_all(conn, writes)
        self._saved([w for w in writes if w.loaded.inst.id not in lost])
        return lost

    def _saved(self, writes: list[Write]) -> None:
        """Bring the loaded copies of committed writes up to what is stored."""
        for w in writes:
            w.loaded.lock_version += 1
            w.loaded.circles = w.circles
            self._notify(w.row["due_at"])

    def _save(self, loaded: _Loaded, events: list[Event], conn=None) -> None:
        if self._save_all([self._prepare(loaded, events)], conn):
            raise Lost()

    def _write_all(self, conn, writes: list[Write]) -> set[str]:
        lost = set()
        for w in writes:
            if conn.execute(self._sql.cas, _prefixed(w.row)).rowcount != 1:
                lost.add(w.row["id"])
                continue
            if w.changed:
                conn.execute(self._sql.circle_update, [_prefixed(c) for c in w.changed])
            if w.events:  # built here, inside the transaction, after the state rows
                conn.execute(self._sql.event_insert, self._event_rows(w.row["id"], w.events))
        return lost

    @staticmethod
    def _event_rows(instance_id: str, events: list[Event]) -> list[dict[str, Any]]:
        return [{"instance_id": instance_id, "seq": e.seq, "at": e.at, "kind": e.kind,
                 "actor": e.actor, "circle": e.circle, "before": e.before, "after": e.after,
                 "data": e.data} for e in events]


class _Statements:
    """The hot path's statements, built once (SQLAlchemy then reuses their compilation)."""

    def __init__(self) -> None:
        b = bindparam
        self.cas = (update(instances_t)
                    .where(instances_t.c.id == b("b_id"),
                           instances_t.c.lock_version == b("b_lock"))
                    .values(status=b("b_status"), reason=b("b_reason"), seq=b("b_seq"),
                            variables=b("b_variables"), due_at=b("b_due_at"),
                            lock_version=b("b_next_lock"), updated_at=b("b_updated_at")))
        self.circle_update = (update(circles_t)
                              .where(circles_t.c.instance_id == b("b_instance_id"),
                                     circles_t.c.circle == b("b_circle"))
                              .values({k: b(f"b_{k}") for k in CIRCLE_COLUMNS}))
        self.event_insert = insert(events_t)
        self.template_id = (select(templates_t.c.id).where(templates_t.c.name == b("b_name"))
                            .order_by(templates_t.c.version.desc()).limit(1))
        self.template_version_id = select(templates_t.c.id).where(
            templates_t.c.name == b("b_name"), templates_t.c.version == b("b_version"))


def _snapshot(run: CircleRun) -> tuple[Any, ...]:
    """A circle's stored columns (CIRCLE_COLUMNS order), to spot what a step changed."""
    return (run.state, run.result, run.reason, run.attempts, run.next_attempt_at,
            run.ready_at, run.due_at, run.epoch, run.pending)


def _circle_row(instance_id: str, cid: str, snapshot: tuple[Any, ...]) -> dict[str, Any]:
    return {"instance_id": instance_id, "circle": cid,
            **dict(zip(CIRCLE_COLUMNS, snapshot, strict=True))}


def _worker_may_run(circle, pending: dict[str, Any] | None) -> bool:
    """A worker action runs once its input is there: at once without a form, after the
    form was submitted (staged as pending `form`) otherwise; an action that has started
    (approval mail sent) waits for the outside world."""
    if circle.box.form:
        return pending is not None and set(pending) == {"form"}
    return pending is None


def _prefixed(row: dict[str, Any]) -> dict[str, Any]:
    return {f"b_{k}": v for k, v in row.items()}


def _nested_names(body: Any) -> set[str]:
    """Names of templates nested by name anywhere in `body`."""
    found: set[str] = set()
    if isinstance(body, dict):
        action = body.get("action")
        if isinstance(action, dict) and action.get("type") == "flow" and \
                isinstance(action.get("template"), str):
            found.add(action["template"])
        for value in body.values():
            found |= _nested_names(value)
    elif isinstance(body, list):
        for value in body:
            found |= _nested_names(value)
    return found


def new_id() -> str:
    return uuid.uuid4().hex


__all__ = ["Conflict", "NotFound", "Store", "TransitionError", "WAITING", "new_id"]
