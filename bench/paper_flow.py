"""The paper's experiment over HTTP: reimbursement flows driven at fixed request rates.

One instance of `upload/workflow/reimbursement.json` is five requests, each needing the
bookmark from the previous answer: `POST /api/instances` (start), then `POST
/api/instances/{id}/circles/{uri}/complete` for claim, approve (an approval, completed by
hand, which only an admin may do: the load signs in as one), review and pay. Every request
is a durable step (one SQLite transaction, WAL, `synchronous=FULL`).

Server: its own process on a fresh SQLite database in a temporary folder beside this file
(`bpflow db upgrade`, `bpflow import upload/workflow`, an admin user; no worker,
`BPFLOW_INPROCESS_WORKER=0`). By default `reflex`: the whole Reflex backend as `make run`
serves it (`reflex run --env prod`, granian, one worker), run from a copy of the working
tree because Reflex writes beside the app. `--servers` also takes `granian` (the API app
alone, `--factory bpflow.api:create_app`, as Reflex runs granian), `uvicorn` (h11 and the
asyncio loop), `uvicorn-httptools` (httptools + uvloop) and `scaled`: the scale-out mode
as `make run-scaled` starts it (SPEC §14; `python -m bpflow.scaled --backends 2 --workers 0
--backend-only`: 2 backend processes, each its own Granian server, on one port under
supervisord, Reflex's Redis state manager at $REFLEX_REDIS_URL), also from a copy of the
tree, on a PostgreSQL database of its own created for the round on the server of
$BENCH_PG_URL (default
postgresql://postgres@127.0.0.1:5432/postgres) and dropped after it, BPFLOW_HOME in the
round's folder. The server's CPU figure is always its whole process tree (every backend).

Load generator: this process, asyncio, a minimal HTTP/1.1 client over at most
`--connections` keep-alive connections. Open loop: request i is due at t0 + i/rate
whatever became of the earlier ones, and its latency runs from that due time to the end of
its answer, so waiting for a free connection or behind a slow server counts (no
coordinated omission). Each due request takes the next step of an instance whose previous
answer is in, else starts a new instance. A rate runs `--warmup` seconds (not counted),
then `--duration` seconds. Errors: non-2xx answers, answers without the next step,
timeouts (`--timeout` after the due time; a request already sent keeps its connection
until answered, so the server never holds more than `--connections` of them) and
connection failures.

Peer, same run, same generator, same rates: `GET /api/health`, which touches no database,
so `p99 flow / p99 health` is what a durable step costs over the HTTP stack alone. Then
closed loops (each connection sends when its previous answer is in) with 1 connection
(unloaded service time) and with `--connections` (the most the server does). Each row
also shows how late the generator sent (lag), CPU a request of the generator and of the
server's process tree, the server's longest garbage-collector pause (and how many full
collections; logged by a sitecustomize hook put on the server's PYTHONPATH) and the CPUs
other processes on the machine used meanwhile. Every instance the load completed is read
back through the API at the end and must be `completed`.

Each server runs `--rounds` times, the servers taking turns round by round, each round
on a fresh server and database; the figure judged is the median over the rounds of each
rate's p99 (single rounds on this shared 2-CPU machine move with the noise of the moment,
the health peer's p99 with them). Exit status 0 when the first server meets the target:
1,000 req/s at a median p99 <= 20 ms with no errors in any round.

`--metrics-ab`: the cost of counting metrics (SPEC §18). The first server of `--servers`
runs with metrics on (`BPFLOW_METRICS=1`) and off (`BPFLOW_METRICS=0`) in turns, `--rounds`
pairs, which goes first alternating pair by pair, each on a fresh server and database: a
2 s warm-up, then the flow's closed loop with `--connections` for `--saturation` seconds
(the requests a second at saturation), every completed instance read back. The figure is
the ratio of the medians, on / off, beside each pair's; exit status 0 when metrics on
answer no more than 3 % fewer requests. Fresh servers differ by several per cent from one
another whatever the switch (an A/A control: bench/RESULTS.md), so `--together` runs both
at once, each on its CPU, and `--within` runs one server at saturation (its process tree
on CPU 0, its database in memory, this generator on CPU 1) and switches its counting on
and off window by window (`--windows` of `--window` s, ABBA BAAB; `SWITCH_HOOK`, a thread
the bench puts in the server, does what `BPFLOW_METRICS` does at start), so both arms
share the process, its memory's layout and the minute: each cycle of four windows is a
pair, requests answered on / off; exit status 0 when the 95 % interval of the cycles'
mean lies above 0.97. `--instructions` counts instead of timing (valgrind's callgrind,
whose counts this machine's neighbours do not move): both arms at once, each under
callgrind, the same `--flows` instances on each connection, the instructions a request
of each between two marks (MARK_HOOK); exit status 0 when every round's off / on is at
least 0.97. `--control` runs any of them as A/A.

    .venv/bin/python bench/paper_flow.py [--rates 100,500,1000] [--duration 10]
        [--warmup 2] [--connections 100] [--rounds 3] [--servers reflex,granian,uvicorn]
    .venv/bin/python bench/paper_flow.py --metrics-ab [--servers granian] [--rounds 4]
        [--saturation 10] [--together | --within [--windows 32] [--window 2]
        | --instructions [--flows 3] [--keep DIR]] [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGET_P99_MS = 20.0
TARGET_RATE = 1000
METRICS_COST = 0.03  # at most this share fewer requests at saturation with metrics on
USER, PASSWORD = "bench", "bench-password"
# the manager a claim names must be an approver (a `user` field); the admin who drives the
# load may complete every circle by hand, finance's and the manager's tasks included
RESULTS: dict[str, Any] = {"claim": {"amount": 12.5, "reason": "taxi", "manager": USER},
                           "approve": {"approved": True}, "review": {},
                           "pay": {"reference": "R1"}}
TICK = os.sysconf("SC_CLK_TCK")
# Put on the server's PYTHONPATH as sitecustomize.py: logs the server's garbage-collector
# pauses (every full collection, and any of 1 ms or more) to $BENCH_GC_LOG.
GC_HOOK = """
import gc, os, time
if os.environ.get("BENCH_GC_LOG"):
    _log, _began = open(os.environ["BENCH_GC_LOG"], "a", buffering=1), [0.0]
    def _pause(phase, info):
        if phase == "start":
            _began[0] = time.perf_counter()
            return
        ms = (time.perf_counter() - _began[0]) * 1000
        if info["generation"] == 2 or ms >= 1:
            _log.write(f"{time.time():.3f} {info['generation']} {ms:.2f}\\n")
    gc.callbacks.append(_pause)
"""
# In the hook before the two below: each new text of the file `path`, looked at every
# `every` seconds, once `ready()` says the server can act on it (until then the text is
# looked at again).
WATCH_HOOK = """
def _watched(path, every, ready=lambda: True):
    seen = None
    while True:
        time.sleep(every)
        try:
            mtime = os.stat(path).st_mtime_ns
            if mtime == seen or not ready():
                continue
            text = open(path).read().strip()
        except OSError:
            continue
        seen = mtime
        yield text
