"""`make run-scaled`'s launcher (bpflow/scaled.py, bpflow/supervision.py, bpflow/tether.py):
the programs supervisord runs and its configuration, the console's labelled lines, a
command tied to its parent, the database it creates when missing, and what stops it
before anything starts. The set-up itself running, under faults, is tests/scaled/'s."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from supervisor.datatypes import RestartUnconditionally

from bpflow import scaled, supervision
from tests.conftest import PG_URL
from tests.servers import free_port


def test_each_backend_and_worker_is_a_program_named_in_its_environment():
    backend_1, backend_2, worker_1, worker_2 = supervision.programs(
        backends=2, workers=2, port=4000, lease=8, poll=0.1)
    assert [p.name for p in (backend_1, backend_2, worker_1, worker_2)] == [
        "backend-1", "backend-2", "worker-1", "worker-2"]
    # one Granian worker each, all on the one port; requests only
    assert backend_1.command[1:] == ["-m", "bpflow_app.serve", "--port", "4000"]
    assert backend_2.env == {"GRANIAN_WORKERS": "1", "BPFLOW_INPROCESS_WORKER": "0",
                             "BPFLOW_PROCESS": "backend-2", "PYTHONUNBUFFERED": "1"}
    assert worker_2.command[1:] == ["-m", "bpflow.cli", "worker", "--lease", "8",
                                    "--poll", "0.1"]
    assert worker_2.env == {"BPFLOW_LEASE_SECONDS": "8", "BPFLOW_PROCESS": "worker-2",
                            "PYTHONUNBUFFERED": "1"}


def test_without_lease_and_poll_the_workers_keep_their_own_defaults():
    _, worker = supervision.programs(backends=1, workers=1, port=4000, backend_only=True)
    assert worker.command[-1] == "worker"
    assert "BPFLOW_LEASE_SECONDS" not in worker.env
    assert supervision.programs(1, 0, 4000, backend_only=True)[0].command[-1] == (
        "--backend-only")


def test_supervisord_reads_its_configuration_as_written(tmp_path):
    from supervisor.options import ServerOptions

    home = tmp_path / "home"
    conf = scaled.write_config(home, supervision.programs(backends=2, workers=1, port=4000,
                                                          lease=8))
    assert oct(conf.stat().st_mode & 0o777) == "0o600"  # it holds the socket's password
    options = ServerOptions()
    options.realize(args=["-c", str(conf)])
    (server,) = options.server_configs
    assert server["file"] == str(home / "supervisor.sock") and server["password"]
    assert oct(server["chmod"]) == "0o700"
    (group_1, group_2, group_3) = sorted(options.process_group_configs, key=lambda g: g.name)
    programs = {g.name: g.process_configs[0] for g in (group_1, group_2, group_3)}
    assert sorted(programs) == ["backend-1", "backend-2", "worker-1"]
    for name, p in programs.items():
        # started tied to supervisord, restarted whenever it exits, with back-off when it
        # fails to start, stopped and killed with whatever it started, its own log
        assert p.command.split()[1:3] == ["-m", "bpflow.tether"]
        assert p.autorestart is RestartUnconditionally
        assert p.startretries == supervision.STARTRETRIES
        assert p.stopasgroup and p.killasgroup
        assert p.stdout_logfile == str(home / "logs" / f"{name}.log")
        assert p.redirect_stderr
        assert p.environment["BPFLOW_PROCESS"] == name
    assert programs["backend-1"].startsecs == 10
    assert programs["worker-1"].startsecs == 3


def test_a_percent_sign_in_a_path_is_refused_before_anything_starts(tmp_path):
    # supervisord expands `%(...)s` in its values, some of them twice
    with pytest.raises(scaled.SetupError, match="supervisord cannot take a '%'"):
        scaled.write_config(tmp_path / "h%me", supervision.programs(1, 1, 4000))
    assert not (tmp_path / "h%me").exists()


def test_a_home_too_deep_for_a_unix_socket_has_its_socket_in_the_temporary_folder():
    deep = Path("/srv") / ("x" * 120)
    path = supervision.socket_path(deep)
    assert path.parent == Path(tempfile.gettempdir()) and path.name.startswith("bpflow-")
    assert path == supervision.socket_path(deep) != supervision.socket_path(deep / "y")


def test_the_console_names_each_line_and_waits_for_a_line_to_end(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("before the start\n")  # an earlier run's: not shown
    out = io.StringIO()
    follower = supervision.Follower({"backend-1": a, "worker-1": b}, out)
    with a.open("a") as f:
        f.write("one\ntw")
    b.write_text("w\n")
    assert follower.pump() == 2
    with a.open("a") as f:
        f.write("o\n")
    follower.pump()
    a.write_text("rotated\n")  # a new, shorter file: read from its start
    follower.pump()
    b.write_text("w\nunfinished")
    follower.pump(final=True)
    assert out.getvalue().splitlines() == [
        "backend-1 | one", "worker-1  | w", "backend-1 | two", "backend-1 | rotated",
        "worker-1  | unfinished"]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_tethered_command_dies_with_its_parent_however_the_parent_dies():
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\n"
         "for args in (['-m', 'bpflow.tether', 'sleep', '60'], ['-c', 'import time; "
         "time.sleep(60)']):\n"
         "    print(subprocess.Popen([sys.executable, *args]).pid, flush=True)\n"
         "time.sleep(60)"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    tied, free = int(parent.stdout.readline()), int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 10
        # the tether execs its command: the same pid becomes `sleep`
        while "sleep" not in Path(f"/proc/{tied}/cmdline").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        while alive(tied):
            assert time.monotonic() < deadline, "the tethered command outlived its parent"
            time.sleep(0.05)
        assert alive(free)  # what is not tethered lives on
    finally:
        os.killpg(parent.pid, signal.SIGKILL)


def test_the_tether_refuses_a_parent_other_than_the_expected_one():
    out = subprocess.run([sys.executable, "-c", "import os; from bpflow.tether import "
                          "die_with_parent; print(die_with_parent(os.getppid() + 1), "
                          "die_with_parent(os.getppid()))"], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"]
    missing = subprocess.run([sys.executable, "-m", "bpflow.tether", "/nonexistent/x"],
                             capture_output=True, text=True)
    assert missing.returncode == 127
    assert missing.stderr == "bpflow.tether: cannot run /nonexistent/x: No such file or directory\n"


def test_the_metrics_folder_starts_without_the_last_runs_counts(tmp_path):
    folder = tmp_path / "metrics"
    scaled.fresh_metrics(folder)
    (folder / "counter_123.db").write_bytes(b"old counts")
    (folder / "notes.txt").write_text("not ours")
    scaled.fresh_metrics(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_a_taken_port_stops_it_before_anything_starts(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert scaled.run(backends=1, workers=1, port=port) == 2
    assert f"bpflow: port {port} is in use" in capsys.readouterr().err


def test_a_database_that_is_not_postgresql_is_refused():
    with pytest.raises(scaled.SetupError, match="PostgreSQL"):
        scaled.ensure_database("sqlite:///bpflow.db")


def test_unreachable_redis_stops_it_before_the_database_is_touched(monkeypatch, capfd,
                                                                  tmp_path):
    name = f"bpflow_never_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("BPFLOW_HOME", str(tmp_path))
    monkeypatch.setenv("REFLEX_REDIS_URL", "redis://127.0.0.1:9")
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:9/{name}")
    assert scaled.run(backends=1, workers=1, port=free_port()) == 2
    assert "bpflow: cannot reach Redis at redis://127.0.0.1:9" in capfd.readouterr().err


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
