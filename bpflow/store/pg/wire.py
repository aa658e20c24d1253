"""What the PostgreSQL driver sends: jobs (statements run together, with what their
answers give the caller), sent in one pipeline (one round trip, one transaction) or, a
step or a start alone, below psycopg's cursors as a statement prepared once per
connection (`Prepared`)."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import generators, pq
from psycopg.pq import TransactionStatus
from sqlalchemy.exc import IntegrityError

from bpflow.store.pg.statements import START, STEP, start_params, step_params
from bpflow.store.writing import NewInstance, Write


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