"""
# Added to the hook with `--metrics-ab --within`: a thread of the server that turns its
# counting on or off as the file $BENCH_METRICS_SWITCH says ("on", "off"; looked at every
# 10 ms in both states), exactly as BPFLOW_METRICS does at start: the API's `counted` and
# the store's step hook; what was queued is folded first. It writes what it did to
# $BENCH_METRICS_SWITCH.ack.
SWITCH_HOOK = """
import threading
if os.environ.get("BENCH_METRICS_SWITCH"):
    def _switcher(path=os.environ["BENCH_METRICS_SWITCH"]):
        import sys

        def store():  # the backend's, None while it is still being imported
            return getattr(sys.modules.get("bpflow.backend"), "_store", None)
        state, apps = "on", None
        for want in _watched(path, 0.01, lambda: store() is not None):
            if apps is None:
                from bpflow.api.hot import Api
                apps = [o for o in gc.get_objects() if isinstance(o, Api)]
            if want != state:
                from bpflow import metrics
                getattr(metrics, "fold", lambda: None)()  # (code without the queues: none)
                for app in apps:
                    app.counted = want == "on"
                store().on_steps(metrics._stepped if want == "on" else None)
                state = want
            with open(path + ".ack", "w") as ack:
                ack.write(f"{want} {len(apps)}")
    def _start_switcher():
        threading.Thread(target=_switcher, daemon=True).start()
    _start_switcher()
    os.register_at_fork(after_in_child=_start_switcher)  # a server's forked workers
"""


# Added to the hook with `--metrics-ab --instructions`: a thread of the server, under
# callgrind, that marks where the counted requests begin and end by calling a C function
# nothing else in the server calls (`getloadavg`: callgrind zeroes its counts there,
# `ctermid`: it writes them out), as the file $BENCH_MARK says ("zero", "dump"; looked
# at every 0.2 s); it writes what it did to $BENCH_MARK.ack.<its pid>. With $BENCH_MARK_START (a
# library of `START_C`), the server runs uninstrumented (fast) until the first "zero".
MARK_HOOK = """
if os.environ.get("BENCH_MARK"):
    def _marker(path=os.environ["BENCH_MARK"]):
        for want in _watched(path, 0.2):
            if want == "zero" and os.environ.get("BENCH_MARK_START"):
                import ctypes  # instrumented from here on (CALLGRIND_START_INSTRUMENTATION)
                ctypes.CDLL(os.environ["BENCH_MARK_START"]).bench_start()
            os.getloadavg() if want == "zero" else os.ctermid()
            with open(f"{path}.ack.{os.getpid()}", "w") as ack:
                ack.write(want)
    def _start_marker():
        import threading
        threading.Thread(target=_marker, daemon=True).start()
    _start_marker()
    os.register_at_fork(after_in_child=_start_marker)  # the server's forked worker
"""
CALLGRIND = ["valgrind", "--tool=callgrind", "--zero-before=getloadavg",
             "--dump-before=ctermid"]
START_C = """#include <valgrind/callgrind.h>
void bench_start(void) { CALLGRIND_START_INSTRUMENTATION; }
"""


def callgrind_starter(folder: Path) -> Path | None:
    """START_C built as a shared library in `folder`, or None when it cannot be (no C
    compiler, no valgrind headers): the server is then instrumented from its start."""
    source, library = folder / "start.c", folder / "start.so"
    source.write_text(START_C)
    built = shutil.which("cc") and subprocess.run(
        ["cc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)],
        capture_output=True).returncode == 0
    return library if built else None


# ------------------------------------------------------------------ servers
def app_copy(tmp: Path) -> Path:
    """The working tree copied into `tmp`: Reflex writes beside the app."""
    copy = tmp / "app"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".tools", ".web", ".states", "test-output", ".*_cache",
        ".hypothesis", "__pycache__", "*.db", "*.db-*", "bench"))
    return copy


def server_command(kind: str, port: int, tmp: Path, backends: int = 2,
                   workers: int = 0) -> tuple[list[str], dict[str, str], Path] | str:
    """The command serving the API on `port`, its extra environment and folder; or why
    it cannot run. `backends` and `workers` are those of `scaled`."""
    bun = {"REFLEX_BUN_PATH": str(ROOT / ".tools" / "node_modules" / "bun" / "bin" / "bun.exe")}
    app = "bpflow.api:create_app"
    uvicorn = [str(BIN / "uvicorn"), "--factory", app, "--host", "127.0.0.1", "--port",
               str(port), "--log-level", "warning", "--no-access-log"]
    if kind == "uvicorn":
        return [*uvicorn, "--http", "h11", "--loop", "asyncio"], {}, ROOT
    if kind == "uvicorn-httptools":
        missing = [m for m in ("httptools", "uvloop") if importlib.util.find_spec(m) is None]
        if missing:
            return f"not installed: {', '.join(missing)}"
        return [*uvicorn, "--http", "httptools", "--loop", "uvloop"], {}, ROOT
    if kind == "granian":  # what `reflex run --env prod` serves with here (1 worker, no Redis)
        return [str(BIN / "granian"), "--interface", "asgi", "--factory", "--host",
                "127.0.0.1", "--port", str(port), "--workers", "1", "--log-level",
                "warning", "--no-access-log", app], {}, ROOT
    if kind == "reflex":  # the whole backend, from a copy: Reflex writes beside the app
        copy = app_copy(tmp)
        return ([str(BIN / "reflex"), "run", "--env", "prod", "--backend-only",
                 "--backend-port", str(port), "--loglevel", "warning"],
                {**bun, "PYTHONPATH": str(copy)}, copy)
    if kind == "scaled":  # `make run-scaled` without the frontend, from a copy as well
        copy = app_copy(tmp)
        (tmp / "home").mkdir()
        return ([sys.executable, "-m", "bpflow.scaled", "--backends", str(backends),
                 "--workers", str(workers), "--port", str(port), "--backend-only"],
                {**bun, "PYTHONPATH": str(copy), "BPFLOW_HOME": str(tmp / "home"),
                 "GRANIAN_LOG_LEVEL": "warning"}, copy)
    return f"unknown server '{kind}'"


def pg_admin_url() -> str:
    return os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextlib.contextmanager
def database(kind: str, tmp: Path) -> Iterator[str]:
    """The URL of the round's fresh database: a SQLite file in `tmp`, or for `scaled` a
    PostgreSQL database created for it (uniquely named) and dropped afterwards."""
    if kind != "scaled":
        yield f"sqlite:///{tmp / 'bench.db'}"
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from bpflow.scaled import ensure_database
    from bpflow.store.public import normalize_url

    server = make_url(normalize_url(pg_admin_url()))
    name = f"bench_{os.getpid()}_{uuid4().hex[:8]}"
    ensure_database(server.set(database=name).render_as_string(hide_password=False))
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        admin = create_engine(server, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            admin.dispose()


SECRET = "bench-secret-of-at-least-32-bytes-0123"  # the server refuses a shorter one


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tenant_user(k: int) -> str:
    """The user driving tenant k's share of the load (k = 0: `default`)."""
    return USER if k == 0 else f"{USER}{k}"


