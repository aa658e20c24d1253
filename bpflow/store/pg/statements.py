"""The store's statements for PostgreSQL, derived from their definitions in
`bpflow.store.statements`: a step as ONE statement, a start as one, rows as one JSON
array per table.

A step's compare-and-set (`statements.cas`) is a data-modifying CTE, and the step's
circle rows, task audience and history events (`writing.STEP_ORDER`) are written by CTEs
that hold only for the instance it matched (`... IN (SELECT id FROM cas)`, `EXISTS`), so
a lost compare-and-set writes nothing and answers 0. Rows go as one JSON array per
table: the text is the same for every step, and psycopg prepares it once per
connection. The events' `tx` is left to its server default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import (
    JSON,
    Text,
    bindparam,
    cast,
    column,
    exists,
    func,
    insert,
    literal_column,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql import ClauseElement, visitors
from sqlalchemy.sql.dml import Delete, Insert, Update, UpdateBase
from sqlalchemy.sql.elements import BindParameter, ColumnClause
from sqlalchemy.sql.visitors import ExternallyTraversible

from bpflow.store import statements as sql
from bpflow.store.connection import UTCDateTime, aware
from bpflow.store.tables import audience_t, circles_t, instances_t
from bpflow.store.writing import STEP_ORDER, NewInstance, Write, step_rows

DIALECT = postgresql.psycopg.dialect()
quote = DIALECT.identifier_preparer.quote


def _converter(column_type: Any) -> Callable[[Any], Any]:
    """How a value of a column goes to psycopg: JSON as its text, times checked aware."""
    if isinstance(column_type, JSON):
        return sql.dumps
    if isinstance(column_type, UTCDateTime):
        return aware
    return lambda value: value


def binds(statement: ClauseElement) -> list[str]:
    """The row keys a statement of `statements` binds (its `b_` parameters), in order."""
    keys: dict[str, None] = {}
    for element in visitors.iterate(statement):
        if isinstance(element, BindParameter) and element.key.startswith("b_"):
            keys[element.key[2:]] = None
    return list(keys)


@dataclass(frozen=True)
class Rows:
    """A statement of `statements` taking many rows at once: `values(rows)` gives its
    parameter (named as the statement's part: `many`)."""

    statement: UpdateBase
    values: Callable[[list[dict[str, Any]]], dict[str, str]]


def many(statement: UpdateBase, name: str, when: Any = None) -> Rows:
    """`statement` for many rows given as one JSON array (`json_to_recordset`: one
    parameter whatever the number of rows): an insert takes its rows from it, an update
    or delete joins them; `when` is a condition all of it holds under. JSON columns travel
    as their text (a JSON null stays JSON, as SQLAlchemy stores it)."""
    table = statement.table
    keys = binds(statement)
    types = [table.c[k].type for k in keys]
    source = (func.json_to_recordset(cast(bindparam(name), JSON))
              .table_valued(*[column(k, Text() if isinstance(t, JSON) else t)
                              for k, t in zip(keys, types, strict=True)])
              .render_derived(name=f"{name}_rows", with_types=True))
    value = {k: cast(source.c[k], t) if isinstance(t, JSON) else source.c[k]
             for k, t in zip(keys, types, strict=True)}
    derived: UpdateBase
    if isinstance(statement, Insert):
        rows = select(*value.values())
        derived = insert(table).from_select(
            [table.c[k] for k in keys], rows if when is None else rows.where(when))
    else:
        def bound(element: ExternallyTraversible, **_: Any) -> ExternallyTraversible | None:
            """A `b_` parameter replaced by its column of the rows given."""
            if isinstance(element, BindParameter) and element.key.startswith("b_"):
                return value[element.key[2:]]
            return None

        replaced = visitors.replacement_traverse(statement, {}, bound)
        assert isinstance(replaced, Update | Delete)  # a copy of the statement
        derived = replaced if when is None else replaced.where(when)
    texts = [k for k, t in zip(keys, types, strict=True) if isinstance(t, JSON)]
    times = [k for k, t in zip(keys, types, strict=True) if isinstance(t, UTCDateTime)]

    def values(rows: list[dict[str, Any]]) -> dict[str, str]:
        """The rows as JSON (keys it does not name are ignored by `json_to_recordset`)."""
        for r in rows:
            for k in times:
                aware(r[k])
        return {name: orjson.dumps([r | {k: sql.dumps(r[k]) for k in texts}
                                    for r in rows]).decode()}
    return Rows(derived, values)


def single(statement: UpdateBase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The parameters of a one-row statement of `statements` for a row (by column)."""
    table = statement.table
    convert = [(k, _converter(table.c[k].type if k in table.c else None))
               for k in binds(statement)]
    return lambda row: {f"b_{k}": conv(row[k]) for k, conv in convert}


def text(statement: ClauseElement) -> str:
    return str(statement.compile(dialect=DIALECT))


_cas = sql.cas.returning(instances_t.c.id).cte("cas")
ONE: ColumnClause[Any] = literal_column("1")
_won = exists(select(ONE).select_from(_cas))
# the rows of the instance whose compare-and-set matched: found by its key (an index scan),
# whatever the planner guesses of the rows given
CIRCLES = many(sql.circle_update, "cu", circles_t.c.instance_id.in_(select(_cas.c.id)))
RETOLD = many(sql.audience_delete, "ad", audience_t.c.instance_id.in_(select(_cas.c.id)))
_retold = RETOLD.statement.returning(ONE).cte("ad")
# the new audience rows after the old are gone (the insert waits for the delete's rows)
AUDIENCE = many(sql.audience_insert, "ai", _won & (select(func.count()).select_from(_retold)
                                                   .scalar_subquery() >= literal_column("0")))
EVENTS = many(sql.event_insert, "ev", _won)
STEP_FORMS = {sql.circle_update: CIRCLES, sql.audience_delete: RETOLD,
              sql.audience_insert: AUDIENCE, sql.event_insert: EVENTS}
_STEP_CTES = {sql.circle_update: CIRCLES.statement.cte("cu"), sql.audience_delete: _retold,
              sql.audience_insert: AUDIENCE.statement.cte("ai"),
              sql.event_insert: EVENTS.statement.cte("ev")}
STEP = text(select(func.count()).select_from(_cas).add_cte(
    *[_STEP_CTES[statement] for statement in STEP_ORDER]))  # answers 1, or 0 when it lost
CAS = single(sql.cas)
NEW = {statement: many(statement, name) for statement, name in (
    (sql.instance_insert, "ni"), (sql.circle_insert, "nc"), (sql.pinned_insert, "np"),
    (sql.event_insert, "ne"), (sql.audience_insert, "na"))}
START = text(select(ONE).add_cte(*[rows.statement.cte(f"new_{n}")
                                   for n, rows in enumerate(NEW.values())]))
BATCH = (text(sql.batch_insert), single(sql.batch_insert))


def step_params(w: Write) -> dict[str, Any]:
    """The parameters of `STEP` for a write (without a migration's rows: those go
    through SQLAlchemy, `PgDriver.save`)."""
    params = CAS(w.row)
    for statement, rows in step_rows(w):
        params |= STEP_FORMS[statement].values(rows)
    return params


def start_params(news: Iterable[NewInstance]) -> dict[str, Any]:
    """The parameters of `START` for new instances (every table's rows, maybe none)."""
    rows = dict(sql.new_rows(list(news)))
    return {k: v for statement, form in NEW.items()
            for k, v in form.values(rows.get(statement, [])).items()}
