"""`make run-scaled`: bpflow scaled out on one machine (SPEC §14, 14a).

Checks the servers and prepares the database, then runs N backend processes and M
`bpflow worker`s under supervisord (bpflow/supervision.py), in the foreground:

1. Redis must answer; the PostgreSQL database is created when the server does not have
   it, and prepared as `make run` prepares it (schema upgrade, the templates of
   upload/workflow/ whose names are unknown, the demo users); the port must be free.
2. Without `--backend-only`, the frontend is built once for the port.
3. supervisord starts the programs `backend-1`…`backend-N` (each its own Granian server
   with one worker process, all listening on the one port: the kernel spreads the
   connections over them, and one that dies leaves the port to the others) and
   `worker-1`…`worker-M`, and restarts each when it exits, with back-off when it fails to
   start; one crashing never stops the others.
4. Every program's output goes to its log in BPFLOW_HOME/logs/ and to the console, each
   line led by the program's name. The ready line comes once the port answers
   /api/health.
5. Every backend and worker counts its metrics (bpflow/metrics.py) in
   `PROMETHEUS_MULTIPROC_DIR` (default BPFLOW_HOME/metrics/, emptied of the last run's
   counts at start), so a scrape of `/metrics` through the port sums them all.
6. Ctrl-C (or SIGTERM) stops supervisord, which stops every program. Nothing outlives this
   process, however it ends (SIGKILL included): supervisord and every program are started
   to die with their parent (bpflow.tether), and what is left of the run under this
   process when supervisord is gone is killed.

    python -m bpflow.scaled [--backends N] [--workers M] [--port PORT] [--backend-only]
        [--lease S] [--poll S]

`--backend-only` serves the REST API and the Reflex event socket without the frontend
(no frontend build to wait for), as bench/soak.py and tests/scaled/ run it. `--lease` and
`--poll` are passed to every `bpflow worker`.

`DATABASE_URL` (default postgresql://postgres@127.0.0.1:5432/bpflow) and
`REFLEX_REDIS_URL` (default redis://127.0.0.1:6379) name the servers; the secret, the
demo users' passwords (demo-users.txt), supervisord's configuration and control socket
and the logs are kept in `BPFLOW_HOME` (default .bpflow/scaled/).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from bpflow import supervision, tether

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/bpflow"
DEFAULT_REDIS = "redis://127.0.0.1:6379"
PR_SET_CHILD_SUBREAPER = 36


class SetupError(Exception):
    """What keeps the scaled set-up from starting, said in one line."""


def ensure_database(url: str) -> str:
    """Create the PostgreSQL database of `url` when the server does not have it; say
    which happened."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from bpflow.store.public import normalize_url

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


PREPARE = (["db", "upgrade"], ["import", "--new-only", "upload/workflow"], ["seed-demo"])


def prepare(env: dict[str, str]) -> int:
    """The servers checked and the database prepared (`prepare_here`), in a process of
    its own: this one, which stays for the whole run, imports none of that. Its exit
    code."""
    return subprocess.run([sys.executable, "-c", "import sys; from bpflow.scaled import "
                           "prepare_here; sys.exit(prepare_here())"], cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL).returncode


def prepare_here() -> int:
    """Redis must answer; the database is created when missing and prepared as `make run`
    prepares it (the `db` target's three commands, in this one process). 2 with a line on
    stderr when a server cannot be used; a command's own exit code when it fails."""
    try:
        check_redis(os.environ["REFLEX_REDIS_URL"])
        print(f"Reflex state in Redis at {os.environ['REFLEX_REDIS_URL']}", flush=True)
        print(ensure_database(os.environ["DATABASE_URL"]), flush=True)
    except SetupError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return 2
    from bpflow.cli import main as bpflow

    for args in PREPARE:
        print(f"bpflow {' '.join(args)}", flush=True)
        if code := bpflow(args):
            return code
    return 0