def prepare_database(env: dict[str, str], tenants: int = 1,
                     approvers: tuple[str, ...] = ()) -> None:
    """Schema, templates and the load's admin (per tenant), and `approvers`: users of the
    default tenant with the approver role only."""
    cli = str(BIN / "bpflow")
    steps = [(["db", "upgrade"], None), (["import", "upload/workflow"], None),
             (["user", "add", USER, "--role", "admin,approver", "--password-stdin"], PASSWORD)]
    steps += [(["user", "add", name, "--role", "approver", "--password-stdin"], PASSWORD)
              for name in approvers]
    for k in range(1, tenants):  # each tenant with the same templates and its own user
        steps += [(["tenant", "add", f"t{k}", "--admin", f"admin{k}", "--password-stdin"],
                   PASSWORD),
                  (["import", "upload/workflow", "--tenant", f"t{k}"], None),
                  (["user", "add", tenant_user(k), "--tenant", f"t{k}", "--role",
                    "admin,approver", "--password-stdin"], PASSWORD)]
    for args, stdin in steps:
        subprocess.run([cli, *args], env=env, cwd=ROOT, input=stdin, text=True, check=True,
                       stdout=subprocess.DEVNULL)


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process `pid` and its descendants."""
    return sum(cpu for _, cpu in process_tree(pid).values())


def process_tree(pid: int) -> dict[int, tuple[int, float]]:
    """Process `pid` and its descendants: pid → (parent pid, CPU seconds used)."""
    procs = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK)
    tree, todo = {}, [pid]
    while todo:
        p = todo.pop()
        if p in procs:
            tree[p] = procs[p]
            todo.extend(c for c, (parent, _) in procs.items() if parent == p)
    return tree


# --------------------------------------------------------------- HTTP client
class ProtocolError(Exception):
    pass


class _Stale(Exception):
    """A kept-alive connection the server had closed before the request reached it."""


class Http:
    """HTTP/1.1 over asyncio streams: at most `size` keep-alive connections, JSON bodies."""

    def __init__(self, port: int, size: int) -> None:
        self.port = port
        self.slots = asyncio.Semaphore(size)
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.open = self.peak = 0
        self.sending: set[asyncio.Task] = set()  # referenced until answered, also if abandoned
        self.auth = ""

    async def call(self, method: str, path: str, payload: Any = None,
                   deadline: float | None = None, auth: str | None = None
                   ) -> tuple[int, bytes]:
        """Status and body; TimeoutError after `deadline` (loop time). A request already
        sent keeps its connection until answered, so the server never holds more than
        `size` requests of this client, also when they time out."""
        body = b"" if payload is None else json.dumps(payload).encode()
        extra = ("" if payload is None else "Content-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n")
        auth = self.auth if auth is None else auth
        request = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}{extra}\r\n"
                   ).encode() + body
        async with asyncio.timeout_at(deadline):
            await self.slots.acquire()  # waiting for a connection counts, sends nothing
        task = asyncio.create_task(self._send(request))
        self.sending.add(task)
        task.add_done_callback(self._finished)
        async with asyncio.timeout_at(deadline):
            return await asyncio.shield(task)

    def _finished(self, task: asyncio.Task) -> None:
        self.sending.discard(task)
        self.slots.release()
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned request's failure is not reported

    async def _send(self, request: bytes) -> tuple[int, bytes]:
        while self.idle:
            conn = self.idle.pop()
            try:
                return await self._exchange(conn, request)
            except _Stale:  # the server closed it while idle: nothing was processed
                continue
        conn = await asyncio.open_connection("127.0.0.1", self.port)
        self.open += 1
        self.peak = max(self.peak, self.open)
        return await self._exchange(conn, request, fresh=True)

    async def _exchange(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                        request: bytes, fresh: bool = False) -> tuple[int, bytes]:
        reader, writer = conn
        reusable = False
        try:
            if reader.at_eof():
                raise _Stale
            writer.write(request)
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionResetError) as exc:
                if not fresh and not getattr(exc, "partial", b""):
                    raise _Stale from exc
                raise
            status, length, reusable = int(head[9:12]), None, True
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"connection" and value.strip().lower() == b"close":
                    reusable = False
            if length is None:
                raise ProtocolError("response without Content-Length")
            return status, await reader.readexactly(length)
        except BaseException:
            reusable = False
            raise
        finally:
            if reusable:
                self.idle.append(conn)
            else:
                writer.close()
                self.open -= 1

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


# ---------------------------------------------------------------- workloads
class Health:
    """The peer: GET /api/health, no database work."""

    name = "health"

    def next(self) -> tuple[str, str, Any, str]:
        return "GET", "/api/health", None, "health"

    def done(self, step: str, status: int, data: bytes, measured: bool) -> str | None:
        return None if status == 200 else f"HTTP {status}"


class Flow:
    """Reimbursement instances: start, then complete claim, approve, review and pay."""

    name = "flow"
    auths: list[str] = [""]  # per tenant: the Authorization header of its user (measure)
    owners: dict[str, int] = {}  # instance id → its tenant's index (to read it back)

    def __init__(self) -> None:
        self.ready: deque[tuple[str, str, str]] = deque()  # (instance, circle, bookmark)
        self.completed: list[str] = []
        self.measured_completed = 0
        self.starts = 0
        self.auth: str | None = None  # the header of the request `next` gave last

    def next(self) -> tuple[str, str, Any, str]:
        if self.ready:
            iid, uri, bookmark = self.ready.popleft()
            k = self.owners[iid]
            self.auth = self.auths[k]
            result = RESULTS[uri] if uri != "claim" else {**RESULTS[uri],
                                                          "manager": tenant_user(k)}
            return ("POST", f"/api/instances/{iid}/circles/{uri}/complete",
                    {"bookmark": bookmark, "result": result}, uri)
        k = self.starts % len(self.auths)  # starts alternate between the tenants
        self.starts += 1
        self.auth = self.auths[k]
        return "POST", "/api/instances", {"template": "reimbursement"}, f"start@{k}"

    def done(self, step: str, status: int, data: bytes, measured: bool) -> str | None:
        step, _, tenant = step.partition("@")
        if status != (201 if step == "start" else 200):
            return f"HTTP {status}"
        inst = json.loads(data)
        if step == "start":
            self.owners[inst["id"]] = int(tenant)
        if inst["status"] == "completed" and step == "pay":
            self.completed.append(inst["id"])
            self.measured_completed += measured
            return None
        ready = [(uri, c["bookmark"]) for uri, c in inst["circles"].items() if c["bookmark"]]
        if inst["status"] != "running" or len(ready) != 1:
            return f"unexpected answer to {step}"
        self.ready.append((inst["id"], *ready[0]))
        return None


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all CPUs, steal included)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / TICK


@dataclass
class Server:
    port: int
    pid: int
    gc_log: Path  # its garbage-collector pauses (see GC_HOOK)
    store: str = ""  # what it stores on, said in the report
    log: Path | None = None  # its output
    url: str = ""  # its database's URL
    folder: Path | None = None  # its round's folder (hook, log, database unless PostgreSQL)


class Meter:
    """CPU used between start and `stop`: by this generator, by the server process tree and
    by everything else on the machine (other processes compete for the same 2 cores)."""

    def __init__(self, server: Server) -> None:
        self.pid, self.gc_log, self.began = server.pid, server.gc_log, time.time()
        self.t0, self.gen0 = time.monotonic(), time.process_time()
        self.server0, self.machine0 = tree_cpu(server.pid), machine_busy()

    def stop(self, figures: Figures, requests: int) -> None:
        gen = time.process_time() - self.gen0
        server = tree_cpu(self.pid) - self.server0
        others = machine_busy() - self.machine0 - gen - server
        figures.gen_cpu, figures.server_cpu = gen / requests, server / requests
        figures.others = max(0.0, others) / (time.monotonic() - self.t0)
        rows = [line.split() for line in self.gc_log.read_text().splitlines()]
        pauses = [(int(r[1]), float(r[2])) for r in rows
                  if len(r) == 3 and float(r[0]) >= self.began]
        figures.gc_max = max((ms for _, ms in pauses), default=0.0)
        figures.gc_full = sum(g == 2 for g, _ in pauses)


@dataclass
class Figures:
    rate: float  # requests/s: the target (open loop) or what was sent (closed loop)
    latencies: list[float] = field(default_factory=list)  # seconds, measured requests
    lags: list[float] = field(default_factory=list)  # how late the generator sent them
    errors: Counter = field(default_factory=Counter)
    error_at: list[float] = field(default_factory=list)  # when each error ended (monotonic)
    warmup_errors: int = 0
    achieved: float = 0.0  # requests/s answered without error
    instances: float = 0.0  # instances completed per second
    gen_cpu: float = 0.0  # CPU seconds a request
    server_cpu: float = 0.0
    others: float = 0.0  # CPUs busy with other processes, on average
    gc_max: float = 0.0  # longest garbage-collector pause of the server (ms)
    gc_full: int = 0  # full collections in the server

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    @property
    def ok(self) -> bool:
        return not self.errors and not self.warmup_errors and self.pct(0.99) <= TARGET_P99_MS


async def attempt(http: Http, work: Health | Flow, measured: bool,
                  deadline: float) -> str | None:
    """One request of `work`; what went wrong, if anything."""
    method, path, payload, step = work.next()
    auth = getattr(work, "auth", None)  # taken before any await: the request's own
    try:
        status, data = await http.call(method, path, payload, deadline, auth)
        return work.done(step, status, data, measured)
    except TimeoutError:
        return "timeout"
    except (OSError, asyncio.IncompleteReadError, ProtocolError, ValueError, KeyError,
            TypeError) as exc:
        return type(exc).__name__


async def open_loop(http: Http, work: Health | Flow, rate: float, duration: float,
                    warmup: float, timeout: float, server: Server) -> Figures:
    """Request i at start + i/rate; latency from that scheduled time."""
    loop = asyncio.get_running_loop()
    total, skip = round(rate * (warmup + duration)), round(rate * warmup)
    figures, tasks, ends = Figures(rate), set(), []

    async def slot(i: int, at: float) -> None:
        measured = i >= skip
        if measured:
            figures.lags.append(loop.time() - at)
        problem = await attempt(http, work, measured, at + timeout)
        if not measured:
            figures.warmup_errors += problem is not None
            return
        ends.append(loop.time())
        figures.latencies.append(ends[-1] - at)
        if problem is not None:
            figures.errors[problem] += 1
            figures.error_at.append(ends[-1])

    meter = Meter(server)
    start = loop.time() + 0.01
    for i in range(total):
        at = start + i / rate
        if at > loop.time():
            await asyncio.sleep(at - loop.time())
        task = asyncio.create_task(slot(i, at))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    while tasks:
        await asyncio.wait(set(tasks))
    meter.stop(figures, total)
    first = start + skip / rate
    span = max(max(ends) - first, duration) if ends else duration
    figures.achieved = (total - skip - sum(figures.errors.values())) / span  # answered well
    if isinstance(work, Flow):
        figures.instances = work.measured_completed / span
    return figures


async def closed_loop(http: Http, work: Health | Flow, clients: int, seconds: float,
                      timeout: float, server: Server) -> Figures:
    """`clients` loops each sending its next request when the previous one is answered:
    the most the server (and this generator) can do."""
    loop = asyncio.get_running_loop()
    figures, stop, count = Figures(0.0), loop.time() + seconds, 0

    async def client() -> None:
        nonlocal count
        while loop.time() < stop:
            begun = loop.time()
            problem = await attempt(http, work, True, begun + timeout)
            figures.latencies.append(loop.time() - begun)
            count += 1
            if problem is not None:
                figures.errors[problem] += 1

    meter, t0 = Meter(server), loop.time()
    await asyncio.gather(*(client() for _ in range(clients)))
    meter.stop(figures, count)
    figures.rate = count / (loop.time() - t0)
    figures.achieved = (count - sum(figures.errors.values())) / (loop.time() - t0)
    if isinstance(work, Flow):
        figures.instances = work.measured_completed / (loop.time() - t0)
    return figures


async def quiesce(http: Http, server: Server, limit: float = 120.0) -> None:
    """Wait until the requests that timed out are answered and the server is idle."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = tree_cpu(server.pid)
        await asyncio.sleep(0.5)
        if not http.sending and tree_cpu(server.pid) - before < 0.03:
            return
    print(f"  (the server was still busy after {limit:.0f} s)")


