"""Database fixtures: tests run on SQLite and on PostgreSQL (each test in its own schema).

PostgreSQL comes from BPFLOW_TEST_PG_URL (default: the local server, database `test`).
When it cannot be reached the PostgreSQL variants skip with a loud reason, except under
CI (CI=true), where an unreachable server fails the run.

Alembic's upgrade runs once per process and database kind: a new SQLite database is a copy
of the file it made, a new PostgreSQL schema gets the statements it sent, replayed (tests/
test_fresh_databases.py checks both give what an upgrade gives). Under pytest-xdist (`make
test`), the tests that start servers (tests/browser/, tests/scaled/) run in one worker.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, event, text

from bpflow.store import Store, accounts
from bpflow.store.connection import make_engine, normalize_url
from bpflow.store.migrate import upgrade

# The tests' HTTP servers listen on 127.0.0.1, which the egress guard refuses unless allowed
# (set before the app and any server process read it; tests of the guard change it).
os.environ.setdefault("BPFLOW_EGRESS_ALLOW", "127.0.0.1")
# Passwords are hashed with scrypt at N=2**14: about 70 ms of CPU for each user a test adds
# and each sign-in it makes, a third of the API tests' CPU. The tests' own process hashes at
# 2**10; a hash records its cost, so checking one works as before. The servers the tests
# start hash at the real cost, and tests/store/test_store.py checks that cost in a process
# of bpflow's own.
accounts.SCRYPT_N = 2**10
PG_URL = normalize_url(os.environ.get("BPFLOW_TEST_PG_URL",
                                      "postgresql://postgres@127.0.0.1:5432/test"))
SECRET = b"store-test-secret"
# The tests that start servers run in two pytest-xdist workers, each chain one test after
# the other: the browser tests (the app built in `.web`, Chromium) in one, the scaled-out
# backends and workers of tests/scaled/ (no frontend: a web and a states folder of their
# own, tests/scaled/conftest.py `server_env`) in another, so no two servers share a `.web`,
# a database or a port; the other tests go to whichever worker is free.
SERVERS = ("tests/browser/", "tests/scaled/")
# Modules whose tests share one expensive run (a module fixture: mypy's first run over the
# tree): their tests go to one worker together.
TOGETHER = ("tests/test_types.py",)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's `loadscope` scheduling with one scope for each folder of SERVERS (the
    largest scopes, so they start first), one for each module of TOGETHER and one for each
    other test. (Its `loadgroup` would do with
    `xdist_group` marks, but pytest 9.2 ignores the group xdist 3.8 writes into node ids.)"""
    if config.getvalue("dist") == "each":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ServersApart(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(SERVERS):
                return next(folder for folder in SERVERS if nodeid.startswith(folder))
            return nodeid.split("::")[0] if nodeid.startswith(TOGETHER) else nodeid

    return ServersApart(config, log)


_CPU_START = pytest.StashKey[float]()


def _cpu_used() -> float:
    """CPU seconds of this process and of the child processes it has waited for."""
    import resource
    import time
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_START] = _cpu_used()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """The CPU a test cost (set-up, call and tear-down, with the child processes it waited
    for) as its `cpu_s` property in `--junitxml` reports: on a busy machine wall times say
    little, CPU times say what to make cheaper."""
    try:
        return (yield)
    finally:
        if _CPU_START in item.stash:
            item.user_properties.append(("cpu_s", round(_cpu_used() - item.stash[_CPU_START],
                                                        3)))



