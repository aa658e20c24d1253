"""The PostgreSQL writer: the store's statements through psycopg 3, a step in one round trip.

A step is ONE statement: the compare-and-set of `statements.cas` is a data-modifying CTE,
and the step's circle rows, task audience and history events are written by CTEs that
hold only for the instance it matched (`... IN (SELECT id FROM cas)`, `EXISTS`), so a
lost compare-and-set writes nothing and answers 0. Rows go as one JSON array per table:
the text is the same for every step, and psycopg prepares it once per connection. A
start is one statement the same way. Steps that arrive together from an event loop
travel in one pipeline (BEGIN, their statements, COMMIT): one round trip and one commit
for all of them. A crowd is copied with COPY. Each statement here is derived from its
definition in `statements`; the events' `tx` is left to its server default.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

import orjson
import psycopg
from psycopg import generators, pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.types.json import set_json_loads
from sqlalchemy import (
    JSON,
    String,
    Text,
    any_,
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
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import ClauseElement, Select, visitors
from sqlalchemy.sql.dml import Delete, Insert, Update, UpdateBase
from sqlalchemy.sql.elements import BindParameter, ColumnClause
from sqlalchemy.sql.visitors import ExternallyTraversible

from bpflow.store import statements as sql
from bpflow.store.connection import UTCDateTime, aware
from bpflow.store.tables import audience_t, circles_t, instances_t
from bpflow.store.writing import (
    LoopWriters,
    NewInstance,
    SqlAlchemyWriter,
    Write,
    settle,
)

log = logging.getLogger(__name__)
DIALECT = postgresql.psycopg.dialect()
LANES = 3  # batches of an event loop on their way at once, each on a connection of its own
MIN_BATCH = 4  # jobs: the pending ones are shared among the free lanes, at least this many each
IDLE_CHECK_S = 10.0  # a connection idle this long is checked before it writes
READERS = 4  # connections a writer keeps for reads (`rows`); more reads at once wait
# A writer's connections plan each prepared statement once: the server's default re-plans
# the step's statement for its parameters from time to time, and a plan of it costs about
# as much as running it (steps/s, 3,000 steps, six runs in turns with the default: one flow
# median 866 against 806, 16 flows 1,878 against 1,628; always re-planned: 470-600 and
# 1,000-1,275).
# They also cost a read by key as the server's pages cached (`random_page_cost` 1.1, the
# usual setting for SSDs, against the default's 4 for spinning disks): with the default,
# the foreign-key checks inside a step scanned a table of a few hundred rows whole rather
# than go by its key (see ANALYZE_AT), and kept doing so as it grew.
PLANS = "-c plan_cache_mode=force_generic_plan -c random_page_cost=1.1"
# A new database's tables have no statistics until autovacuum analyzes them (a minute or
# more after they start to fill): meanwhile PostgreSQL checks the foreign keys to
# `instances` through its (tenant, created_at) index, reading every instance of the tenant
# for each new row (its estimates without statistics tie, and that index is the smaller).
# A connection keeps the plans of those checks until the table's statistics change, so
# they are made again as the tables fill: when this process has started ANALYZE_AT[i]
# instances, the tables whose statistics are missing or describe less than half of the
# table are analyzed (`analyze_stale_tables`). Analyzed, the checks go by the key.
ANALYZE_AT = (64, 512)
STALE = ("SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
         " AND relname IN ('instances', 'templates', 'users') AND (reltuples < 0"
         " OR pg_relation_size(oid) > 2 * relpages * current_setting('block_size')::int)")


# ------------------------------------------------------ the statements, for PostgreSQL
def _converter(column_type: Any) -> Callable[[Any], Any]:
    """How a value of a column goes to psycopg: JSON as its text, times checked aware."""
    if isinstance(column_type, JSON):
        return sql.dumps
    if isinstance(column_type, UTCDateTime):
        return aware
    return lambda value: value


def _binds(statement: ClauseElement) -> list[str]:
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
    keys = _binds(statement)
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
               for k in _binds(statement)]
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
STEP = text(select(func.count()).select_from(_cas).add_cte(
    CIRCLES.statement.cte("cu"), _retold, AUDIENCE.statement.cte("ai"),
    EVENTS.statement.cte("ev")))  # answers 1, or 0 when the compare-and-set lost
CAS = single(sql.cas)
NEW = {statement: many(statement, name) for statement, name in (
    (sql.instance_insert, "ni"), (sql.circle_insert, "nc"), (sql.pinned_insert, "np"),
    (sql.event_insert, "ne"), (sql.audience_insert, "na"))}
START = text(select(ONE).add_cte(*[rows.statement.cte(f"new_{n}")
                                          for n, rows in enumerate(NEW.values())]))
BATCH = (text(sql.batch_insert), single(sql.batch_insert))
_quote = DIALECT.identifier_preparer.quote


# --------------------------------------------------- reads through psycopg straight
def ids_any(column: Any) -> Any:
    """`column` among the ids bound as the list `b_ids` (one prepared statement for any
    number of them)."""
    return column == any_(bindparam("b_ids", type_=postgresql.ARRAY(String)))


@dataclass(frozen=True)
class Read:
    """A query as psycopg runs it (planned each time: see `PgWriter.rows`): its text, and `row`
    making a row read into what SQLAlchemy would give (the columns by name, times in
    UTC; psycopg loads JSON), so code reading rows takes either."""

    sql: str
    row: Callable[[tuple[Any, ...]], Any]
    constants: dict[str, Any]  # the values of its parameters that are not `b_` (a LIMIT)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def read(query: Select) -> Read:
    compiled = query.compile(dialect=DIALECT)
    return Read(compiled.string, sql.row_maker(query, {UTCDateTime: _utc}),
                {k: v for k, v in compiled.params.items() if not k.startswith("b_")})


READ_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"  # one snapshot for all


def _framed_reads(reads: tuple[tuple[Read, dict[str, Any]], ...]) -> list[tuple[str, Any]]:
    """The statements of reads as sent: one alone is a snapshot of its own, several
    share one (a read-only transaction)."""
    statements = [(r.sql, {**r.constants, **values}) for r, values in reads]
    if len(statements) == 1:
        return statements
    return [(READ_BEGIN, None), *statements, ("COMMIT", None)]


def _read_rows(reads: tuple[tuple[Read, dict[str, Any]], ...],
               fetched: list[list[tuple[Any, ...]]]) -> list[list[Any]]:
    """Each read's rows, as its `row` makes them, of what its statement fetched."""
    return [[r.row(t) for t in rows] for (r, _), rows in zip(reads, fetched, strict=True)]


