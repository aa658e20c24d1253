"""The write path's SQL, each statement defined once, and the row layouts it binds.

A step writes an instance row (compare-and-set on `lock_version`), its changed circle
rows and its new history events; a start inserts the instance, its circles, the nested
template versions it pins and its first events. The statements are SQLAlchemy Core
(executed as such by the SQLAlchemy driver and the locked path); the SQLite driver runs
the very same statements compiled once for sqlite3 (`sqlite.forms`), the PostgreSQL
driver statements derived from them (`pg.statements`), with values converted as
SQLAlchemy would store them, so every side reads what the others wrote.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import orjson
from sqlalchemy import Insert, Select, bindparam, delete, insert, select, update

from bpflow.store.audience import audience, people
from bpflow.store.tables import (
    audience_t,
    batches_t,
    circles_t,
    events_t,
    instances_t,
    mail_t,
    pinned_t,
    templates_t,
)
from engine.instance import CircleRun, Event
from engine.signals import waiting_for

# ------------------------------------------------------------------ row layouts
RUN_COLUMNS = ("state", "result", "reason", "attempts", "next_attempt_at", "ready_at", "due_at",
               "epoch", "pending", "task", "nudges")  # a CircleRun's fields
# ... and what a query needs of its task (`engine.tasks`), derived from them
CIRCLE_COLUMNS = RUN_COLUMNS + ("audience", "people", "signal")
EVENT_COLUMNS = ("instance_id", "tenant", "seq", "at", "kind", "actor", "circle", "before", "after",
                 "data")
INSTANCE_COLUMNS = ("id", "tenant", "template_id", "template", "version", "nested_versions",
                    "user_id",
                    "user", "status", "reason", "inputs", "variables", "seq", "lock_version",
                    "due_at", "created_at", "updated_at", "batch", "sandbox")
STEP_COLUMNS = ("id", "lock", "status", "reason", "seq", "variables", "due_at", "next_lock",
                "updated_at")  # what a step changes of the instance row (`cas`)

Snapshot = tuple[Any, ...]  # a circle's stored columns, in CIRCLE_COLUMNS order
_fields: Callable[[CircleRun], Snapshot] = attrgetter(*RUN_COLUMNS)


def snapshot(run: CircleRun, hidden: bool = False) -> Snapshot:
    """A circle's stored columns; `hidden` (a sandbox instance's, SPEC §16): without the
    columns tasks, people's lists and signals find circles by, so none finds it."""
    fields = _fields(run)
    if hidden:
        return (*fields, None, None, None)
    signal = None if run.pending is None else waiting_for(run)
    if run.task is None:  # most circles: nobody's task
        return (*fields, None, None, signal)
    return (*fields, audience(run), people(run), signal)


def circle_run(row: Any) -> CircleRun:
    """The CircleRun of a stored circle row."""
    return CircleRun(**{k: getattr(row, k) for k in RUN_COLUMNS})


def circle_row(instance_id: str, cid: str, values: Snapshot, tenant: str | None = None,
               batch: str | None = None) -> dict[str, Any]:
    """A circle's row (`tenant` and the instance's crowd `batch` only for an insert: a
    step never moves a row to another instance)."""
    return {"instance_id": instance_id, "circle": cid, "tenant": tenant, "batch": batch,
            **dict(zip(CIRCLE_COLUMNS, values, strict=True))}


AUDIENCE = CIRCLE_COLUMNS.index("audience")


def audience_rows(instance_id: str, tenant: str, cid: str,
                  values: Snapshot) -> list[dict[str, Any]]:
    """The task-audience rows of a circle as stored (none unless it is an open task)."""
    text = values[AUDIENCE]
    if not text:
        return []
    ready_at = values[CIRCLE_COLUMNS.index("ready_at")]
    return [{"instance_id": instance_id, "tenant": tenant, "circle": cid, "who": who,
             "ready_at": ready_at}
            for who in dict.fromkeys(text.split())]


def event_rows(instance_id: str, tenant: str, events: list[Event]) -> list[dict[str, Any]]:
    return [{"instance_id": instance_id, "tenant": tenant, "seq": e.seq, "at": e.at, "kind": e.kind,
             "actor": e.actor, "circle": e.circle, "before": e.before, "after": e.after,
             "data": e.data} for e in events]


def new_rows(news: Sequence[Any]) -> list[tuple[Insert, list[dict[str, Any]]]]:
    """The inserts of new instances (`writing.NewInstance`), in the order the foreign
    keys need, each with its rows of all of them (tables without rows left out)."""
    out = [(instance_insert, [n.instance for n in news]),
           (circle_insert, [c for n in news for c in n.circles]),
           (pinned_insert, [p for n in news for p in n.pinned]),
           (event_insert, [e for n in news for e in n.events]),
           (audience_insert, [a for n in news for a in n.audience])]
    return [(statement, rows) for statement, rows in out if rows]


# ------------------------------------------------------------------ statements
def _binds(columns: tuple[str, ...]) -> dict[str, Any]:
    # bind names differ from column names: SQLAlchemy reserves those for SET / VALUES
    return {k: bindparam(f"b_{k}") for k in columns}


def prefixed(row: dict[str, Any]) -> dict[str, Any]:
    """A row's values under the statements' bind names."""
    return {f"b_{k}": v for k, v in row.items()}