async def read_back(http: Http, server: Server, completed: list[str],
                    prefix: str = "", flow: type[Flow] | None = None) -> list[str]:
    """Once the server is idle, the instances the load completed read back (`verify`) and
    said; the client closed. The ids not `completed`."""
    await quiesce(http, server)
    bad = await verify(http, completed, flow)
    http.close()
    print(f"{prefix}instances the load completed: {len(completed):,}; read back through the"
          f" API: {len(completed) - len(bad):,} completed"
          + (f", {len(bad)} NOT (e.g. {bad[0]})" if bad else ""))
    return bad


async def verify(http: Http, ids: list[str], flow: type[Flow] | None = None) -> list[str]:
    """The ids whose stored instance is not `completed` with every circle a success."""
    flow = flow or Flow
    bad: list[str] = []
    queue = deque(ids)

    async def reader() -> None:
        while queue:
            iid = queue.popleft()
            status, data = await http.call("GET", f"/api/instances/{iid}",
                                           auth=flow.auths[flow.owners.get(iid, 0)])
            inst = json.loads(data) if status == 200 else {}
            if inst.get("status") != "completed" or any(
                    c["state"] != "success" for c in inst["circles"].values()):
                bad.append(iid)

    await asyncio.gather(*(reader() for _ in range(20)))
    return bad


# -------------------------------------------------------------------- report
HEADER = ("  load   target  achieved  p50 ms  p99 ms  max ms errors instances lag p99"
          "  gen µs/req  server ms/req  gc max ms (full)  other CPUs")


def line(label: str, f: Figures, target: str) -> str:
    errors = sum(f.errors.values())
    detail = f"  ({', '.join(f'{k}: {v}' for k, v in f.errors.most_common())})" if errors else ""
    lag = f"{sorted(f.lags)[int(0.99 * (len(f.lags) - 1))] * 1000:7.1f}" if f.lags else " " * 7
    inst = f"{f.instances:7.0f}/s" if label == "flow" else " " * 9
    return (f"  {label:6} {target:>7} {f.achieved:7,.0f}/s {f.pct(0.5):7.1f} {f.pct(0.99):7.1f}"
            f" {max(f.latencies) * 1000:7.1f} {errors:6} {inst} {lag} {f.gen_cpu * 1e6:11.0f}"
            f" {f.server_cpu * 1e3:14.2f} {f.gc_max:9.0f} ({f.gc_full:3}) {f.others:10.2f}"
            f"{detail}")


async def connect(server: Server, args: argparse.Namespace,
                  flow: type[Flow] = Flow, warm: bool = True) -> tuple[Http, list[str]]:
    """A client of `args.connections` signed in as the users of the load (Flow.auths),
    and the server warmed by 2 s of `flow`s at 50/s (template loaded, code paths run,
    connections open) unless not `warm`; the ids of the instances that warming
    completed."""
    http = Http(server.port, args.connections)
    status, data = await http.call("POST", "/api/auth/token",
                                   {"username": USER, "password": PASSWORD})
    if status != 200:
        raise SystemExit(f"sign-in failed: HTTP {status} {data[:200]!r}")
    http.auth = f"Authorization: Bearer {json.loads(data)['access_token']}\r\n"
    flow.auths, flow.owners = [http.auth], {}
    for k in range(1, args.tenants):
        status, data = await http.call("POST", "/api/auth/token",
                                       {"username": tenant_user(k), "password": PASSWORD})
        if status != 200:
            raise SystemExit(f"sign-in of {tenant_user(k)} failed: HTTP {status}")
        flow.auths.append(f"Authorization: Bearer {json.loads(data)['access_token']}\r\n")
    if not warm:
        return http, []
    warming = flow()
    await open_loop(http, warming, 50, 2, 0, args.timeout, server)
    return http, list(warming.completed)