def port_taken(port: int) -> bool:
    """Whether a server answers on `port` already (the backends share their port with one
    another, and would with a stray server there too). A connection, not a bind: the
    sockets a killed run leaves closing for a while on the port are no server."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def build_frontend(env: dict[str, str], port: int) -> None:
    """The pages built once for `port`, as `reflex run --single-port` builds them; the
    backends then serve that build."""
    print(f"building the frontend for port {port} (python -m bpflow_app.serve --build)",
          flush=True)
    if subprocess.run([sys.executable, "-m", "bpflow_app.serve", "--build", "--port",
                       str(port)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL).returncode:
        raise SetupError("the frontend build failed (its output is above)")


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def children() -> list[int]:
    """This process's children (with it a subreaper: whatever of the run lost its
    parent)."""
    me, out = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def reap_strays() -> None:
    """SIGKILL to whatever of the run is still alive under this process once supervisord
    is gone (a program that lost supervisord in the moment before it asked to die with
    it), until none is left."""
    for _ in range(50):
        strays = children()
        if not strays:
            return
        for pid in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.1)


def become_subreaper() -> None:
    if sys.platform.startswith("linux"):
        import ctypes
        import ctypes.util
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def fresh_metrics(folder: Path) -> None:
    """The folder where every process of the run counts its metrics, without the counts
    of an earlier run (prometheus_client's multi-process files: `*.db`; nothing else in
    it is touched)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for counts in folder.glob("*.db"):
        counts.unlink(missing_ok=True)