def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test gets a node id of its own: schemathesis gives the tests of all API
    operations one id (`test_api_conforms_to_its_openapi`, their names say the operation),
    and pytest-xdist tells tests apart by their ids, so it would run one of them and drop
    the others. A test sharing its id with another gets the id its name makes."""
    count: dict[str, int] = {}
    for item in items:
        count[item.nodeid] = count.get(item.nodeid, 0) + 1
    for item in items:
        if count[item.nodeid] > 1 and item.parent is not None:
            item._id = item.parent.id.child(item.name)  # pytest 9: a node's id
    assert len({item.nodeid for item in items}) == len(items), "tests sharing a node id"


# "sqlite": the upgraded file; "postgres": the upgrade's statements; a `fill`: its file
_upgraded: dict[Any, Any] = {}
_upgrading = threading.Lock()


def sqlite_database(path: Path, fill: Callable[[str], None] | None = None) -> str:
    """The URL of a new, upgraded SQLite database at `path`: a copy of the file one upgrade
    made in this process (an upgrade costs Alembic ~0.4 s; the copy is the same file). With
    `fill`, a copy of that file once `fill(url)` added what such databases start with (users
    and templates: the copies share their creation times and password salts)."""
    with _upgrading:
        if "sqlite" not in _upgraded:
            folder = Path(tempfile.mkdtemp(prefix="bpflow-upgraded-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            upgrade(f"sqlite:///{folder / 'bpflow.db'}")
            _upgraded["sqlite"] = folder / "bpflow.db"
        if fill is not None and fill not in _upgraded:
            filled = _upgraded["sqlite"].with_name(f"{fill.__name__}.db")
            shutil.copyfile(_upgraded["sqlite"], filled)
            fill(f"sqlite:///{filled}")
            _upgraded[fill] = filled
    source = _upgraded["sqlite" if fill is None else fill]
    for suffix in ("", "-wal"):  # a closed database's last connection leaves no WAL
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{path}{suffix}")
    return f"sqlite:///{path}"


def _upgrade_postgres(url: str) -> None:
    """Upgrade the empty schema of `url`: Alembic the first time in this process (its
    statements kept), those statements replayed in one transaction afterwards (the
    migrations name no schema: they act on the search path's)."""
    engine = make_engine(url)
    try:
        with _upgrading:
            if "postgres" not in _upgraded:
                sent: list[tuple[str, Any, bool]] = []

                def keep(conn, cursor, statement, parameters, context, executemany) -> None:
                    sent.append((statement, parameters, executemany))
                event.listen(engine, "before_cursor_execute", keep)
                upgrade(engine)
                _upgraded["postgres"] = sent
                return
        with engine.begin() as conn:
            cursor = conn.connection.driver_connection.cursor()
            for statement, parameters, many in _upgraded["postgres"]:
                (cursor.executemany if many else cursor.execute)(statement, parameters)
    finally:
        engine.dispose()


def _pg_reason() -> str | None:
    try:
        engine = create_engine(PG_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
        return None
    except Exception as exc:  # any failure to connect
        return f"PostgreSQL at {PG_URL} is unreachable: {str(exc).splitlines()[0]}"


@pytest.fixture(scope="session")
def pg_available() -> str | None:
    return _pg_reason()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path, pg_available) -> Iterator[str]:
    """A fresh, upgraded database; the PostgreSQL one lives in a schema of its own."""
    if request.param == "sqlite":
        yield sqlite_database(tmp_path / "bpflow.db")
        return
    need_postgres(pg_available)
    with pg_schema() as url:
        yield url


def need_postgres(unreachable: str | None) -> None:
    """Skip loudly when PostgreSQL is unreachable (`pg_available`'s reason); under CI fail."""
    if unreachable:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI requires PostgreSQL: {unreachable}")
        warnings.warn(unreachable, stacklevel=2)
        pytest.skip(f"SKIPPING POSTGRESQL TESTS: {unreachable}")


# What a schema of this process's upgrade holds, to tell a schema a test changed (its
# tables, columns, defaults, indexes, constraints, triggers, functions) from a fresh one.
CATALOG_PRINT = """
    SELECT md5(string_agg(x, ',' ORDER BY x)) FROM (
      SELECT c.relname || '.' || a.attname || ':' || a.attnum || ':' || a.atttypid || ':'
             || a.attnotnull || ':'
             || coalesce(pg_get_expr(d.adbin, d.adrelid), '') AS x
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE c.relnamespace = current_schema()::regnamespace AND a.attnum > 0
         AND NOT a.attisdropped
      UNION ALL SELECT 'i:' || replace(pg_get_indexdef(i.indexrelid), current_schema(), 'S')
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indrelid
       WHERE c.relnamespace = current_schema()::regnamespace
      UNION ALL SELECT 't:' || tgname || tgenabled::text
             || replace(pg_get_triggerdef(t.oid), current_schema(), 'S') FROM pg_trigger t
        JOIN pg_class c ON c.oid = t.tgrelid
       WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
      UNION ALL SELECT 'c:' || conname
             || replace(pg_get_constraintdef(oid), current_schema(), 'S') FROM pg_constraint
       WHERE connamespace = current_schema()::regnamespace
      UNION ALL SELECT 'f:' || proname || md5(replace(prosrc, current_schema(), 'S')) FROM pg_proc
       WHERE pronamespace = current_schema()::regnamespace) AS s"""


class _Fresh:
    """The upgraded PostgreSQL schemas of this process, emptied for the next test.

    Building a schema (the upgrade's ~160 statements) costs PostgreSQL ~0.5 s, for each of
    ~560 tests; emptying one costs ~0.05 s. A schema a test is done with is checked to be
    the upgrade's still (CATALOG_PRINT), and just before the next test takes it, every table
    is truncated (sequences restarted), its statistics deleted (plans are made as for new
    tables: tests/store/test_pg_writer.py) and the rows the upgrade wrote put back (the
    default tenant); a schema changed, or one still locked by a connection of the test before, is
    dropped instead, and the next test gets a new one."""

    def __init__(self) -> None:
        self.idle: list[str] = []
        self.lock = threading.Lock()
        self.shape: tuple[str, list[str], dict[str, list[str]]] | None = None

    def url(self, schema: str) -> str:
        sep = "&" if "?" in PG_URL else "?"
        return f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"

    def learn(self, url: str) -> None:
        """The fingerprint, tables and rows of a freshly upgraded schema (once)."""
        if self.shape is not None:
            return
        engine = create_engine(url)
        try:
            with engine.begin() as conn:
                print_ = conn.execute(text(CATALOG_PRINT)).scalar_one()
                tables = list(conn.execute(text(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                    "AND tablename <> 'alembic_version' ORDER BY 1")).scalars())
                rows = {t: list(conn.execute(text(f'SELECT row_to_json(t)::text FROM "{t}" t'))
                                .scalars()) for t in tables}
            self.shape = (print_, tables, {t: r for t, r in rows.items() if r})
        finally:
            engine.dispose()

    def give_back(self, schema: str, admin) -> bool:
        """Keep `schema` for the next test if it is still the upgrade's."""
        if self.shape is None:
            return False
        try:
            with admin.begin() as conn:
                conn.execute(text(f'SET LOCAL search_path TO "{schema}"'))
                conn.execute(text("SET LOCAL lock_timeout = '2s'"))
                same = conn.execute(text(CATALOG_PRINT)).scalar_one() == self.shape[0]
        except Exception:  # noqa: BLE001 - locked or gone: not kept
            return False
        if same:
            with self.lock:
                self.idle.append(schema)
        return same

    def take(self, admin) -> str | None:
        """An idle schema, emptied to the upgrade's rows, or None."""
        while True:
            with self.lock:
                if not self.idle:
                    return None
                schema = self.idle.pop()
            assert self.shape is not None
            _, tables, rows = self.shape
            try:
                with admin.begin() as conn:
                    conn.execute(text(f'SET LOCAL search_path TO "{schema}"'))
                    conn.execute(text("SET LOCAL lock_timeout = '2s'"))
                    conn.execute(text("TRUNCATE " + ", ".join(f'"{t}"' for t in tables)
                                      + " RESTART IDENTITY CASCADE"))
                    # never analyzed, as a new table is (truncated, its row estimate is;
                    # the planner's column statistics stay until deleted: a superuser's)
                    conn.execute(text(
                        "DELETE FROM pg_statistic WHERE starelid IN (SELECT oid FROM pg_class"
                        " WHERE relnamespace = current_schema()::regnamespace)"))
                    for table, kept in rows.items():
                        conn.execute(text(
                            f'INSERT INTO "{table}" SELECT * FROM '
                            f'json_populate_record(null::"{table}", CAST(:row AS json))'),
                            [{"row": row} for row in kept])
                return schema
            except Exception:  # noqa: BLE001 - still locked by a connection left open
                _drop(admin, schema)


_FRESH = _Fresh()


def _drop(admin, schema: str) -> None:
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


@atexit.register
def _drop_idle() -> None:
    if not _FRESH.idle:
        return
    admin = create_engine(PG_URL)
    try:
        for schema in _FRESH.idle:
            _drop(admin, schema)
    finally:
        admin.dispose()


@contextlib.contextmanager
def pg_schema(prepare: Callable[[str], Any] | None = None) -> Iterator[str]:
    """The URL of a fresh PostgreSQL schema of its own, dropped or emptied afterwards, made
    ready by `prepare` (default: this process's upgrade replayed, or a schema an earlier
    test had, emptied: `_Fresh`)."""
    admin = create_engine(PG_URL)
    schema = _FRESH.take(admin) if prepare is None else None
    try:
        if schema is None:
            schema = f"bpflow_test_{uuid.uuid4().hex[:12]}"
            with admin.begin() as conn:
                conn.execute(text(f'CREATE SCHEMA "{schema}"'))
            (prepare or _upgrade_postgres)(_FRESH.url(schema))
            if prepare is None:
                _FRESH.learn(_FRESH.url(schema))
        yield _FRESH.url(schema)
    finally:
        if prepare is not None or not _FRESH.give_back(schema, admin):
            _drop(admin, schema)
        admin.dispose()


@pytest.fixture
def store(db_url) -> Iterator[Store]:
    s = Store(db_url, secret=SECRET)
    yield s
    s.close()


def processes():
    """A multiprocessing context for the tests that race two processes of their own: the
    forkserver's, with bpflow imported once in its server (a spawned process imports it in
    ~3 s of CPU each; a fork of the server starts at once, without the test process's
    threads)."""
    import multiprocessing as mp
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["bpflow.store", "bpflow.mailbox", "bpflow.interactions",
                                "bpflow.worker", "tests.conftest"])
    return ctx


