"""Database fixtures: tests run on SQLite and on PostgreSQL (each test in its own schema).

PostgreSQL comes from BPFLOW_TEST_PG_URL (default: the local server, database `test`).
When it cannot be reached the PostgreSQL variants skip with a loud reason, except under
CI (CI=true), where an unreachable server fails the run.
"""

from __future__ import annotations

import contextlib
import os
import uuid
import warnings
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text

from bpflow.store import Store
from bpflow.store.connection import normalize_url
from bpflow.store.migrate import upgrade

# The tests' HTTP servers listen on 127.0.0.1, which the egress guard refuses unless allowed
# (set before the app and any server process read it; tests of the guard change it).
os.environ.setdefault("BPFLOW_EGRESS_ALLOW", "127.0.0.1")
PG_URL = normalize_url(os.environ.get("BPFLOW_TEST_PG_URL",
                                      "postgresql://postgres@127.0.0.1:5432/test"))
SECRET = b"store-test-secret"


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
        url = f"sqlite:///{tmp_path / 'bpflow.db'}"
        upgrade(url)
        yield url
        return
    if pg_available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI requires PostgreSQL: {pg_available}")
        warnings.warn(pg_available, stacklevel=1)
        pytest.skip(f"SKIPPING POSTGRESQL TESTS: {pg_available}")
    with pg_schema() as url:
        yield url


@contextlib.contextmanager
def pg_schema() -> Iterator[str]:
    """The URL of a fresh, upgraded PostgreSQL schema of its own, dropped afterwards."""
    schema = f"bpflow_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    url = f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    try:
        upgrade(url)
        yield url
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def store(db_url) -> Iterator[Store]:
    s = Store(db_url, secret=SECRET)
    yield s
    s.close()


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