async def measure(server: Server, args: argparse.Namespace) -> list[Figures] | None:
    http, completed = await connect(server, args)
    print(HEADER)
    flows: list[Figures] = []
    for rate in args.rates:
        row = {}
        for work in (Health(), Flow()):
            await quiesce(http, server)
            row[work.name] = await open_loop(http, work, rate, args.duration, args.warmup,
                                             args.timeout, server)
            print(line(work.name, row[work.name], f"{rate:,.0f}/s"), flush=True)
            if isinstance(work, Flow):
                completed += work.completed
        flow, health = row["flow"], row["health"]
        flows.append(flow)
        print(f"  {'':6} p99 flow / p99 health: {flow.pct(0.99) / health.pct(0.99):.1f}"
              + (f"; {flow.warmup_errors} errors during warm-up" if flow.warmup_errors else ""))
    saturated = {}
    for clients in sorted({1, args.connections}):
        print(f"  closed loop, {clients} connection{'s' * (clients > 1)}, {args.saturation:g} s"
              " (each sends its next request when the answer is in):")
        for work in (Health(), Flow()):
            await quiesce(http, server)
            saturated[work.name] = await closed_loop(http, work, clients, args.saturation,
                                                     args.timeout, server)
            print(line(work.name, saturated[work.name], "max"), flush=True)
            if isinstance(work, Flow):
                completed += work.completed
    health = saturated["health"]
    print(f"  generator alone: {1 / health.gen_cpu:,.0f} req/s of one CPU"
          f" ({health.gen_cpu * 1e6:.0f} µs a request, closed loop on /api/health)")
    bad = await read_back(http, server, completed,
                          f"connections used at most: {http.peak}; ")
    passing = [f.rate for f in flows if f.ok]
    best = max(passing) if passing else None
    print(f"this round: highest rate with p99 <= {TARGET_P99_MS:.0f} ms and zero errors: "
          + (f"{best:,.0f} req/s" if best else "none of the rates"))
    return None if bad else flows


def summary(kind: str, rounds: list[list[Figures] | None]) -> bool:
    """The rounds of one server: per rate the median p99 (the figure judged: single
    rounds on this shared 2-CPU machine differ by the noise of the moment) and errors."""
    done = [r for r in rounds if r is not None]
    if len(done) < len(rounds):
        print(f"{kind}: {len(rounds) - len(done)} round(s) failed: the server did not"
              " start, or instances were lost (see above)")
        return False
    if not done:
        return False
    print(f"\n== {kind}: {len(done)} round(s)")
    print("  rate     p99 ms per round               median p99  errors")
    ok_rates = []
    for i, rate in enumerate(f.rate for f in done[0]):
        p99s = [r[i].pct(0.99) for r in done]
        errors = sum(sum(r[i].errors.values()) + r[i].warmup_errors for r in done)
        median = statistics.median(p99s)
        listed = ", ".join(f"{p:.1f}" for p in p99s)
        print(f"  {rate:5,.0f}/s  {listed:30} {median:9.1f} {errors:7}")
        if median <= TARGET_P99_MS and not errors:
            ok_rates.append(rate)
    best = max(ok_rates) if ok_rates else None
    met = best is not None and best >= TARGET_RATE
    print(f"highest rate with median p99 <= {TARGET_P99_MS:.0f} ms and zero errors: "
          + (f"{best:,.0f} req/s" if best else "none of the rates")
          + f"; target {TARGET_RATE:,} req/s " + ("met" if met else "NOT met"))
    return met


def run_server(kind: str, args: argparse.Namespace) -> list[Figures] | None | str:
    """Serve the API with `kind` on a fresh database and measure it; None if it cannot run."""
    with serve(kind, args) as server:
        if not isinstance(server, Server):
            return server
        load = load_average()
        print(f"\n== {kind} (pid {server.pid}) on {server.store};"
              f" {args.connections} connections, {args.warmup:g} s warm-up +"
              f" {args.duration:g} s a rate; load average before: {load}")
        return asyncio.run(measure(server, args))


@contextlib.contextmanager
def serve(kind: str, args: argparse.Namespace, workers: int = 0,
          settings: dict[str, str] | None = None, cpu: int = 0,
          callgrind: bool = False) -> Iterator[Server | str | None]:
    """The server `kind` on a fresh database (with the environment `settings` on top),
    prepared (`args.tenants`, and `args.approvers` if given) and answering
    /api/health within `args.startup` seconds; what it cannot run for (str), or None
    when it did not start. Stopped afterwards, every process of its tree. With
    `callgrind`, under valgrind's callgrind, its counts marked by MARK_HOOK and written
    to the round's folder (`cg.<pid>.<n>`)."""
    port = free_port()
    pin = getattr(args, "pin", False)  # on `cpu`, its database in memory (`--pin`)
    memory = pin and Path("/dev/shm").is_dir()
    with (tempfile.TemporaryDirectory(dir="/dev/shm" if memory else Path(__file__).parent)
          as name,
          database(kind, Path(name)) as url):
        tmp = Path(name)
        command = server_command(kind, port, tmp, getattr(args, "backends", 2), workers)
        if isinstance(command, str):
            print(f"\n== {kind}: skipped ({command})")
            yield command
            return
        argv, extra, folder = command
        if callgrind:  # instrumented from the first mark, or from its start if need be
            starter = callgrind_starter(tmp)
            extra["BENCH_MARK"] = str(tmp / "mark")
            if starter:
                extra["BENCH_MARK_START"] = str(starter)
            argv = [*CALLGRIND, f"--instr-atstart={'no' if starter else 'yes'}",
                    f"--callgrind-out-file={tmp}/cg.%p", *argv]
        (tmp / "hook").mkdir()
        (tmp / "hook" / "sitecustomize.py").write_text(
            GC_HOOK + WATCH_HOOK + SWITCH_HOOK + MARK_HOOK)
        gc_log = tmp / "gc.log"
        gc_log.touch()
        path = os.pathsep.join(p for p in (str(tmp / "hook"), extra.pop("PYTHONPATH", ""),
                                           os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "DATABASE_URL": url, "BPFLOW_SECRET": SECRET,
               "BPFLOW_INPROCESS_WORKER": "0",
               "PYTHONPATH": path, "BENCH_GC_LOG": str(gc_log), **extra, **(settings or {})}
        prepare_database(env, args.tenants, getattr(args, "approvers", ()))
        log_path = tmp / "server.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(argv, env=env, cwd=folder, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=(lambda: os.sched_setaffinity(0, {cpu}))
                                    if pin else None)
        try:
            if not wait_healthy(port, proc, args.startup):
                print(f"\n== {kind}: did not serve /api/health within {args.startup:.0f} s;"
                      f" log:\n{log_path.read_text()[-2000:]}")
                yield None
                return
            store = ("SQLite (WAL, synchronous=FULL)" if url.startswith("sqlite") else
                     f"PostgreSQL (database {url.rsplit('/', 1)[1]})")
            yield Server(port, proc.pid, gc_log, store, log_path, url, tmp)
        finally:
            tree = process_tree(proc.pid)  # `scaled` starts its processes in their own groups
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for pid in tree:  # a process of the tree still running after the stop
                with contextlib.suppress(OSError):
                    if process_tree(pid):
                        os.kill(pid, signal.SIGKILL)


