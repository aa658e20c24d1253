"""bpflow scaled out on the real servers: two Reflex backends (`reflex run --env prod
--backend-only`, each on its own port, Reflex's Redis state manager) and two `bpflow
worker`s, all on a PostgreSQL schema of the module's own (SPEC §14).

- ``cluster`` (module): the four processes, started together; ``cluster.a`` and
  ``cluster.b`` are the backends' base URLs, ``cluster.store`` a Store on their database
  with their secret, ``cluster.workers`` the worker processes. Logs go to
  ``test-output/scaled/``.

Without PostgreSQL or Redis the tests skip with a loud reason, except under CI (CI=true),
where an absent server fails the run (as tests/conftest.py does for PostgreSQL).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bpflow.store import Store
from tests.conftest import pg_schema

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output" / "scaled"
REDIS_URL = os.environ.get("BPFLOW_TEST_REDIS_URL", "redis://127.0.0.1:6379")
SECRET = "scaled-test-secret-0123456789-abcdefgh"
LEASE_S = 8  # the workers' lease: a killed worker's instance is due again this soon
# A backend starts in about 10 s on a busy machine; the first start on a fresh checkout
# may set up .web/ first.
STARTUP_S = float(os.environ.get("BPFLOW_SCALED_STARTUP_TIMEOUT", "180"))


def _redis_reason() -> str | None:
    import redis
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
        return None
    except Exception as exc:  # any failure to connect
        return f"Redis at {REDIS_URL} is unreachable: {exc}"


def require_servers(pg_reason: str | None) -> None:
    reason = pg_reason or _redis_reason()
    if not reason:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI requires PostgreSQL and Redis: {reason}")
    warnings.warn(reason, stacklevel=1)
    pytest.skip(f"SKIPPING SCALED-OUT TESTS: {reason}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def kill(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send `sig` to the process and everything it started (it leads its own group)."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    kill(process, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        kill(process)
        process.wait(timeout=10)


@dataclass
class Cluster:
    store: Store
    a: str
    b: str
    backends: list[subprocess.Popen] = field(default_factory=list)
    workers: list[subprocess.Popen] = field(default_factory=list)


def server_env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("REFLEX_BUN_PATH", str(ROOT / ".tools/node_modules/bun/bin/bun.exe"))
    env.pop("REFLEX_FRONTEND_PORT", None)
    env.pop("REFLEX_BACKEND_PORT", None)
    env.update(DATABASE_URL=url, BPFLOW_SECRET=SECRET, REFLEX_REDIS_URL=REDIS_URL,
               BPFLOW_HOME=str(OUTPUT / ".bpflow"), BPFLOW_INPROCESS_WORKER="0",
               GRANIAN_WORKERS="1", PYTHONUNBUFFERED="1")
    return env


def spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        return subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(urls: dict[str, subprocess.Popen], logs: dict[str, Path],
             path: str = "/api/health") -> None:
    """Until every base URL answers `path`; a process that exits fails the test with its
    log's tail."""
    deadline = time.monotonic() + STARTUP_S
    pending = dict(urls)
    while pending:
        for url, process in list(pending.items()):
            if answers(url + path):
                del pending[url]
            elif process.poll() is not None:
                tail = logs[url].read_text(errors="replace").splitlines()[-30:]
                pytest.fail(f"backend {url} exited with {process.returncode}:\n"
                            + "\n".join(tail), pytrace=False)
        if pending and time.monotonic() > deadline:
            pytest.fail(f"backends {sorted(pending)} did not answer within {STARTUP_S:.0f} s "
                        f"(logs in {OUTPUT})", pytrace=False)
        time.sleep(0.3)


@pytest.fixture(scope="module")
def cluster(pg_available) -> Iterator[Cluster]:
    require_servers(pg_available)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with pg_schema() as url:
        env = server_env(url)
        store = Store(url, secret=SECRET.encode())
        a, b = (f"http://127.0.0.1:{free_port()}" for _ in range(2))
        cluster = Cluster(store, a, b)
        logs = {}
        try:
            # one after the other: a starting Reflex clears the disk state files of the
            # folder, and two at once raced on the same file
            for name, base in (("a", a), ("b", b)):
                logs[base] = OUTPUT / f"backend-{name}.log"
                cluster.backends.append(spawn(
                    [sys.executable, "-m", "reflex", "run", "--env", "prod", "--backend-only",
                     "--backend-port", base.rsplit(":", 1)[1], "--loglevel", "info"],
                    env, logs[base]))
                wait_for({base: cluster.backends[-1]}, logs)
            for i in (1, 2):
                cluster.workers.append(spawn(
                    [sys.executable, "-m", "bpflow.cli", "worker", "--poll", "0.1",
                     "--lease", str(LEASE_S)], env, OUTPUT / f"worker-{i}.log"))
            yield cluster
        finally:
            for process in cluster.backends + cluster.workers:
                stop(process)
            store.close()
