"""`make run-scaled`: bpflow scaled out on one machine (SPEC §14).

Starts Reflex's production server with N backend processes (Granian workers) behind one
port, serving the frontend too, with Reflex's Redis state manager, and M `bpflow worker`s,
all on one PostgreSQL database; Ctrl-C stops all of them. Before that it creates the
database when the server does not have it, and prepares it as `make run` does (schema
upgrade, the templates of upload/workflow/ whose names are unknown, the demo users).

    python -m bpflow.scaled [--backends N] [--workers M] [--port PORT] [--backend-only]

`--backend-only` serves the REST API and the Reflex event socket without the frontend
(`reflex run --backend-only`: no frontend build to wait for), as bench/paper_flow.py and
bench/soak.py measure it.

`DATABASE_URL` (default postgresql://postgres@127.0.0.1:5432/bpflow) and
`REFLEX_REDIS_URL` (default redis://127.0.0.1:6379) name the servers; the secret and the
demo users' passwords are kept in `BPFLOW_HOME` (default .bpflow/scaled/).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bpflow.store.public import normalize_url

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/bpflow"
DEFAULT_REDIS = "redis://127.0.0.1:6379"
STOP_WAIT_S = 20  # what a process gets to stop after SIGINT/SIGTERM before SIGKILL


class SetupError(Exception):
    """What keeps the scaled set-up from starting, said in one line."""


def ensure_database(url: str) -> str:
    """Create the PostgreSQL database of `url` when the server does not have it; say
    which happened."""
    target = make_url(normalize_url(url))
    if not target.drivername.startswith("postgresql"):
        raise SetupError(f"DATABASE_URL must name a PostgreSQL database, not {url!r}")
    name = target.database
    shown = make_url(url).render_as_string(hide_password=True)
    admin = create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT",
                          connect_args={"connect_timeout": 5})
    try:
        with admin.connect() as conn:
            if conn.execute(text("select 1 from pg_database where datname = :n"),
                            {"n": name}).first():
                return f"database {shown} exists"
            conn.execute(text(f'CREATE DATABASE "{name}"'))
            return f"database {shown} CREATED (it was missing)"
    except Exception as exc:
        raise SetupError(f"cannot reach PostgreSQL at {shown}: "
                         f"{str(exc).splitlines()[0]}") from None
    finally:
        admin.dispose()


def check_redis(url: str) -> None:
    import redis
    try:
        redis.Redis.from_url(url, socket_connect_timeout=5).ping()
    except Exception as exc:
        raise SetupError(f"cannot reach Redis at {url}: {exc}") from None


def prepare(env: dict[str, str]) -> None:
    """The database as `make run` prepares it (the `db` target's three commands)."""
    cli = Path(sys.executable).with_name("bpflow")
    for args in (["db", "upgrade"], ["import", "--new-only", "upload/workflow"],
                 ["seed-demo"]):
        print(f"{cli.relative_to(ROOT) if cli.is_relative_to(ROOT) else cli} "
              f"{' '.join(args)}", flush=True)
        if subprocess.run([str(cli), *args], cwd=ROOT, env=env).returncode:
            raise SetupError(f"bpflow {' '.join(args)} failed")


def commands(backends: int, workers: int, port: int,
             backend_only: bool = False) -> list[tuple[str, list[str], dict]]:
    """What runs: (label, command, extra environment) of each process."""
    reflex = [sys.executable, "-m", "reflex", "run", "--env", "prod",
              *(["--backend-only"] if backend_only else
                ["--single-port", "--frontend-port", str(port)]),
              "--backend-port", str(port)]
    # the backends serve requests only: the work is the `bpflow worker`s'
    out = [(f"reflex ({backends} backend processes)", reflex,
            {"GRANIAN_WORKERS": str(backends), "BPFLOW_INPROCESS_WORKER": "0"})]
    worker = [sys.executable, "-m", "bpflow.cli", "worker"]
    out += [(f"bpflow worker {i + 1}", worker, {}) for i in range(workers)]
    return out


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGINT to every process group (Reflex cleans up on it), SIGTERM to what is left
    after a while, then SIGKILL."""
    for sig, wait in ((signal.SIGINT, STOP_WAIT_S / 2), (signal.SIGTERM, STOP_WAIT_S / 2),
                      (signal.SIGKILL, 5)):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        for p in alive:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


def run(backends: int, workers: int, port: int, backend_only: bool = False) -> int:
    env = dict(os.environ)
    env["DATABASE_URL"] = env.get("DATABASE_URL") or DEFAULT_DATABASE
    env["REFLEX_REDIS_URL"] = env.get("REFLEX_REDIS_URL") or DEFAULT_REDIS
    env.setdefault("BPFLOW_EGRESS_ALLOW", "127.0.0.1")  # the examples call 127.0.0.1:9000
    # its own secret and demo-users file: those of `make run` belong to the SQLite file
    env.setdefault("BPFLOW_HOME", str(ROOT / ".bpflow" / "scaled"))
    try:
        check_redis(env["REFLEX_REDIS_URL"])
        print(f"Reflex state in Redis at {env['REFLEX_REDIS_URL']}", flush=True)
        print(ensure_database(env["DATABASE_URL"]), flush=True)
        prepare(env)
    except SetupError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return 2
    started: list[tuple[str, subprocess.Popen]] = []
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    for label, command, extra in commands(backends, workers, port, backend_only):
        print(f"starting {label}: {' '.join(command[1:])}", flush=True)
        # each in its own process group: Ctrl-C reaches this process only, which then
        # stops every group in order
        started.append((label, subprocess.Popen(command, cwd=ROOT, env={**env, **extra},
                                                stdin=subprocess.DEVNULL,
                                                start_new_session=True)))
    print(f"bpflow scaled out on http://localhost:{port}: {backends} backend processes, "
          f"{workers} workers; Ctrl-C stops them all", flush=True)
    code = 0
    while not stopping:
        ended = [(label, p) for label, p in started if p.poll() is not None]
        if ended:
            for label, p in ended:
                print(f"bpflow: {label} exited with code {p.returncode}; stopping the others",
                      file=sys.stderr, flush=True)
            code = 1
            break
        time.sleep(0.5)
    print("stopping every process", flush=True)
    stop_all([p for _, p in started])
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bpflow.scaled", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", type=int, default=2, help="backend processes (N)")
    parser.add_argument("--workers", type=int, default=2, help="bpflow workers (M)")
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--backend-only", action="store_true",
                        help="no frontend: the API and the event socket only")
    args = parser.parse_args(argv)
    if args.backends < 1 or args.workers < 0:
        parser.error("--backends must be at least 1 and --workers at least 0")
    return run(args.backends, args.workers, args.port, args.backend_only)


if __name__ == "__main__":
    sys.exit(main())