async def saturate(server: Server, args: argparse.Namespace) -> Figures | None:
    """The flow's closed loop with `args.connections` after the warm-up; None when an
    instance the load completed is not read back completed."""
    http, completed = await connect(server, args)
    await quiesce(http, server)
    work = Flow()
    figures = await closed_loop(http, work, args.connections, args.saturation,
                                args.timeout, server)
    print(line(work.name, figures, "max"), flush=True)
    bad = await read_back(http, server, completed + work.completed, "  ")
    return None if bad else figures


async def together(servers: list[Server], args: argparse.Namespace) -> list[Figures] | None:
    """The flow at `args.together_rate` requests a second on every server at the same time
    (an open loop: on two CPUs a closed loop to both is bound by this generator, and gives
    both the same rate), one flow class each, for their own users' tokens; None when an
    instance is not read back completed."""
    flows = [type(f"Flow{i}", (Flow,), {}) for i in range(len(servers))]
    links = [await connect(s, args, f) for s, f in zip(servers, flows, strict=True)]
    for (http, _), s in zip(links, servers, strict=True):
        await quiesce(http, s)
    works = [f() for f in flows]
    figures = await asyncio.gather(*(
        open_loop(http, w, args.together_rate, args.saturation, 0, args.timeout, s)
        for (http, _), w, s in zip(links, works, servers, strict=True)))
    bad = False
    for (http, done), w, s, f, fig in zip(links, works, servers, flows, figures, strict=True):
        print(line(w.name, fig, "max"), flush=True)
        bad = bool(await read_back(http, s, done + w.completed, "  ", f)) or bad
    return None if bad else list(figures)


SWITCH = {"on": {"BPFLOW_METRICS": "1"}, "off": {"BPFLOW_METRICS": "0"}}  # a server's


def load_average() -> str:
    """The machine's load averages (1, 5, 15 minutes), as the bench prints them."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def metrics_together(args: argparse.Namespace) -> int:
    """`--metrics-ab --together`: both servers at once, metrics on one and off on the
    other, each on a CPU of its own (swapped round by round), the generator between
    them, the same rate to both: the machine's moods of the moment fall on both alike.
    The figure of each is what one CPU of its serves at saturation, 1 / its CPU seconds a
    request (the server is CPU-bound: its database in memory)."""
    kind, args.pin = args.servers[0], True  # each server on its CPU, databases in memory
    load = load_average()
    arms = ("on", "on") if args.control else ("on", "off")
    print(f"metrics {' and '.join(arms)} at the same time on {kind}: {args.rounds} round(s),"
          f" the flow at {args.together_rate:g} req/s to each for {args.saturation:g} s;"
          f" each arm on each CPU and in each place (started and sent to first or second)"
          f" alike over every 4 rounds; load average before: {load}")
    print(HEADER)
    pairs: list[dict[str, float]] = []
    for i in range(args.rounds):
        cpus = (0, 1) if i % 2 == 0 else (1, 0)  # the first arm's CPU, the second's
        order = (0, 1) if (i // 2) % 2 == 0 else (1, 0)  # which arm starts and goes first
        with contextlib.ExitStack() as stack:
            servers: list[Server | None] = [None, None]
            for arm in order:
                started = stack.enter_context(
                    serve(kind, args, settings=SWITCH[arms[arm]], cpu=cpus[arm]))
                if not isinstance(started, Server):
                    return 2
                servers[arm] = started
            first, second = servers
            assert first is not None and second is not None
            print(f"round {i + 1}: metrics {arms[0]} (pid {first.pid}, CPU {cpus[0]}),"
                  f" {arms[1]} (pid {second.pid}, CPU {cpus[1]}), the"
                  f" {'first' if order[0] == 0 else 'second'} started and sent to first:")
            ran = asyncio.run(together([first, second] if order == (0, 1) else [second, first],
                                       args))
        figures = None if ran is None else [ran[order.index(arm)] for arm in (0, 1)]
        if figures is None or any(f.errors for f in figures):
            print("  errors or lost instances: no figure")
            return 2
        pairs.append({"on": 1 / figures[0].server_cpu, "off": 1 / figures[1].server_cpu})
    print("(requests a CPU-second of the server: 1 / its CPU a request"
          + ("; a control: metrics on in both arms, 'off' is the second)" if args.control
             else ")"))
    return judge(pairs)


WITHIN_CYCLE = ("on", "off", "off", "on", "off", "on", "on", "off")  # ABBA BAAB


async def within(server: Server, args: argparse.Namespace, switch: Path
                 ) -> list[tuple[str, int, float]] | None:
    """The flow's closed loop with `args.connections` on one server while its counting is
    switched on and off (`WITHIN_CYCLE`, `args.windows` windows of `args.window` s, each
    after `SETTLE` s for the switch to take and the requests begun before it to end): each
    window's (arm, requests answered, server CPU seconds). None when an instance the load
    completed is not read back completed, or the server did not switch."""
    http, completed = await connect(server, args)
    await quiesce(http, server)
    loop = asyncio.get_running_loop()
    work, answered, errors, stop = Flow(), [0], [0], [False]

    async def client() -> None:
        while not stop[0]:
            problem = await attempt(http, work, True, loop.time() + args.timeout)
            answered[0] += 1
            errors[0] += problem is not None

    clients = [asyncio.create_task(client()) for _ in range(args.connections)]
    windows: list[tuple[str, int, float]] = []
    try:
        await asyncio.sleep(2.0)  # the loop's own warm-up
        for k in range(args.windows):
            arm = WITHIN_CYCLE[k % len(WITHIN_CYCLE)]
            written = "on" if args.control else arm
            switch.write_text(written)
            ack = Path(f"{switch}.ack")
            for _ in range(200):
                if ack.exists() and ack.read_text().startswith(written + " "):
                    break
                await asyncio.sleep(0.01)
            else:
                print(f"  the server did not switch its metrics {written}")
                return None
            await asyncio.sleep(SETTLE)
            n0, c0 = answered[0], tree_cpu(server.pid)
            await asyncio.sleep(args.window)
            windows.append((arm, answered[0] - n0, tree_cpu(server.pid) - c0))
    finally:
        stop[0] = True
        await asyncio.gather(*clients)
    if errors[0]:
        print(f"  {errors[0]} errors")
        return None
    bad = await read_back(http, server, completed + work.completed, "  ")
    return None if bad else windows


SETTLE = 0.3


def a_second(windows: list[tuple[str, int, float]], column: int, window: float
             ) -> dict[str, float]:
    """Each arm's requests (`column` 1) or server CPU seconds (2) a second over its
    windows of `window` seconds."""
    return {arm: sum(float(w[column]) for w in windows if w[0] == arm)
            / (window * sum(w[0] == arm for w in windows)) for arm in ("on", "off")}


def metrics_within(args: argparse.Namespace) -> int:
    """`--metrics-ab --within`: on one server at saturation (its process tree on CPU 0,
    its database in memory, this generator on CPU 1), the counting switched on and off
    window by window (ABBA BAAB); a round's figure is the requests its on-windows
    answered over its off-windows' (each cycle of four windows a pair), `--rounds`
    rounds on fresh servers. The same process in both arms: its memory's layout, its
    hash seed and the host's moods of the minute fall on both alike."""
    kind, args.pin = args.servers[0], True
    os.sched_setaffinity(0, {1})
    print(("an A/A control: metrics on in every window (the 'off' ones too), " if args.control
           else "") +
          f"metrics switched on and off within one {kind} server: {args.rounds} round(s) of"
          f" {args.windows} windows of {args.window:g} s (ABBA BAAB, {SETTLE:g} s after each"
          f" switch not counted), the flow's closed loop with {args.connections}"
          f" connections; load average before: {load_average()}")
    cycles: list[float] = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
            switch = Path(tmp) / "switch"
            switch.write_text("on")
            with serve(kind, args, settings={**SWITCH["on"],
                                             "BENCH_METRICS_SWITCH": str(switch)}) as server:
                if not isinstance(server, Server):
                    return 2
                windows = asyncio.run(within(server, args, switch))
        if windows is None:
            return 2
        rates, cpu = (a_second(windows, column, args.window) for column in (1, 2))
        mine, per_cpu = [], []
        for k in range(0, len(windows) - 3, 4):
            four = windows[k:k + 4]
            on = sum(n for a, n, _ in four if a == "on")
            off = sum(n for a, n, _ in four if a == "off")
            mine.append(on / off)
            per_cpu.append(on / sum(c for a, _, c in four if a == "on") /
                           (off / sum(c for a, _, c in four if a == "off")))
        cycles += mine
        print("  cycles (requests on / off): " + ", ".join(f"{r:.3f}" for r in mine)
              + "\n  the same a CPU-second of the server: "
              + ", ".join(f"{r:.3f}" for r in per_cpu))
        print(f"round {i + 1}: on {rates['on']:,.0f} req/s, off {rates['off']:,.0f} req/s"
              f" (server CPUs busy {cpu['on']:.2f} / {cpu['off']:.2f}): on/off"
              f" {rates['on'] / rates['off']:.4f}; cycles' median"
              f" {statistics.median(mine):.4f}", flush=True)
    ratio = statistics.median(cycles)
    mean = statistics.fmean(cycles)
    rng = random.Random(1)
    boot = sorted(statistics.fmean(rng.choices(cycles, k=len(cycles))) for _ in range(5000))
    low, high = boot[125], boot[4874]
    met = low >= 1 - METRICS_COST
    print(f"\n== metrics on / off within a server, {len(cycles)} cycles: median"
          f" {ratio:.4f}, mean {mean:.4f} (requests with metrics on: {(mean - 1) * 100:+.2f}"
          f" %), 95 % interval of the mean (bootstrap) {low:.4f}-{high:.4f}; target: at most"
          f" {METRICS_COST:.0%} fewer, " + ("met" if met else "NOT met")
          + f"; load average after: {load_average()}")
    return 0 if met else 1