@dataclass(frozen=True)
class Copy:
    """An insert of `statements` as COPY: its command, and `rows(rows)` giving the
    values of rows keyed by column, in the command's order (JSON as its text)."""

    command: str
    rows: Callable[[list[dict[str, Any]]], list[list[Any]]]
    types: list[str]  # the binary format's, by column (JSON goes as its text)


def for_copy(statement: Insert) -> Copy:
    keys = _binds(statement)
    types = [statement.table.c[k].type for k in keys]
    texts = [i for i, t in enumerate(types) if isinstance(t, JSON)]
    times = [i for i, t in enumerate(types) if isinstance(t, UTCDateTime)]
    get = itemgetter(*keys)

    def rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
        out = []
        for row in rows:
            values = list(get(row))
            for i in texts:
                values[i] = sql.dumps(values[i])
            for i in times:
                aware(values[i])
            out.append(values)
        return out
    names = ["text" if isinstance(t, JSON) else t.compile(dialect=DIALECT).lower()
             for t in types]
    return Copy(f"COPY {_quote(statement.table.name)}"
                f" ({', '.join(_quote(k) for k in keys)}) FROM STDIN (FORMAT BINARY)", rows,
                [n.split("(")[0] for n in names])


COPY = {statement: for_copy(statement) for statement in NEW}  # a crowd's (`insert_many`)


def step_params(w: Write) -> dict[str, Any]:
    """The parameters of `STEP` for a write."""
    return {**CAS(w.row), **CIRCLES.values(w.changed), **RETOLD.values(w.retold),
            **AUDIENCE.values(w.audience),
            **EVENTS.values(sql.event_rows(w.row["id"], w.loaded.inst.tenant, w.events))}


