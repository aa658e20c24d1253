"""`make run-scaled` under faults (SPEC §14a): `python -m bpflow.scaled --backend-only`
with two backends and two workers under supervisord, on a PostgreSQL schema of the
module's own and Redis, under a steady load of starts and completions (and timers)
through its one port. One start serves every test; the last one kills it.

1. a worker killed: the port keeps answering, supervisord starts the worker again
   (`supervisorctl status` says RUNNING with a new pid), the timers stay on time;
2. one backend killed three times within 5 s: the port answers again within 10 s each
   time (at once: the other backend holds it) and the backend comes back;
3. every program killed in the middle of a bulk retry of 1,000 failed instances: when
   they are back, each instance is retried exactly once and the operation finishes;
4. a scrape of a backend's `/metrics` counts the workers' work too (multi-process metrics);
5. the manager killed with SIGKILL: nothing of the run is left running or listening.

After each fault every completion the API acknowledged is in the database exactly once.
The log of the run is test-output/scaled/managed/run.log, supervisord's and each
program's in test-output/scaled/managed/logs/.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from bpflow.store import Store
from tests.conftest import pg_schema
from tests.scaled.conftest import OUTPUT, SECRET, require_servers, server_env
from tests.servers import ROOT, STARTUP_S, answers, free_port, stop
from tests.services.helpers import FAILING, failed, retried_exactly_once

HOME = OUTPUT / "managed"
LEASE_S = 8
TIMER_S = 2
FORM = {"name": "storm", "circles": [
    {"uri": "fill", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["fill"]]}]}
TICK = {"name": "tick", "circles": [
    {"uri": "wait", "box": {"action": {"type": "timer", "delay": TIMER_S}}},
    {"uri": "end", "deps": [["wait"]]}]}


@dataclass
class Load:
    """Starts and completions of FORM through `base`, about ten requests a second, and a
    TICK started every second, on a thread of its own until `stop`."""
    base: str
    bearer: dict[str, str]
    acked: list[str] = field(default_factory=list)  # instances whose completion was 200
    ticks: list[str] = field(default_factory=list)
    answers: list[tuple[float, bool]] = field(default_factory=list)  # (when, answered well)
    halt: threading.Event = field(default_factory=threading.Event)

    def call(self, client: httpx.Client, path: str, body: dict, want: int) -> dict | None:
        try:
            r = client.post(self.base + path, json=body, headers=self.bearer)
            good = r.status_code == want
        except httpx.TransportError:
            good = False
        self.answers.append((time.monotonic(), good))
        return r.json() if good else None

    def run(self) -> None:
        last_tick = 0.0
        # a connection a request: each lands on whichever backend the kernel picks
        with httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as c:
            while not self.halt.is_set():
                if time.monotonic() - last_tick >= 1:
                    last_tick = time.monotonic()
                    if tick := self.call(c, "/api/instances", {"template": "tick"}, 201):
                        self.ticks.append(tick["id"])
                inst = self.call(c, "/api/instances", {"template": "storm"}, 201)
                if inst:
                    path = f"/api/instances/{inst['id']}/circles/fill/complete"
                    mark = inst["circles"]["fill"]["bookmark"]
                    if self.call(c, path, {"bookmark": mark, "result": {"n": 1}}, 200):
                        self.acked.append(inst["id"])
                self.halt.wait(0.1)

    def longest_gap(self, since: float) -> float:
        """The longest time since `since` without a good answer (to the last one)."""
        good = [t for t, ok in list(self.answers) if ok and t >= since]
        marks = [since, *good]
        return max(b - a for a, b in zip(marks, marks[1:], strict=False)) if good else 1e9


@dataclass
class Run:
    process: subprocess.Popen
    port: int
    store: Store
    load: Load
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def supervisor() -> Any:
    """supervisord's XML-RPC interface, what `supervisorctl` talks to, from this process
    (a `supervisorctl` a question takes a second or more to start on a busy machine)."""
    import configparser
    from xmlrpc.client import ServerProxy

    from supervisor.xmlrpc import SupervisorTransport
    conf = configparser.RawConfigParser()
    conf.read(HOME / "supervisord.conf")
    ctl = conf["supervisorctl"]
    transport = SupervisorTransport(ctl["username"], ctl["password"], ctl["serverurl"])
    return ServerProxy("http://127.0.0.1", transport=transport).supervisor


def status() -> dict[str, tuple[str, int]]:
    """As `supervisorctl status`: program → (state, pid; 0 unless RUNNING)."""
    return {p["name"]: (p["statename"], p["pid"] if p["statename"] == "RUNNING" else 0)
            for p in supervisor().getAllProcessInfo()}


def pid(program: str) -> int:
    """As `supervisorctl pid PROGRAM`: its pid, STARTING too (0 when it has none)."""
    return supervisor().getProcessInfo(program)["pid"]


def wait_for(what: str, check, limit: float):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    pytest.fail(f"{what}: not within {limit:g} s (logs in {HOME})", pytrace=False)


def leads(pid: int) -> bool:
    """Whether `pid` leads its process group yet (supervisord names a program's pid as
    soon as it has forked it, before the child makes its group)."""
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def tree(root: int) -> set[int]:
    """`root` and every process below it."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += [c for c, p in parents.items() if p == pid and c not in found]
    return found