b = bindparam
cas = (update(instances_t)
       .where(instances_t.c.id == b("b_id"), instances_t.c.lock_version == b("b_lock"))
       .values(status=b("b_status"), reason=b("b_reason"), seq=b("b_seq"),
               variables=b("b_variables"), due_at=b("b_due_at"),
               lock_version=b("b_next_lock"), updated_at=b("b_updated_at")))
# the same, for a step that changes neither the instance's status nor its due time (most
# steps): SQLite rewrites the entry of every index on a column an UPDATE sets, even to the
# value it holds, and four indexes hold one of those two (SQLite's writer: `save_job`)
cas_quiet = (update(instances_t)
             .where(instances_t.c.id == b("b_id"), instances_t.c.lock_version == b("b_lock"))
             .values(reason=b("b_reason"), seq=b("b_seq"), variables=b("b_variables"),
                     lock_version=b("b_next_lock"), updated_at=b("b_updated_at")))
circle_update = (update(circles_t)
                 .where(circles_t.c.instance_id == b("b_instance_id"),
                        circles_t.c.circle == b("b_circle"))
                 .values(_binds(CIRCLE_COLUMNS)))
circle_delete = delete(circles_t).where(circles_t.c.instance_id == b("b_instance_id"),
                                        circles_t.c.circle == b("b_circle"))
instance_moved = (update(instances_t).where(instances_t.c.id == b("b_id"))
                  .values(template_id=b("b_template_id"), version=b("b_version"),
                          nested_versions=b("b_nested_versions")))
pinned_delete = delete(pinned_t).where(pinned_t.c.instance_id == b("b_instance_id"))
circle_insert = insert(circles_t).values(_binds(CIRCLE_COLUMNS + ("instance_id", "circle",
                                                                  "tenant", "batch")))
event_insert = insert(events_t).values(_binds(EVENT_COLUMNS))
audience_insert = insert(audience_t).values(_binds(("instance_id", "tenant", "circle", "who",
                                                   "ready_at")))
audience_delete = delete(audience_t).where(audience_t.c.instance_id == b("b_instance_id"),
                                           audience_t.c.circle == b("b_circle"))
instance_insert = insert(instances_t).values(_binds(INSTANCE_COLUMNS))
pinned_insert = insert(pinned_t).values(_binds(("instance_id", "tenant", "template_id")))
BATCH_COLUMNS = ("id", "tenant", "template", "version", "started", "created_by", "created_at")
batch_insert = insert(batches_t).values(_binds(BATCH_COLUMNS))  # a crowd's row (crowds.py)
# a version by name: never a sandbox's (`sandboxes.py`), whatever name is asked for
template_id = (select(templates_t.c.id).where(templates_t.c.tenant == b("b_tenant"),
                                              templates_t.c.name == b("b_name"),
                                              templates_t.c.sandbox.is_(False))
               .order_by(templates_t.c.version.desc()).limit(1))
template_version_id = select(templates_t.c.id).where(
    templates_t.c.tenant == b("b_tenant"), templates_t.c.name == b("b_name"),
    templates_t.c.version == b("b_version"), templates_t.c.sandbox.is_(False))

# an approval mail's decision (`MailRows.record_decision`): taken while it is undecided
# and, when `signed` is matched, still signed as its decider read it; of this store's
# tenant (`here`) or any (the view of every tenant); then the decision's signature, or
# (`sealed`) with it, signed ahead


def _mail_decision(here: bool, signed: bool, sealed: bool = False) -> Any:
    query = update(mail_t).where(mail_t.c.id == b("b_id"), mail_t.c.decision.is_(None))
    if here:
        query = query.where(mail_t.c.tenant == b("b_tenant"))
    if signed:
        query = query.where(mail_t.c.signature == b("b_signature"))
    return query.values(_binds(("decision", "comment", "updated_at", "read_at",
                                "decided_by") + (("decision_signature",) if sealed else ())))


mail_decision = {(here, signed): _mail_decision(here, signed)
                 for here in (False, True) for signed in (False, True)}
mail_decision_sealed = {here: _mail_decision(here, True, sealed=True).returning(*mail_t.c)
                        for here in (False, True)}  # the row as stored given back
mail_signed = (update(mail_t).where(mail_t.c.id == b("b_id"))
               .values(decision_signature=b("b_decision_signature")))


# ------------------------------------------------------------ for every driver
def dumps(value: Any) -> str:
    """JSON text as the database keeps it (orjson: a tenth of the time of `json`)."""
    if value is None:  # most of a new instance's JSON columns (a crowd writes millions)
        return "null"
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def row_maker(query: Select, convert: dict[type, Callable[[Any], Any]],
              ) -> Callable[[tuple[Any, ...]], Any]:
    """What makes a row a driver read for `query` into what SQLAlchemy would give: the
    columns by name, the value of each column whose type is a key of `convert` passed
    through its function (a read straight through sqlite3 or psycopg)."""
    columns = list(query.exported_columns)  # a SELECT's columns, or what DML returns
    names = [c.key or "" for c in columns]  # every column a driver reads has its key
    # typeshed gives namedtuple() the type of a plain tuple class, without `_make`
    make = namedtuple("Row", names)._make  # type: ignore[attr-defined]  # noqa: PYI024
    converting = [(i, conv) for i, c in enumerate(columns)
                  for kind, conv in convert.items() if isinstance(c.type, kind)]

    def row(values: tuple[Any, ...]) -> Any:
        converted = list(values)
        for i, conv in converting:
            converted[i] = conv(converted[i])
        return make(converted)
    return row