def start_params(news: Iterable[NewInstance]) -> dict[str, Any]:
    """The parameters of `START` for new instances (every table's rows, maybe none)."""
    rows = dict(sql.new_rows(list(news)))
    return {k: v for statement, form in NEW.items()
            for k, v in form.values(rows.get(statement, [])).items()}


# ------------------------------------------------------------------- jobs
@dataclass
class Job:
    """Statements to run together, and what their answers (the first column of each
    one's first row) give the caller."""

    statements: list[tuple[str, dict[str, Any]]]
    answer: Callable[[list[Any]], Any]


def save_job(writes: list[Write]) -> Job:
    """Steps; the ids whose compare-and-set lost."""
    ids = [w.row["id"] for w in writes]
    return Job([(STEP, step_params(w)) for w in writes],
               lambda counts: {iid for iid, n in zip(ids, counts, strict=True) if n != 1})


def insert_job(news: list[NewInstance]) -> Job:
    return Job([(START, start_params(news))], lambda _: None)


def _framed(jobs: list[Job]) -> list[tuple[str, Any]]:
    """The statements of jobs as sent: one alone is its own transaction, several are
    wrapped in BEGIN and COMMIT."""
    statements = [s for job in jobs for s in job.statements]
    if len(statements) == 1:
        return statements
    return [("BEGIN", None), *statements, ("COMMIT", None)]


def _answers(jobs: list[Job], firsts: list[Any]) -> list[Any]:
    answers, at = [], 0
    for job in jobs:
        n = len(job.statements)
        answers.append(job.answer(firsts[at:at + n]))
        at += n
    return answers


def _refused(exc: Exception) -> Exception:
    """psycopg's refusal of a constraint as SQLAlchemy's (what the store catches)."""
    if isinstance(exc, psycopg.IntegrityError):
        return IntegrityError("(PostgreSQL write)", None, exc)
    return exc


# ---------------------------------------------- a step or a start below the cursors
@dataclass(frozen=True)
class Prepared:
    """A statement of the writer that runs alone below psycopg's cursors: a quarter of a
    step's client CPU went to them (the query's conversion, its parameters' adaptation,
    the prepared statements' bookkeeping, the result's rows). It is prepared once per
    connection under its name; its parameters go as text in their order, each typed by
    the cast the statement gives it (every one of STEP and START has one); its answer
    is the integer in the first column of its first row."""

    name: bytes
    query: bytes
    names: tuple[str, ...]


def prepared(statement: str, name: str) -> Prepared:
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"
    query = re.sub(r"%\((\w+)\)s", number, statement)
    if "%" in query:
        raise ValueError("a prepared statement's text holds a '%'")  # pyformat's escapes
    return Prepared(f"bpflow_{name}".encode(), query.encode(), tuple(names))


PREPARED = {STEP: prepared(STEP, "step"), START: prepared(START, "start")}
_ready: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


_TEXTS: dict[type, Callable[[Any], bytes | None]] = {
    str: str.encode, type(None): lambda _: None, bool: lambda v: b"t" if v else b"f",
    int: lambda v: str(v).encode(), datetime: lambda v: v.isoformat().encode()}


def _text(value: Any) -> bytes | None:
    """A parameter's text, as PostgreSQL reads it for the type its cast names."""
    text = _TEXTS.get(type(value))
    if text is None:
        raise TypeError(f"no text for a parameter of type {type(value).__name__}")
    return text(value)


def _first(conn: psycopg.Connection | psycopg.AsyncConnection, results: list) -> int:
    result = results[-1]
    if result.status != pq.ExecStatus.TUPLES_OK:
        raise _refused(psycopg.errors.error_from_result(result, encoding=conn.info.encoding))
    return int(result.get_value(0, 0))


def _unprepared(conn: psycopg.Connection | psycopg.AsyncConnection,
                statement: Prepared) -> bool:
    return statement.name not in _ready.setdefault(conn, set())


def _sent(conn: psycopg.Connection | psycopg.AsyncConnection, statement: Prepared,
          params: dict[str, Any]) -> None:
    conn.pgconn.send_query_prepared(statement.name,
                                    [_text(params[n]) for n in statement.names])