async def requests_counted(http: Http, flow: type[Flow], clients: int, flows: int
                           ) -> tuple[int, list[str]]:
    """`clients` loops, each taking `flows` instances of `flow` through their five
    requests one after the other, however long they take: the same requests in the same
    mix whatever the server's speed. How many went wrong, and the instances completed."""
    errors, completed = [0], []

    async def client() -> None:
        work = flow()
        for _ in range(5 * flows):
            errors[0] += await attempt(http, work, True, time.monotonic() + 3600) is not None
        completed.extend(work.completed)

    await asyncio.gather(*(client() for _ in range(clients)))
    return errors[0], completed


async def mark(server: Server, what: str) -> None:
    """Have the server's MARK_HOOK call its marker ("zero" or "dump") in every process of
    its tree (a forked worker, its parent), and wait for them all."""
    assert server.folder is not None
    path = server.folder / "mark"
    path.write_text(what)
    for _ in range(600):
        await asyncio.sleep(0.1)
        acks = [Path(f"{path}.ack.{pid}") for pid in process_tree(server.pid)]
        if all(a.exists() and a.read_text() == what for a in acks):
            return
    raise SystemExit(f"the server (pid {server.pid}) did not mark '{what}'")


def instructions_dumped(server: Server) -> int:
    """The instructions in the last dump written by the server's busiest process (its
    worker: the one that served the requests)."""
    assert server.folder is not None
    best = 0
    for path in server.folder.glob("cg.*.*"):
        for row in path.read_text(errors="replace").splitlines():
            if row.startswith(("summary:", "totals:")):
                count = int(row.split()[1])
                print(f"  {path.name}: {count:,} instructions")
                best = max(best, count)
                break
    return best


async def instructions(server: Server, args: argparse.Namespace, flow: type[Flow]
                       ) -> tuple[float, int] | None:
    """The server's instructions a request over `args.flows` instances of the flow on
    each of `args.connections` (after one each not counted), and the instances
    completed; None when one of them is not read back completed."""
    http, _ = await connect(server, args, flow, warm=False)
    errors, warm = await requests_counted(http, flow, args.connections, 1)
    await mark(server, "zero")
    wrong, done = await requests_counted(http, flow, args.connections, args.flows)
    await mark(server, "dump")
    errors += wrong
    counted = instructions_dumped(server)
    if args.keep and server.folder is not None:  # the dumps, for callgrind_annotate
        for dump in server.folder.glob("cg.*.*"):
            shutil.copy(dump, Path(args.keep) / f"{flow.__name__}-{dump.name}")
    bad = await read_back(http, server, warm + done, "  ", flow)
    if errors or bad or not counted or len(done) != args.flows * args.connections:
        print(f"  errors: {errors}, instances completed: {len(done)}, not read back"
              f" completed: {len(bad)}, instructions dumped: {counted}")
        return None
    return counted / (5 * len(done)), len(done)


async def each_instructions(servers: list[Server], args: argparse.Namespace
                            ) -> list[tuple[float, int] | None]:
    """`instructions` of every server at once, a flow class (and users' tokens) each."""
    flows = [type(f"Flow{k}", (Flow,), {}) for k in range(len(servers))]
    return list(await asyncio.gather(*(instructions(s, args, f)
                                       for s, f in zip(servers, flows, strict=True))))