def raced(target: Callable[..., None], sides: dict[str, tuple]) -> dict[str, Any]:
    """Run `target(*args, go, out)` for each side in a process of its own (`processes()`),
    the sides meeting at the barrier `go` before each move; each puts `(side, results)` on
    `out`. The results by side, once every process has exited cleanly."""
    ctx = processes()
    out, go = ctx.Queue(), ctx.Barrier(len(sides))
    procs = [ctx.Process(target=target, args=(*args, go, out)) for args in sides.values()]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def settled(read: Callable[[], Any], done: Callable[[Any], bool],
            wait_s: float = 30.0) -> Any:
    """What `read()` gives once `done` holds of it, or what it gives after `wait_s`.

    For what the tests read from the event feed: on PostgreSQL a page holds only what
    committed before the oldest transaction still open anywhere on the server (so a late
    commit is never skipped), and other tests' transactions hold it back for a moment."""
    import time
    deadline = time.monotonic() + wait_s
    while True:
        got = read()
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def run_async(coro):
    """`asyncio.run` on a thread of its own: the browser tests' Playwright keeps an event
    loop marked running in the main thread for the whole session."""
    import asyncio
    import threading
    box = {}

    def target():
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture(autouse=True)
def _fresh_sign_in_limit() -> Iterator[None]:
    """Failed sign-ins count per process: each test starts with none."""
    from bpflow.auth import SIGN_IN_FAILURES
    SIGN_IN_FAILURES.clear()
    yield
    SIGN_IN_FAILURES.clear()


@pytest.fixture(autouse=True)
def _logging_put_back() -> Iterator[None]:
    """A CLI run in-process (`main(["worker", ...])`) sets up the process's log lines on
    stderr (`bpflow.logs.setup`); what it added is taken off after the test, so a later
    test in the same process sees only its own stderr."""
    import logging

    from bpflow import logs
    root = logging.getLogger()
    named = ("bpflow", *logs.HTTP_LOGGERS)
    before, levels = list(root.handlers), {n: logging.getLogger(n).level for n in named}
    root_level = root.level
    yield
    added = [h for h in root.handlers if isinstance(h, logs._Lines) and h not in before]
    if not added:
        return
    for handler in added:
        root.removeHandler(handler)
    root.setLevel(root_level)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