def _prepared_once(conn: psycopg.Connection | psycopg.AsyncConnection, statement: Prepared,
                   results: list) -> None:
    if results[-1].status != pq.ExecStatus.COMMAND_OK:
        raise psycopg.errors.error_from_result(results[-1], encoding=conn.info.encoding)
    _ready[conn].add(statement.name)


def run_prepared(conn: psycopg.Connection, statement: Prepared, params: dict[str, Any]) -> int:
    """`statement` alone on `conn` (autocommit: its own transaction); its answer."""
    with conn.lock:
        if _unprepared(conn, statement):
            conn.pgconn.send_prepare(statement.name, statement.query)
            _prepared_once(conn, statement, conn.wait(generators.execute(conn.pgconn)))
        _sent(conn, statement, params)
        return _first(conn, conn.wait(generators.execute(conn.pgconn)))


async def run_prepared_async(conn: psycopg.AsyncConnection, statement: Prepared,
                             params: dict[str, Any]) -> int:
    """`run_prepared` on an event loop."""
    async with conn.lock:
        if _unprepared(conn, statement):
            conn.pgconn.send_prepare(statement.name, statement.query)
            _prepared_once(conn, statement, await conn.wait(generators.execute(conn.pgconn)))
        _sent(conn, statement, params)
        return _first(conn, await conn.wait(generators.execute(conn.pgconn)))


def send(conn: psycopg.Connection, jobs: list[Job]) -> list[Any]:
    """Run jobs in one pipeline (one round trip, one transaction); their answers. A
    single statement goes without one (a pipeline's sync costs client time), a step or
    a start below psycopg's cursors (`Prepared`)."""
    framed = _framed(jobs)
    if len(framed) == 1 and framed[0][0] in PREPARED:
        return _answers(jobs, [run_prepared(conn, PREPARED[framed[0][0]], framed[0][1])])
    try:
        with conn.pipeline() if len(framed) > 1 else nullcontext():
            cursors = [conn.execute(t, p, prepare=p is not None) for t, p in framed]
    except Exception as exc:
        if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        raise _refused(exc) from exc
    rows = [c.fetchone() for c, (_, p) in zip(cursors, framed, strict=True) if p is not None]
    return _answers(jobs, [_value(row) for row in rows])


def _value(row: tuple[Any, ...] | None) -> Any:
    """The value a statement of `send` answers (each answers one row)."""
    if row is None:
        raise RuntimeError("a statement answered no row")
    return row[0]


async def send_async(conn: psycopg.AsyncConnection, jobs: list[Job]) -> list[Any]:
    """`send` on an event loop."""
    framed = _framed(jobs)
    if len(framed) == 1 and framed[0][0] in PREPARED:
        statement, params = PREPARED[framed[0][0]], framed[0][1]
        return _answers(jobs, [await run_prepared_async(conn, statement, params)])
    try:
        async with conn.pipeline() if len(framed) > 1 else nullcontext():
            cursors = [await conn.execute(t, p, prepare=p is not None) for t, p in framed]
    except Exception as exc:
        if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
        raise _refused(exc) from exc
    rows = [await c.fetchone() for c, (_, p) in zip(cursors, framed, strict=True)
            if p is not None]
    return _answers(jobs, [_value(row) for row in rows])


# ------------------------------------------------------------------ the writer
def conninfo(db: Engine) -> str:
    """The libpq address of an SQLAlchemy engine's URL."""
    return db.url.set(drivername="postgresql").render_as_string(hide_password=False)


def writing(address: str) -> str:
    """The address for the writer's connections: the same, with `PLANS` among its
    options (beside the URL's own, e.g. a schema's search_path)."""
    params = conninfo_to_dict(address)
    params["options"] = f"{params.get('options', '')} {PLANS}".strip()
    return make_conninfo("", **params)


