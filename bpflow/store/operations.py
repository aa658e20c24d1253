"""What the operations page reads and what a bulk operation keeps (SPEC §18).

Every list here is one or two statements on the indexes of migrations 0022 and 0023,
however many instances a tenant has: instances matching a filter, newest first, a page at
a time (the total counted up to `COUNT_MAX`); failed circles grouped by template, circle
and reason, read from the `failed_circles` rows triggers keep (`GROUP BY` on their
index); open tasks past their due time. (A template's durations are `bpflow.store.waits`'.)

A bulk operation is one `operations` row and one `operation_items` row per instance,
written together when it is asked for (the instances it matched then, by an
`INSERT ... SELECT`); a worker leases the operation (`claim_operation`) and writes each
item's result with the operation's counts in one transaction (`settle_items`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    and_,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    union_all,
    update,
)

from bpflow.store.accounts import normal_username
from bpflow.store.errors import Conflict, NotFound
from bpflow.store.parts import StoreParts
from bpflow.store.queries import SUMMARY
from bpflow.store.tables import (
    REASON_KEY,
    circles_t,
    events_t,
    failed_circles_t,
    instances_t,
    operation_items_t,
    operations_t,
    users_t,
)
from engine.instance import FAILED, RUNNING, SUSPENDED, WAITING
from engine.messages import N_

COUNT_MAX = 1000  # a list's total is counted up to this ("1000 or more")
FEW = 2000  # circles waiting too long read first (more: instances asked one by one)
OPERATION_MAX = 100_000  # instances one bulk operation takes at most
OPEN = (RUNNING, FAILED, SUSPENDED)  # statuses whose failed circles are incidents
LEAVING = ("circle_succeeded", "circle_failed")  # a circle leaves `waiting`
PENDING, DONE, REFUSED = "pending", "done", "refused"


class Matching(NamedTuple):
    """What a filter reads (`Operations._matching`): from where (the instances, maybe
    joined to a failed circle's row), on what conditions, newest first by what."""

    source: Any
    cond: list[Any]
    order: tuple[Any, ...]


class Operations(StoreParts):
    """The operations page's reads and the bulk operations' rows (part of `Store`)."""

    # ------------------------------------------------------------------ filters
    def _matching(self, f: dict[str, Any]) -> Matching:
        """What a filter (`bpflow.operations.Filter`'s keys) reads: template, version,
        status, starter, started/updated between, waiting on one circle longer than
        `waiting_hours`, a failed `circle` (with its `reason`): the instances joined to
        that failed circle's row, newest first as `ix_failed_circles_list` has them
        (one row each: a circle fails once at a time), or a failed circle's `reason`
        alone (any circle)."""
        i, c, fc = instances_t, circles_t, failed_circles_t
        source: Any = i
        order: tuple[Any, ...] = (i.c.created_at.desc(), i.c.id.desc())
        cond = [self._listed(i)]
        for key in ("template", "version", "status"):
            if f.get(key) is not None:
                cond.append(i.c[key] == f[key])
        if f.get("starter") is not None:
            cond.append(i.c.user_id == select(users_t.c.id).where(
                self._here(users_t), users_t.c.username == normal_username(f["starter"]))
                .scalar_subquery())
        for key, column, op in (("started_after", i.c.created_at, ">="),
                                ("started_before", i.c.created_at, "<"),
                                ("updated_after", i.c.updated_at, ">="),
                                ("updated_before", i.c.updated_at, "<")):
            if f.get(key) is not None:
                cond.append(column >= f[key] if op == ">=" else column < f[key])
        if f.get("waiting_hours") is not None:
            since = self.clock() - timedelta(hours=float(f["waiting_hours"]))
            waiting = [c.c.state == WAITING, c.c.ready_at.is_not(None), c.c.ready_at < since]
            few = self._at_most(select(c.c.instance_id).where(self._here(c), *waiting),
                                FEW)  # its index
            if few is not None:  # the instances of the circles waiting that long, by key
                cond += [i.c.status == RUNNING, i.c.id.in_(few)]
            else:  # many: running instances newest first, each asked by its rows' key
                cond += [i.c.status == RUNNING, exists().where(
                    c.c.instance_id == i.c.id, c.c.tenant == i.c.tenant, *waiting)]
        reason = [] if f.get("reason") is None else _reason_is(fc, f["reason"])
        if f.get("circle") is not None:
            source = i.join(fc, fc.c.instance_id == i.c.id)
            cond += [self._here(fc), fc.c.circle == f["circle"], *reason]
            order = (fc.c.created_at.desc(), fc.c.instance_id.desc())
        elif reason:
            cond.append(i.c.id.in_(select(fc.c.instance_id).where(self._here(fc), *reason)))
        return Matching(source, cond, order)

    def _at_most(self, q: Any, n: int) -> list[Any] | None:
        """The rows of the query of one column if it has at most `n` (it reads `n` + 1 at
        most), else None. (Given as values, not as the query: a planner cannot guess how
        few rows a range of a partial index holds, PostgreSQL's then read every instance.)"""
        with self.reader() as conn:
            found = list(conn.execute(q.limit(n + 1)).scalars())
        return found if len(found) <= n else None

    def operation_instances(self, f: dict[str, Any], limit: int = 50, offset: int = 0
                            ) -> tuple[list[dict[str, Any]], int]:
        """A page of the instances matching `f`, newest first, and their number counted
        up to COUNT_MAX + 1 (more: "COUNT_MAX or more")."""
        source, cond, order = self._matching(f)
        q = (select(*SUMMARY).select_from(source).where(*cond).order_by(*order)
             .limit(limit).offset(offset))
        counted = (select(instances_t.c.id).select_from(source).where(*cond)
                   .limit(COUNT_MAX + 1).subquery())
        with self.reader() as conn:
            rows = conn.execute(q).mappings().all()
            total = conn.execute(select(func.count()).select_from(counted)).scalar_one()
        return [dict(r) for r in rows], int(total)

    # ---------------------------------------------------------------- incidents
    def incidents(self, groups: int = 100, shown: int = 20) -> list[dict[str, Any]]:
        """Failed circles of instances not over, grouped by template, circle and reason,
        the largest groups first: each {"template", "circle", "reason", "count",
        "instances": the newest `shown` ids}. Read from the active rows of
        `failed_circles` (the triggers of migration 0023 keep them): the counts by
        template, circle and `reason_key` from their index; a key as long as REASON_KEY
        (a reason maybe longer) is counted again by the whole reason, from its rows; then
        each group's top of the index."""
        t = failed_circles_t.c
        keys = (t.template, t.circle, t.reason_key)
        counted = (select(*keys, func.count()).where(*self._incidents())
                   .group_by(*keys))
        with self.reader() as conn:
            found: list[dict[str, Any]] = []
            for template, cid, key, n in conn.execute(counted):
                if key is None or len(key) < REASON_KEY:  # the key is the whole reason
                    found.append(dict(template=template, circle=cid, reason=key,
                                      count=int(n), instances=[], whole=False))
                    continue
                found += [dict(template=template, circle=cid, reason=reason, count=int(m),
                               instances=[], whole=True) for reason, m in conn.execute(
                    select(t.reason, func.count()).where(
                        *self._incidents(), t.template == template, t.circle == cid,
                        t.reason_key == key).group_by(t.reason))]
            found.sort(key=lambda g: (-g["count"], g["template"], g["circle"],
                                      g["reason"] is not None, g["reason"] or ""))
            found = found[:groups]
            if found and shown:
                tops = [select(literal(n).label("g"), top.c.created_at, top.c.instance_id)
                        for n, top in enumerate(self._newest(g, shown) for g in found)]
                newest = sorted(conn.execute(union_all(*tops)), key=lambda r: (
                    r.g, r.created_at, r.instance_id), reverse=True)
                for n, _, iid in newest:
                    found[n]["instances"].append(iid)  # newest first
        for g in found:
            del g["whole"]
        return found

    def _incidents(self) -> list[Any]:
        """The failed circles of this tenant's instances not over (a range of
        `ix_failed_circles_incidents`)."""
        return [self._here(failed_circles_t), failed_circles_t.c.active]

    def _newest(self, group: dict[str, Any], shown: int) -> Any:
        """The newest `shown` instances of an incident group (the top of its range of
        `ix_failed_circles_incidents`), as a subquery."""
        t = failed_circles_t.c
        reason = group["reason"]
        cond = [*self._incidents(), t.template == group["template"],
                t.circle == group["circle"],
                t.reason_key.is_(None) if reason is None else t.reason_key == reason[:REASON_KEY]]
        if group["whole"]:
            cond.append(t.reason == reason)
        return (select(t.created_at, t.instance_id).where(*cond)
                .order_by(t.created_at.desc(), t.instance_id.desc()).limit(shown).subquery())

    def overdue_tasks(self, limit: int = 50, offset: int = 0
                      ) -> tuple[list[dict[str, Any]], int]:
        """Open tasks past their due time, the longest overdue first, and their number
        (up to COUNT_MAX + 1): each {"instance", "template", "circle", "due_at",
        "assignee"}."""
        i, c = instances_t, circles_t
        joined = c.join(i, and_(i.c.id == c.c.instance_id, i.c.tenant == c.c.tenant))
        cond = [self._here(c), c.c.audience.is_not(None), c.c.due_at.is_not(None),
                c.c.due_at < self.clock(), i.c.sandbox.is_(False)]
        q = (select(c.c.instance_id, i.c.template, c.c.circle, c.c.due_at, c.c.task)
             .select_from(joined).where(*cond)
             .order_by(c.c.due_at, c.c.instance_id, c.c.circle).limit(limit).offset(offset))
        counted = select(c.c.instance_id).select_from(joined).where(*cond).limit(
            COUNT_MAX + 1).subquery()
        with self.reader() as conn:
            rows = [{"instance": r.instance_id, "template": r.template, "circle": r.circle,
                     "due_at": r.due_at,
                     "assignee": (r.task or {}).get("assignee") if isinstance(r.task, dict)
                     else None} for r in conn.execute(q)]
            total = conn.execute(select(func.count()).select_from(counted)).scalar_one()
        return rows, int(total)

    # ------------------------------------------------------- bulk operations
    def add_operation(self, op_id: str, action: str, params: dict[str, Any],
                      f: dict[str, Any], shown: dict[str, Any] | None, ids: list[str] | None,
                      by_id: int, by: str) -> int:
        """Record a bulk operation on the instances matching `f` (and of `ids` if given:
        each of this tenant, else NotFound) and one pending item for each, in one
        transaction; how many it matched. `shown` is the filter as recorded (JSON).
        Conflict when more than OPERATION_MAX match."""
        i = instances_t
        source, cond, _ = self._matching(f)
        if ids is not None:
            cond.append(i.c.id.in_(ids))
        chosen = select(i.c.id).select_from(source).where(*cond)
        with self.db.begin() as conn:
            n = int(conn.execute(select(func.count()).select_from(
                chosen.limit(OPERATION_MAX + 1).subquery())).scalar_one())
            if n > OPERATION_MAX:
                raise Conflict(N_("more than %(n)s instances match: narrow the filter",
                                  n=OPERATION_MAX))
            if ids is not None and n < len(set(ids)):
                found = set(conn.execute(chosen).scalars())
                missing = next(iid for iid in ids if iid not in found)
                raise NotFound(N_("no instance '%(id)s'", id=missing))
            conn.execute(insert(operations_t).values(
                id=op_id, tenant=self._owner(), action=action, params=params, filter=shown,
                created_by_id=by_id, created_by=by, created_at=self.clock(), matched=n,
                done=0, refused=0))
            conn.execute(insert(operation_items_t).from_select(
                ["operation_id", "instance_id", "state"],
                select(literal(op_id), i.c.id, literal(PENDING)).select_from(source)
                .where(*cond)))
            if n == 0:
                conn.execute(update(operations_t).where(operations_t.c.id == op_id)
                             .values(finished_at=self.clock()))
        return n

    def operation(self, op_id: str) -> dict[str, Any]:
        """The operation of this tenant (NotFound otherwise), as recorded."""
        o = operations_t.c
        with self.reader() as conn:
            row = conn.execute(select(
                o.id, o.tenant, o.action, o.params, o.filter, o.created_by_id, o.created_by,
                o.created_at, o.matched, o.done, o.refused, o.finished_at).where(
                self._here(operations_t), o.id == op_id)).mappings().first()
        if row is None:
            raise NotFound(N_("no operation '%(id)s'", id=op_id))
        return dict(row)

    def operation_items(self, op_id: str, state: str | None = None, after: str | None = None,
                        limit: int = 100) -> list[dict[str, Any]]:
        """The operation's items in instance id order after `after` (of one `state`)."""
        t = operation_items_t.c
        q = select(t.instance_id, t.state, t.reason, t.at).where(t.operation_id == op_id)
        if state is not None:
            q = q.where(t.state == state)
        if after is not None:
            q = q.where(t.instance_id > after)
        with self.reader() as conn:
            return [dict(r) for r in conn.execute(q.order_by(t.instance_id).limit(limit))
                    .mappings()]

    def claim_operation(self, owner: str, lease: float) -> dict[str, Any] | None:
        """Lease one unfinished operation nobody holds (a crashed holder's lease runs
        out), the oldest first: its row, or None."""
        o = operations_t.c
        now = self.clock()
        q = (select(o.id).where(self._here(operations_t), o.finished_at.is_(None),
                                or_(o.lease_until.is_(None), o.lease_until < now))
             .order_by(o.created_at).limit(1))
        if self.postgres:
            q = q.with_for_update(skip_locked=True)
        if self._nothing_to_claim(q):
            return None
        with self.db.begin() as conn:
            op_id = conn.execute(q).scalar()
            if op_id is None:
                return None
            conn.execute(update(operations_t).where(o.id == op_id).values(
                lease_owner=owner, lease_until=now + timedelta(seconds=lease)))
            row = conn.execute(select(operations_t).where(o.id == op_id)).mappings().one()
        return dict(row)

    def pending_items(self, op_id: str, limit: int) -> list[str]:
        t = operation_items_t.c
        with self.reader() as conn:
            return list(conn.execute(
                select(t.instance_id).where(t.operation_id == op_id, t.state == PENDING)
                .order_by(t.instance_id).limit(limit)).scalars())

    def settle_items(self, op_id: str, owner: str, lease: float,
                     results: Sequence[tuple[str, str, str | None]]) -> bool:
        """Write items' results (instance id, `done` or `refused`, reason) and the
        operation's counts in one transaction, and renew `owner`'s lease; an item that
        has its result already keeps it. False (nothing written) when the lease was lost."""
        o, t = operations_t.c, operation_items_t.c
        now = self.clock()
        with self.db.begin() as conn:
            held = conn.execute(update(operations_t).where(
                o.id == op_id, o.lease_owner == owner).values(
                lease_until=now + timedelta(seconds=lease)).returning(o.id)).scalar()
            if held is None:
                return False
            counts = {DONE: 0, REFUSED: 0}
            for iid, state, reason in results:
                counts[state] += conn.execute(update(operation_items_t).where(
                    t.operation_id == op_id, t.instance_id == iid, t.state == PENDING)
                    .values(state=state, reason=reason, at=now)).rowcount
            conn.execute(update(operations_t).where(o.id == op_id).values(
                done=o.done + counts[DONE], refused=o.refused + counts[REFUSED]))
        return True

    def finish_operation(self, op_id: str, owner: str) -> bool:
        """Mark the operation finished when no item is pending, and end `owner`'s lease;
        whether it is finished now."""
        o, t = operations_t.c, operation_items_t.c
        with self.db.begin() as conn:
            left = conn.execute(select(t.instance_id).where(
                t.operation_id == op_id, t.state == PENDING).limit(1)).first()
            conn.execute(update(operations_t).where(o.id == op_id, o.lease_owner == owner)
                         .values(lease_owner=None, lease_until=None,
                                 finished_at=self.clock() if left is None else None))
        return left is None

    def applied(self, instance_id: str, marker: str, op_id: str) -> bool:
        """Whether the instance's history holds `marker` for operation `op_id` (a move
        of that operation was applied to it: recorded in the move's own step)."""
        e = events_t.c
        with self.reader() as conn:
            return any((data or {}).get("operation") == op_id for data in conn.execute(
                select(e.data).where(self._here(events_t), e.instance_id == instance_id,
                                     e.kind == marker)).scalars())


def _reason_is(fc: Any, reason: str) -> list[Any]:
    """The conditions of a failed circle's reason being `reason`, on its key (the first
    REASON_KEY characters, which its indexes hold): a shorter reason is all there (the
    key equal to it is the reason equal), a longer one is also compared whole."""
    cond = [fc.c.reason_key == reason[:REASON_KEY]]
    if len(reason) >= REASON_KEY:
        cond.append(fc.c.reason == reason)
    return cond