def write_config(home: Path, progs: list[supervision.Program]) -> Path:
    """supervisord.conf in `home` (and its logs/ folder), with a new password for the
    control socket: the file is the owner's only."""
    try:
        text = supervision.config(home, ROOT, progs, secrets.token_urlsafe(24))
    except supervision.ConfigError as exc:
        raise SetupError(str(exc)) from None
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "logs").mkdir(exist_ok=True)
    conf = home / "supervisord.conf"
    with os.fdopen(os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    conf.chmod(0o600)
    return conf


def manage(conf: Path, progs: list[supervision.Program], env: dict[str, str], port: int,
           backend_only: bool) -> int:
    """supervisord over `progs` (its configuration `conf`) in the foreground, their logs on
    the console; the ready line once the port answers; Ctrl-C (SIGINT) or SIGTERM stops
    them all. 0 when stopped so, 1 when supervisord ended by itself."""
    logs = conf.parent / "logs"
    follower = supervision.Follower(
        {"supervisord": logs / "supervisord.log",
         **{p.name: logs / f"{p.name}.log" for p in progs}})
    stopping = threading.Event()
    sup: subprocess.Popen | None = None

    def on_signal(signum: int, frame: object) -> None:
        if stopping.is_set() and sup is not None:  # a second Ctrl-C: no more waiting
            sup.kill()  # the programs die with it
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    become_subreaper()
    me = os.getpid()
    ctl = f"{shown(supervision.supervisor_command('supervisorctl'))} -c {shown(conf)}"
    # its own session: Ctrl-C reaches this process only, which stops supervisord, which
    # stops the programs; and it dies with this process, however this one dies
    sup = subprocess.Popen([str(supervision.supervisor_command("supervisord")), "-c",
                            str(conf)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                           start_new_session=True,
                           preexec_fn=lambda: None if tether.die_with_parent(me)
                           else os._exit(1))
    print(f"supervisord (pid {sup.pid}) runs {', '.join(p.name for p in progs)}; "
          f"logs in {shown(logs)}/; `{ctl} status` shows them", flush=True)
    ready = threading.Event()

    def wait_ready() -> None:
        while not stopping.is_set() and sup.poll() is None:
            if answers(f"http://127.0.0.1:{port}/api/health"):
                ready.set()
                return
            time.sleep(0.3)

    threading.Thread(target=wait_ready, daemon=True).start()
    backends = sum(p.name.startswith("backend-") for p in progs)
    workers = len(progs) - backends
    announced = False
    while not stopping.is_set() and sup.poll() is None:
        follower.pump()
        if ready.is_set() and not announced:
            announced = True
            print(f"bpflow scaled out on http://localhost:{port}"
                  f"{' (API and event socket only)' if backend_only else ''}: "
                  f"{plural(backends, 'backend process', 'backend processes')}, "
                  f"{plural(workers, 'worker', 'workers')}; `{ctl} status` shows them; "
                  "Ctrl-C stops them all", flush=True)
        stopping.wait(0.2)
    code = 0
    if stopping.is_set():
        print("stopping every process (Ctrl-C again: at once)", flush=True)
        sup.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + supervision.STOP_WAIT_S + 10
        while sup.poll() is None and time.monotonic() < deadline:
            follower.pump()
            time.sleep(0.2)
        if sup.poll() is None:
            sup.kill()
    else:
        rc = sup.returncode
        how = (f"was killed by {signal.Signals(-rc).name}" if rc < 0 else
               f"exited with code {rc}")
        print(f"bpflow: supervisord {how}; stopping what is left of the run",
              file=sys.stderr, flush=True)
        code = 1
    sup.wait()
    reap_strays()
    follower.pump(final=True)
    return code


def run(backends: int, workers: int, port: int, backend_only: bool = False,
        lease: float | None = None, poll: float | None = None) -> int:
    env = dict(os.environ)
    env["DATABASE_URL"] = env.get("DATABASE_URL") or DEFAULT_DATABASE
    env["REFLEX_REDIS_URL"] = env.get("REFLEX_REDIS_URL") or DEFAULT_REDIS
    env.setdefault("BPFLOW_EGRESS_ALLOW", "127.0.0.1")  # the examples call 127.0.0.1:9000
    # its own secret and demo-users file: those of `make run` belong to the SQLite file
    env.setdefault("BPFLOW_HOME", str(ROOT / ".bpflow" / "scaled"))
    env["PYTHONUNBUFFERED"] = "1"
    home = Path(env["BPFLOW_HOME"])
    if not home.is_absolute():
        home = ROOT / home
        env["BPFLOW_HOME"] = str(home)
    # every process's metrics in one folder, summed by a scrape of any backend
    env["PROMETHEUS_MULTIPROC_DIR"] = str(Path(
        env.get("PROMETHEUS_MULTIPROC_DIR") or home / "metrics").absolute())
    progs = supervision.programs(backends, workers, port, backend_only, lease, poll)
    try:
        if not supervision.supervisor_command("supervisord").exists():
            raise SetupError("supervisord is not installed beside this Python "
                             "(the package `supervisor`: make install)")
        if port_taken(port):
            raise SetupError(f"port {port} is in use (another run? `make run-scaled "
                             "PORT=…` picks another)")
        conf = write_config(home, progs)
        fresh_metrics(Path(env["PROMETHEUS_MULTIPROC_DIR"]))
    except SetupError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return 2
    if code := prepare(env):
        return code
    try:
        if not backend_only:
            build_frontend(env, port)
    except SetupError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return 2
    return manage(conf, progs, env, port, backend_only)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bpflow.scaled", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", type=int, default=2, help="backend processes (N)")
    parser.add_argument("--workers", type=int, default=2, help="bpflow workers (M)")
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--backend-only", action="store_true",
                        help="no frontend: the API and the event socket only")
    parser.add_argument("--lease", type=float, default=None,
                        help="the workers' lease per instance (s; default: the worker's)")
    parser.add_argument("--poll", type=float, default=None,
                        help="the workers' idle poll interval (s; default: the worker's)")
    args = parser.parse_args(argv)
    if args.backends < 1 or args.workers < 0:
        parser.error("--backends must be at least 1 and --workers at least 0")
    for name in ("lease", "poll"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            parser.error(f"--{name} must be a positive number of seconds")
    return run(args.backends, args.workers, args.port, args.backend_only, args.lease,
               args.poll)


if __name__ == "__main__":
    sys.exit(main())