class PgWriter:
    """The write path on PostgreSQL through psycopg: a thread writes on a connection of
    its own (`save`, `insert`), an event loop hands its jobs to its `PgLoopWriter`, which
    sends the jobs that arrive together in one pipeline. A migration's steps (`moved`)
    need their compare-and-set answered before the rest: they go through SQLAlchemy."""

    def __init__(self, db: Engine):
        self.conninfo = writing(conninfo(db))
        self.fallback = SqlAlchemyWriter(db)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[psycopg.Connection] = []
        self._loops: LoopWriters[PgLoopWriter] = LoopWriters()
        self._started = 0  # instances started through this writer, up to ANALYZE_AT[-1]
        self._readers: list[tuple[int, psycopg.Connection, float]] = []  # idle: pid, used
        self._reading = threading.BoundedSemaphore(READERS)

    def insert(self, new: NewInstance) -> None:
        self.write(insert_job([new]))
        self._count_starts(1)

    async def insert_async(self, new: NewInstance) -> None:
        await self.run(insert_job([new]))
        self._count_starts(1)

    def _count_starts(self, n: int) -> None:
        if self._started >= ANALYZE_AT[-1]:
            return
        with self._lock:
            before, self._started = self._started, self._started + n
        if any(before < mark <= self._started for mark in ANALYZE_AT):
            threading.Thread(target=self.analyze_stale_tables, daemon=True,
                             name="bpflow-analyze").start()

    def analyze_stale_tables(self) -> list[str]:
        """ANALYZE the tables whose plans matter while their statistics are missing or
        out of date (see ANALYZE_AT): the cached plans of every connection are then made
        again. The names analyzed."""
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                names = [name for (name,) in conn.execute(STALE)]
                for name in names:
                    conn.execute(f"ANALYZE {_quote(name)}")
                return names
        except psycopg.Error as exc:  # only a matter of speed: autovacuum will do it
            log.warning("analyzing a new database's tables failed: %s", exc)
            return []

    def save(self, writes: list[Write]) -> set[str]:
        if any(w.moved for w in writes):
            return self.fallback.save(writes)
        return self.write(save_job(writes))

    async def save_async(self, writes: list[Write]) -> set[str]:
        if any(w.moved for w in writes):
            return await self.fallback.save_async(writes)
        return await self.run(save_job(writes))

    def insert_many(self, chunks: Iterable[list[NewInstance]], batch: dict[str, Any]) -> None:
        """A crowd (`Crowds`): every chunk's rows copied (COPY, table by table in the
        order of the foreign keys), then the batch row, in one transaction of a
        connection of its own: all of it or nothing. A thread copies each chunk while the
        next one is built (the server checks the rows' foreign keys meanwhile)."""
        started = 0
        with psycopg.connect(self.conninfo) as conn:  # commits at the end, or rolls back
            copier = Copier(conn)
            try:
                for chunk in chunks:
                    copier.put(chunk)
                    started += len(chunk)
            finally:
                copier.finish()
            statement, params = BATCH
            conn.execute(statement, params(batch))
        self._count_starts(started)

    # ------------------------------------------------------------- writing
    def write(self, job: Job) -> Any:
        """Run a job on this thread's connection: its answer once committed."""
        return send(self._own(), [job])[0]

    def rows(self, *reads: tuple[Read, dict[str, Any]]) -> list[list[Any]]:
        """The rows of each read, as its `row` makes them, all from one snapshot (a
        read-only transaction on one of the read connections: one round trip; a pooled
        SQLAlchemy connection costs three and several times the client's CPU).

        Reads are planned each time, not prepared: a plan kept from when the tables were
        nearly empty (a new database) scans whole tables once they have grown (seen: a
        sequential scan of `circle_states` for every read until the connection closed)."""
        with self._reading:
            conn = self._reader()
            try:
                framed = _framed_reads(reads)
                with conn.pipeline() if len(framed) > 1 else nullcontext():
                    cursors = [conn.execute(t, p, prepare=False) for t, p in framed]
                fetched = [c.fetchall() for c, (_, p) in zip(cursors, framed, strict=True)
                           if p is not None]
                return _read_rows(reads, fetched)
            except Exception:
                if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")
                raise
            finally:
                if not conn.closed and not conn.broken:
                    with self._lock:
                        self._readers.append((os.getpid(), conn, time.monotonic()))

    async def rows_async(self, *reads: tuple[Read, dict[str, Any]]) -> list[list[Any]]:
        """`rows` for an event loop, on read connections of the loop's own: no thread
        to hand over to and back (a stale cached copy, read again, is half the steps of
        a scaled-out server)."""
        return await self._loop_writer().read(reads)

    def _reader(self) -> psycopg.Connection:
        """An idle read connection of this process (checked when it was idle long
        enough to have been dropped), else a new one. Reads share READERS connections
        whatever thread they come from: a connection per thread, as writes have, ran
        the server out of connections under a web server's thread pool."""
        while True:
            with self._lock:
                idle = self._readers.pop() if self._readers else None
            if idle is None:
                return self._connect()
            pid, conn, used = idle
            if pid == os.getpid() and not conn.closed and (
                    time.monotonic() - used < IDLE_CHECK_S or _alive(conn)):
                return conn

    def _own(self) -> psycopg.Connection:
        """This thread's connection (made anew when there is none, it broke, it was
        inherited through a fork, or it was idle long enough to have been dropped)."""
        pid, conn, used = getattr(self._local, "conn", (None, None, 0.0))
        now = time.monotonic()
        if conn is not None and pid == os.getpid() and not conn.closed and (
                now - used < IDLE_CHECK_S or _alive(conn)):
            self._local.conn = (pid, conn, now)
            return conn
        conn = self._connect()
        self._local.conn = (os.getpid(), conn, now)
        return conn

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self.conninfo, autocommit=True)
        set_json_loads(orjson.loads, conn)  # for `rows`
        with self._lock:
            self._conns.append(conn)
        return conn

    async def run(self, job: Job) -> Any:
        """`write` for an event loop: its `PgLoopWriter` sends it with the jobs that
        arrive together."""
        return await self._loop_writer().run(job)

    def _loop_writer(self) -> PgLoopWriter:
        """The running event loop's `PgLoopWriter` (made on its first use)."""
        loop = asyncio.get_running_loop()
        return self._loops.of(loop, lambda: PgLoopWriter(self.conninfo, loop))

    def loop_writer(self, loop: asyncio.AbstractEventLoop) -> PgLoopWriter | None:
        return self._loops.get(loop)

    def close(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
            self._readers = []
            self._local = threading.local()
        for conn in conns:
            conn.close()
        self._loops.close()


class Copier:
    """Copies chunks of new instances on a thread of its own (`PgWriter.insert_many`):
    `put` hands one over (waiting while two are queued), `finish` waits for the last
    and raises what failed on either side."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self.queue: queue.Queue[list[NewInstance] | None] = queue.Queue(maxsize=2)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._copy, name="bpflow-copy", daemon=True)
        self.thread.start()

    def put(self, chunk: list[NewInstance]) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(chunk)

    def finish(self) -> None:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _copy(self) -> None:
        cursor = self.conn.cursor()
        while (chunk := self.queue.get()) is not None:
            if self.error is not None:
                continue  # what is left is dropped: the transaction will roll back
            try:
                for statement, rows in sql.new_rows(chunk):
                    form = COPY[statement]
                    with cursor.copy(form.command) as copy:
                        copy.set_types(form.types)
                        for values in form.rows(rows):
                            copy.write_row(values)
            except BaseException as exc:  # handed to the building thread
                self.error = exc


def _alive(conn: psycopg.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


async def _alive_async(conn: psycopg.AsyncConnection) -> bool:
    try:
        await conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


class PgLoopWriter:
    """Group commit driven from an event loop: the jobs that arrive together are shared
    among the free lanes (`LANES` connections, at least `MIN_BATCH` jobs a lane), each
    share a batch sent in one pipeline (one transaction); the jobs that arrive while
    every lane has a batch on its way form the next batches. Shared, the batches of
    concurrent flows fall out of step: the server writes one batch while the loop
    computes the steps of the flows another batch answered (16 flows in one batch: the
    two waited for each other, 1,450-1,650 steps/s; shared: 1,800-2,250). When a batch
    fails, it is rolled back and its jobs are sent again one by one, so only a failing
    job gets its error and the others commit. Reads (`read`) go on connections of their
    own, READERS at most."""

    def __init__(self, conninfo: str, loop: asyncio.AbstractEventLoop, lanes: int = LANES):
        self.conninfo, self.loop = conninfo, loop
        self.idle: list[psycopg.AsyncConnection | None] = [None] * lanes  # made when used
        self.conns: list[psycopg.AsyncConnection] = []
        self.pending: list[tuple[Job, asyncio.Future]] = []
        self.calling = False  # a lane is called for the pending jobs
        self.commits = self.jobs = 0  # transactions committed, jobs in them
        self.readers: list[tuple[psycopg.AsyncConnection, float]] = []  # idle; when used
        self.reading = asyncio.Semaphore(READERS)  # more reads at once wait

    def run(self, job: Job) -> asyncio.Future:
        future = self.loop.create_future()
        self.pending.append((job, future))
        if self.idle and not self.calling:
            self.calling = True
            self.loop.call_soon(self._call)  # what arrives in this loop turn joins
        return future

    def _call(self) -> None:
        """Each free lane takes its share of the pending jobs."""
        self.calling = False
        while self.pending and self.idle:
            conn = self.idle.pop()
            self.loop.create_task(self._drain(conn, self._share()))

    def _share(self) -> list[tuple[Job, asyncio.Future]]:
        """A lane's share of the pending jobs, shared with the free lanes."""
        share = max(MIN_BATCH, -(-len(self.pending) // (len(self.idle) + 1)))
        batch, self.pending = self.pending[:share], self.pending[share:]
        return batch

    async def _drain(self, conn: psycopg.AsyncConnection | None,
                     batch: list[tuple[Job, asyncio.Future]]) -> None:
        try:
            while batch:
                batch = [(job, f) for job, f in batch if not f.done()]
                if batch:
                    conn = await self._write(conn, batch)
                batch = self._share()
                self._call()  # the free lanes take the rest
        finally:
            self.idle.append(conn)

    async def _write(self, conn: psycopg.AsyncConnection | None,
                     batch: list[tuple[Job, asyncio.Future]]) -> psycopg.AsyncConnection | None:
        """Send a batch on a lane's connection (made anew when there is none or it
        broke); the connection, for the next batch."""
        try:
            if conn is None or conn.closed:
                conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
                self.conns.append(conn)
            answers = await send_async(conn, [job for job, _ in batch])
        except asyncio.CancelledError:  # the loop is going away, perhaps mid-transaction:
            if conn is not None:  # closed, the server rolls it back (no transaction left
                conn.pgconn.finish()  # open to hold back the event feed)
            raise
        except Exception as exc:
            if len(batch) == 1 or conn is None or conn.closed:
                settle([(f, None, exc) for _, f in batch])
                return conn
            for job, future in batch:  # each alone: only the failing one fails
                conn = await self._write(conn, [(job, future)])
            return conn
        self.commits += 1
        self.jobs += len(batch)
        settle([(f, a, None) for (_, f), a in zip(batch, answers, strict=True)])
        return conn

    async def read(self, reads: tuple[tuple[Read, dict[str, Any]], ...]) -> list[list[Any]]:
        """`PgWriter.rows` on this loop: on an idle read connection of the loop (checked
        when it was idle long enough to have been dropped), else a new one."""
        async with self.reading:
            conn = await self._reader()
            framed = _framed_reads(reads)
            try:
                async with conn.pipeline() if len(framed) > 1 else nullcontext():
                    cursors = [await conn.execute(t, p, prepare=False) for t, p in framed]
                fetched = [await c.fetchall() for c, (_, p) in zip(cursors, framed, strict=True)
                           if p is not None]
            except Exception:
                if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                    await conn.execute("ROLLBACK")
                raise
            finally:
                if not conn.closed and not conn.broken:
                    self.readers.append((conn, time.monotonic()))
            return _read_rows(reads, fetched)

    async def _reader(self) -> psycopg.AsyncConnection:
        while self.readers:
            conn, used = self.readers.pop()
            if not conn.closed and (time.monotonic() - used < IDLE_CHECK_S
                                    or await _alive_async(conn)):
                return conn
            self.conns.remove(conn)
            await conn.close()
        conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        set_json_loads(orjson.loads, conn)
        self.conns.append(conn)
        return conn

    def close(self) -> None:
        self.readers = []
        conns, self.conns = self.conns, []
        for conn in conns:
            if not conn.closed:
                conn.pgconn.finish()  # the loop may be gone: the socket closed straight