def listeners(port: int) -> set[str]:
    """The sockets that listen on `port` (/proc/net/tcp, tcp6: state 0A), as the
    `socket:[inode]` a process's descriptor links to."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":
                inodes.add(f"socket:[{fields[9]}]")
    return inodes


def listening(port: int) -> int:
    """How many sockets listen on `port`."""
    return len(listeners(port))


def holders(port: int) -> list[str]:
    """The processes holding a socket that listens on `port`: 'pid command' each."""
    inodes = listeners(port)
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and any(os.readlink(fd) in inodes
                                            for fd in (entry / "fd").iterdir()):
                out.append(f"{entry.name} {(entry / 'cmdline').read_text()[:120]!r}")
        except OSError:
            pass
    return out


def exactly_once(store: Store, acked: list[str]) -> None:
    """Each acknowledged completion is one `circle_succeeded` of `fill`, and only those
    instances' (an instance's completion that got no answer may be there once too). The
    load may still run: what it acknowledged is taken before the database is read."""
    acked = list(acked)
    with store.db.connect() as conn:
        counts = dict(conn.execute(text(
            "select instance_id, count(*) from events where kind = 'circle_succeeded'"
            " and circle = 'fill' group by instance_id")).all())
    assert acked, "the load had no completion acknowledged"
    assert [i for i in acked if counts.get(i) != 1] == []
    assert max(counts.values()) == 1


def timer_lateness(store: Store, ids: list[str]) -> list[float]:
    """Each fired timer's lateness (s): when its circle succeeded, less its start and
    delay; an unfired one as infinity."""
    with store.db.connect() as conn:
        rows = conn.execute(text(
            "select instance_id, kind, at from events where instance_id = any(:ids) and"
            " (kind = 'instance_started' or (kind = 'circle_succeeded' and circle = 'wait'))"),
            {"ids": ids}).all()
    started = {i: at for i, kind, at in rows if kind == "instance_started"}
    fired = {i: at for i, kind, at in rows if kind == "circle_succeeded"}
    return [(fired[i] - started[i]).total_seconds() - TIMER_S if i in fired else float("inf")
            for i in ids]


@pytest.fixture(scope="module")
def run(pg_available) -> Iterator[Run]:
    require_servers(pg_available)
    shutil.rmtree(HOME, ignore_errors=True)
    HOME.mkdir(parents=True)
    with pg_schema() as url:
        port = free_port()
        env = {**server_env(url), "BPFLOW_HOME": str(HOME)}
        log = HOME / "run.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "bpflow.scaled", "--backends", "2", "--workers", "2",
                 "--port", str(port), "--backend-only", "--lease", str(LEASE_S),
                 "--poll", "0.1"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        store = Store(url, secret=SECRET.encode())
        load = None
        try:
            def ready() -> bool:
                if process.poll() is not None:
                    pytest.fail(f"bpflow.scaled exited with {process.returncode}:\n"
                                + log.read_text()[-3000:], pytrace=False)
                return "bpflow scaled out on" in log.read_text()

            wait_for("the ready line", ready, STARTUP_S)
            # the line comes once the port answers, not before
            assert answers(f"http://127.0.0.1:{port}/api/health")
            store.add_user("loader", "pw-loader", ["user"])
            store.put_template(FORM)
            store.put_template(TICK)
            token = httpx.post(f"http://127.0.0.1:{port}/api/auth/token", timeout=30,
                               json={"username": "loader", "password": "pw-loader"}).json()
            load = Load(f"http://127.0.0.1:{port}",
                        {"Authorization": f"Bearer {token['access_token']}"})
            threading.Thread(target=load.run, daemon=True).start()
            wait_for("the load's first completions", lambda: len(load.acked) >= 5, 60)
            yield Run(process, port, store, load, log)
        finally:
            if load:
                load.halt.set()
            stop(process)
            store.close()


def test_a_killed_worker_comes_back_and_the_timers_stay_on_time(run):
    state, pid = status()["worker-1"]
    assert state == "RUNNING"
    began, ticks_before = time.monotonic(), len(run.load.ticks)
    os.kill(pid, signal.SIGKILL)
    wait_for("worker-1 RUNNING again under a new pid",
             lambda: (s := status()["worker-1"])[0] == "RUNNING" and s[1] != pid, 30)
    assert run.load.longest_gap(began) < 2
    ticks = run.load.ticks[ticks_before:]
    assert len(ticks) >= 3
    wait_for("the timers started since the kill to fire",
             lambda: max(timer_lateness(run.store, ticks)) < float("inf"), LEASE_S + 10)
    late = timer_lateness(run.store, ticks)
    # one the killed worker held waits for its lease to lapse; the others are on time
    assert statistics.median(late) < 1.5 and max(late) < LEASE_S + 3, late
    exactly_once(run.store, run.load.acked)


def test_a_backend_killed_three_times_in_5_s_leaves_the_port_answering(run):
    # a test before may have restarted it: supervisord says RUNNING once it stayed up
    # for its `startsecs`
    wait_for("backend-1 RUNNING", lambda: status()["backend-1"][0] == "RUNNING", 60)
    began, killed, kills, back = time.monotonic(), [], [], []
    for _ in range(3):
        doomed = wait_for("backend-1 started again", lambda: (
            (p := pid("backend-1")) not in (0, *killed) and leads(p) and p), 5)
        os.killpg(doomed, signal.SIGKILL)  # its Granian process and its worker
        killed.append(doomed)
        kills.append(time.monotonic())
        wait_for("the port answering again", lambda: answers(f"{run.base}/api/health"), 10)
        back.append(time.monotonic() - kills[-1])
    assert kills[-1] - kills[0] < 5
    assert max(back) < 10
    assert run.load.longest_gap(began) < 10
    wait_for("backend-1 RUNNING again", lambda: (s := status()["backend-1"])[0] == "RUNNING"
             and s[1] not in killed, 60)
    assert status()["backend-2"][0] == "RUNNING"
    exactly_once(run.store, run.load.acked)


def test_a_bulk_retry_survives_every_program_killed_midway(run):
    """SPEC §18: the whole installation (both backends and both workers, which apply bulk
    operations) killed in the middle of a bulk retry of 1,000 failed instances, started
    again by supervisord: every instance retried exactly once, the operation finished with
    a result for each."""
    run.store.put_template(FAILING)
    ids = failed(run.store, 1000)
    run.store.add_user("operator", "pw-operator-1234", ["admin"])
    token = httpx.post(f"{run.base}/api/auth/token", timeout=30, json={
        "username": "operator", "password": "pw-operator-1234"}).json()["access_token"]
    r = httpx.post(f"{run.base}/api/operations", timeout=30,
                   headers={"Authorization": f"Bearer {token}"},
                   json={"action": "retry", "filter": {"template": "claim",
                                                       "status": "failed"}})
    assert r.status_code == 202, r.text
    op_id = r.json()["operation"]
    assert r.json()["matched"] == 1000
    wait_for("the retry to begin", lambda: run.store.operation(op_id)["done"] >= 150, 60)
    programs = ("backend-1", "backend-2", "worker-1", "worker-2")
    killed = [p for p in (pid(name) for name in programs) if p]
    for doomed in killed:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(doomed, signal.SIGKILL)
    assert run.store.operation(op_id)["finished_at"] is None  # stopped midway
    wait_for("every program RUNNING again", lambda: all(
        (s := status()[name])[0] == "RUNNING" and s[1] not in killed for name in programs),
        60)
    wait_for("the operation to finish",  # 850 or so moves left, on a busy machine
             lambda: run.store.operation(op_id)["finished_at"] is not None, 180)
    retried_exactly_once(run.store, op_id, ids)
    exactly_once(run.store, run.load.acked)


def test_a_scrape_of_a_backend_counts_the_workers_too(run):
    """Multi-process metrics: the timers are the workers' (the backends run none), yet
    their lateness is in a backend's `/metrics`, with every process's file in the one
    folder of the run."""
    from prometheus_client.parser import text_string_to_metric_families

    def scraped() -> dict[str, float]:
        r = httpx.get(f"{run.base}/metrics", timeout=30)
        assert r.status_code == 200, r.text
        return {s.name: s.value for f in text_string_to_metric_families(r.text)
                for s in f.samples if not s.labels or s.name.endswith("_count")}

    wait_for("the workers' timers in a backend's scrape", lambda: scraped().get(
        "bpflow_timer_lateness_seconds_count", 0) > 0, 30)
    assert len(list((HOME / "metrics").glob("counter_*.db"))) >= 4  # 2 backends, 2 workers


def test_the_manager_killed_leaves_nothing_behind(run):
    assert listening(run.port) >= 1  # the check below can fail
    # itself, supervisord, the backends (a Granian process and its worker each), workers;
    # a program killed by a test before may still be starting its Granian worker
    processes = wait_for("every process of the run up", lambda: (
        p if len(p := tree(run.process.pid)) >= 1 + 1 + 2 * 2 + 2 else None), 60)
    run.load.halt.set()
    os.kill(run.process.pid, signal.SIGKILL)
    wait_for("every process of the run gone",
             lambda: not any(alive(p) for p in processes), 10)
    # one started after the list was taken (a Granian worker, a restart) dies with its
    # parent too, a moment later; one left behind would hold the port for good
    deadline = time.monotonic() + 5
    while listening(run.port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert listening(run.port) == 0, f"still listening: {holders(run.port)}"
    exactly_once(run.store, run.load.acked)
