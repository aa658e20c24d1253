"""`make run-scaled`'s launcher (bpflow/scaled.py): what it starts, the database it
creates when missing, and what stops it before anything starts. The set-up itself running
is tests/scaled/'s."""

from __future__ import annotations

import os
import uuid
import warnings

import pytest
from sqlalchemy import create_engine, text

from bpflow import scaled
from tests.conftest import PG_URL


def test_backends_are_granian_workers_of_one_server_and_leave_the_work_to_the_workers():
    (_, reflex, env), *workers = scaled.commands(backends=3, workers=2, port=4000)
    assert reflex[2:] == ["reflex", "run", "--env", "prod", "--single-port",
                          "--frontend-port", "4000", "--backend-port", "4000"]
    assert env == {"GRANIAN_WORKERS": "3", "BPFLOW_INPROCESS_WORKER": "0"}
    assert [command[-1] for _, command, _ in workers] == ["worker", "worker"]


def test_a_database_that_is_not_postgresql_is_refused():
    with pytest.raises(scaled.SetupError, match="PostgreSQL"):
        scaled.ensure_database("sqlite:///bpflow.db")


def test_unreachable_redis_stops_it_before_the_database_is_touched(monkeypatch, capsys):
    name = f"bpflow_never_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("REFLEX_REDIS_URL", "redis://127.0.0.1:9")
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:9/{name}")
    assert scaled.run(backends=1, workers=1, port=4000) == 2
    assert "cannot reach Redis at redis://127.0.0.1:9" in capsys.readouterr().err


def test_a_missing_database_is_created_and_said_so_once(pg_available):
    if pg_available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI requires PostgreSQL: {pg_available}")
        warnings.warn(pg_available, stacklevel=1)
        pytest.skip(f"SKIPPING POSTGRESQL TESTS: {pg_available}")
    name = f"bpflow_test_{uuid.uuid4().hex[:12]}"
    server = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    url = server.url.set(database=name).render_as_string(hide_password=False)
    try:
        assert scaled.ensure_database(url).endswith("CREATED (it was missing)")
        assert scaled.ensure_database(url).endswith("exists")
    finally:
        with server.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        server.dispose()