def metrics_instructions(args: argparse.Namespace) -> int:
    """`--metrics-ab --instructions`: the servers' work counted in instructions (callgrind,
    valgrind's simulated CPU), not in seconds, which this machine's neighbours move by
    several per cent from one minute to the next: a count is the same whatever else the
    machine does. Both arms run at once, each under callgrind on a fresh database, and
    serve the same requests (`args.flows` flows on each connection); the figure is what
    a request costs in each, off / on being the share of requests a CPU-bound server
    answers with metrics on. What a count does not see: the cache's and the memory's
    stalls, and the system calls' work in the kernel (the same in both arms: the
    counting makes none on a request's path). The fold's thread wakes once a second of
    wall time, which under callgrind is ~50 times fewer requests than at full speed: its
    cost a wake-up is counted ~50 times too often."""
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian's package valgrind)")
        return 2
    kind = args.servers[0]
    args.startup = max(args.startup, 900.0)  # imports under callgrind: minutes
    arms = ("on", "on") if args.control else ("on", "off")
    print(("an A/A control: metrics on in both arms; " if args.control else "")
          + f"instructions a request with metrics {' and '.join(arms)}, {kind} under"
          f" callgrind: {args.rounds} round(s) of {args.flows} flow(s) (five requests"
          f" each) on each of {args.connections} connections after one not counted,"
          f" both arms at once; load average before: {load_average()}")
    pairs: list[dict[str, float]] = []
    for i in range(args.rounds):
        with contextlib.ExitStack() as stack:
            servers = []
            for arm in arms:
                started = stack.enter_context(  # a hash seed a round, the same in both
                    serve(kind, args, settings={**SWITCH[arm], "PYTHONHASHSEED": str(i)},
                          callgrind=True))
                if not isinstance(started, Server):
                    return 2
                servers.append(started)
            counted = asyncio.run(each_instructions(servers, args))
        if any(c is None for c in counted):
            return 2
        (on, done_on), (off, done_off) = counted  # type: ignore[misc]
        print(f"round {i + 1}: instructions a request, metrics {arms[0]} {on:,.0f},"
              f" {arms[1]} {off:,.0f} (instances completed {done_on} / {done_off}):"
              f" on / off {on / off:.4f}", flush=True)
        pairs.append({"on": 1 / on, "off": 1 / off})
    ratios = [p["on"] / p["off"] for p in pairs]
    worst = min(ratios)
    met = worst >= 1 - METRICS_COST
    print(f"\n== requests a CPU-bound server answers with metrics on / off (the inverse of"
          f" the instructions a request): rounds {', '.join(f'{r:.4f}' for r in ratios)};"
          f" the lowest {worst:.4f} ({(worst - 1) * 100:+.2f} %); target: at most"
          f" {METRICS_COST:.0%} fewer, " + ("met" if met else "NOT met"))
    return 0 if met else 1


def judge(pairs: list[dict[str, float]]) -> int:
    """Print the pairs and their medians; 0 when on costs no more than METRICS_COST."""
    on = statistics.median(p["on"] for p in pairs)
    off = statistics.median(p["off"] for p in pairs)
    ratios = [p["on"] / p["off"] for p in pairs]
    print("\n== metrics on / off at saturation (req/s)")
    for i, p in enumerate(pairs, 1):
        print(f"  pair {i}: on {p['on']:7,.0f}  off {p['off']:7,.0f}  on/off"
              f" {p['on'] / p['off']:.3f}")
    load = load_average()
    met = on >= (1 - METRICS_COST) * off
    print(f"median: on {on:,.0f}, off {off:,.0f}, on/off {on / off:.3f}"
          f" (requests with metrics on: {(on / off - 1) * 100:+.1f} %), median of the pairs'"
          f" ratios {statistics.median(ratios):.3f}; target: at most"
          f" {METRICS_COST:.0%} fewer, " + ("met" if met else "NOT met")
          + f"; load average after: {load}")
    return 0 if met else 1


def metrics_ab(args: argparse.Namespace) -> int:
    """Metrics on and off in turns (`--metrics-ab`): the requests a second at saturation,
    and their ratio; 0 when on costs no more than METRICS_COST."""
    kind = args.servers[0]
    if args.pin:  # the server on CPU 0 (its whole tree), this generator on CPU 1
        os.sched_setaffinity(0, {1})
    load = load_average()
    print(f"metrics on and off in turns on {kind}: {args.rounds} pair(s), the flow's closed"
          f" loop with {args.connections} connections for {args.saturation:g} s; load"
          f" average before: {load}")
    print(HEADER)
    pairs: list[dict[str, float]] = []
    for i in range(args.rounds):
        got: dict[str, float] = {}
        for mode in (("on", "off") if i % 2 == 0 else ("off", "on")):
            with serve(kind, args, settings=SWITCH[mode]) as server:
                if not isinstance(server, Server):
                    return 2
                print(f"pair {i + 1}, metrics {mode} (pid {server.pid}):")
                figures = asyncio.run(saturate(server, args))
            if figures is None or figures.errors:
                print("  errors or lost instances: no figure")
                return 2
            got[mode] = figures.achieved
        pairs.append(got)
    return judge(pairs)


def wait_healthy(port: int, proc: subprocess.Popen, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Connection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def numbers(text: str, cast: Callable[[str], Any] = float) -> list[Any]:
    return [cast(x) for x in text.split(",") if x.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=numbers, default=[100, 500, 1000],
                        help="request rates (req/s), comma-separated")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds a rate")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds not counted")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="a request is an error after this long (s, from its slot)")
    parser.add_argument("--servers", type=lambda s: numbers(s, str.strip), default=["reflex"],
                        help="uvicorn, uvicorn-httptools, granian, reflex, scaled"
                             " (comma-separated)")
    parser.add_argument("--saturation", type=float, default=5.0,
                        help="seconds of each closed-loop (maximum throughput) run")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds a server (each on a fresh server and database)")
    parser.add_argument("--startup", type=float, default=120.0,
                        help="seconds to wait for the server")
    parser.add_argument("--backends", type=int, default=2,
                        help="backend processes of `scaled`")
    parser.add_argument("--tenants", type=int, default=1,
                        help="spread the instances over this many tenants (default and"
                             " t1, t2, ...: each its own user and templates)")
    parser.add_argument("--pin", action="store_true",
                        help="with --metrics-ab: the server's processes on CPU 0 and"
                             " this generator on CPU 1 (neither takes the other's CPU),"
                             " the database in memory (/dev/shm: no disk's flush times)")
    parser.add_argument("--together", action="store_true",
                        help="with --metrics-ab: both servers at the same time, each on a"
                             " CPU of its own (swapped each round), databases in memory")
    parser.add_argument("--within", action="store_true",
                        help="with --metrics-ab: one server at saturation, its counting"
                             " switched on and off window by window (ABBA)")
    parser.add_argument("--windows", type=int, default=32,
                        help="with --within: windows a round (a multiple of 4)")
    parser.add_argument("--window", type=float, default=2.0,
                        help="with --within: seconds a window")
    parser.add_argument("--together-rate", type=float, default=500.0,
                        help="with --together: requests a second to each server")
    parser.add_argument("--control", action="store_true",
                        help="with --together, --within or --instructions: metrics on in"
                             " both arms (an A/A control of the harness: its ratio should"
                             " be 1)")
    parser.add_argument("--instructions", action="store_true",
                        help="with --metrics-ab: both arms under callgrind, their"
                             " instructions a request counted")
    parser.add_argument("--flows", type=int, default=3,
                        help="flows a connection counted a round with --instructions")
    parser.add_argument("--keep", help="with --instructions: copy callgrind's dumps here")
    parser.add_argument("--metrics-ab", action="store_true",
                        help="metrics on and off in turns on the first server: the"
                             " requests at saturation and their ratio")
    args = parser.parse_args()
    args.rates = sorted(args.rates)
    print(f"{os.cpu_count()} CPUs shared by the server and this load generator")
    if args.metrics_ab:
        if args.within:
            return metrics_within(args)
        if args.instructions:
            return metrics_instructions(args)
        return metrics_together(args) if args.together else metrics_ab(args)
    # the servers take turns, round by round: the machine's noise of a moment falls on
    # them alike, not on all of one server's rounds
    rounds: dict[str, list[list[Figures] | None] | None] = {kind: [] for kind in args.servers}
    for _ in range(args.rounds):
        for kind in [k for k in args.servers if rounds[k] is not None]:
            flows = run_server(kind, args)
            if isinstance(flows, str):  # cannot run here
                rounds[kind] = None
            else:
                kept = rounds[kind]
                assert kept is not None
                kept.append(flows)
    outcomes = [summary(kind, kept) if (kept := rounds[kind]) else False
                for kind in args.servers]
    return 0 if outcomes and outcomes[0] else 1


if __name__ == "__main__":
    sys.exit(main())
