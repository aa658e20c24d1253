"""The faults of bench/soak.py: processes of `make run-scaled` (bpflow.scaled, its backends
and workers programs of supervisord) killed while the load runs, and how long the service
and the process take to come back (SPEC §14a).

At a quarter of the run `worker-1` gets SIGKILL: measured until supervisord has it
RUNNING again (a new pid). At half, `backend-1` (its Granian process and worker, the
program's process group) gets SIGKILL three times within 5 s, each time as soon as
supervisord has started it again: measured after each kill until the port answers
/api/health (a new connection each try: the kernel hands it to a listening backend), then
until backend-1 listens on the port again and is RUNNING. At three quarters `backend-2`
is killed once, measured alike. Every kill's time is kept: a request that was in flight
on a killed backend may fail, and the soak counts those apart.

supervisord is asked through its control socket (XML-RPC, with supervisor's own client
transport, as `supervisorctl` asks it; the address and password from supervisord.conf).
"""

from __future__ import annotations

import asyncio
import configparser
import os
import signal
import socket
import time
import xmlrpc.client
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PORT_BACK_S = 10.0  # the port must answer again within this after a backend's kill
WORKER_BACK_S = 60.0  # a killed worker must be RUNNING again within this
BACKEND_BACK_S = 180.0  # a killed backend must listen again within this (a busy machine)


class Supervisor:
    """supervisord of a run, through its control socket."""

    def __init__(self, conf: Path) -> None:
        from supervisor.xmlrpc import SupervisorTransport

        parser = configparser.RawConfigParser()
        parser.read(conf)
        ctl = parser["supervisorctl"]
        transport = SupervisorTransport(ctl.get("username"), ctl.get("password"),
                                        ctl["serverurl"])
        self.rpc = xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)

    def info(self, name: str) -> tuple[str, int]:
        """(state, pid) of program `name`; pid 0 when it has no process."""
        got = self.rpc.supervisor.getProcessInfo(name)
        return got["statename"], got["pid"]


def listeners(port: int) -> int:
    """How many sockets listen on `port` (each backend's Granian worker has one)."""
    count, hex_port = 0, f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        count += sum(1 for line in lines
                     if (f := line.split())[1].endswith(hex_port) and f[3] == "0A")
    return count


def port_answers(port: int) -> bool:
    """GET /api/health on a new connection answers 200."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(2)
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Connection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


async def until(check: Callable[[], object], limit: float, step: float = 0.05):
    """(seconds it took, the check's value) once `check` (run on a thread) is true, or
    (None, None) after `limit` seconds."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        if value := await asyncio.to_thread(check):
            return time.monotonic() - began, value
        await asyncio.sleep(step)
    return None, None


@dataclass
class Faults:
    sup: Supervisor
    port: int
    backends: int
    workers: int
    kills: list[float] = field(default_factory=list)  # monotonic times of every kill
    killed: set[str] = field(default_factory=set)  # the programs killed
    failures: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # the figures, for the summary
    first: int = 0  # the index in `kills` of the current fault's first kill

    def say(self, text: str, began: float) -> None:
        """`text` about the fault whose first kill is `self.kills[self.first]`."""
        at = self.kills[self.first] - began if self.kills else 0.0
        line = f"  fault at {int(at // 60)}:{at % 60:04.1f}: {text}"
        self.lines.append(line)
        print(line, flush=True)

    async def kill_worker(self, name: str, began: float) -> None:
        state, pid = self.sup.info(name)
        if state != "RUNNING":
            self.failures.append(f"{name} was {state} before its kill")
            return
        os.kill(pid, signal.SIGKILL)
        self.first = len(self.kills)
        self.kills.append(time.monotonic())
        self.killed.add(name)
        took, _ = await until(lambda: (s := self.sup.info(name))[0] == "RUNNING"
                              and s[1] != pid, WORKER_BACK_S, 0.1)
        if took is None:
            self.failures.append(f"{name} not RUNNING again within {WORKER_BACK_S:.0f} s")
        self.say(f"{name} killed (pid {pid}); RUNNING again (a new pid) after "
                 + (f"{took:.1f} s" if took is not None else "MORE than "
                    f"{WORKER_BACK_S:.0f} s"), began)

    async def kill_backend(self, name: str, times: int, began: float) -> None:
        doomed: list[int] = []
        back: list[float | None] = []
        self.first = len(self.kills)
        for _ in range(times):
            took, pid = await until(lambda: (p := self.sup.info(name)[1]) not in (0, *doomed)
                                    and p, 10, 0.05)
            if pid is None:
                self.failures.append(f"{name} not started again within 10 s of its kill")
                break
            os.killpg(pid, signal.SIGKILL)  # its Granian process and worker process
            self.kills.append(time.monotonic())
            self.killed.add(name)
            doomed.append(pid)
            took, _ = await until(lambda: port_answers(self.port), PORT_BACK_S, 0.02)
            back.append(took)
        spread = self.kills[-1] - self.kills[self.first] if doomed else 0.0
        # a new process RUNNING (the killed one may take a moment to be gone: until
        # then supervisord says RUNNING and its socket still listens)
        serving, _ = await until(lambda: (s := self.sup.info(name))[0] == "RUNNING"
                                 and s[1] not in doomed
                                 and listeners(self.port) >= self.backends, BACKEND_BACK_S, 0.2)
        if any(t is None for t in back):
            self.failures.append(f"the port did not answer within {PORT_BACK_S:.0f} s of a "
                                 f"kill of {name}")
        if serving is None:
            self.failures.append(f"{name} not serving again within {BACKEND_BACK_S:.0f} s")
        shown = ", ".join(f"{t:.2f} s" if t is not None else "NEVER" for t in back)
        since = time.monotonic() - self.kills[-1] if serving is not None else None
        times = f"{len(doomed)} times within {spread:.1f} s" if len(doomed) > 1 else "once"
        self.say(f"{name} killed {times}; the port answered again after {shown}; {name} "
                 "listening and RUNNING again "
                 + (f"{since:.1f} s after the last kill" if since is not None else "NEVER"),
                 began)

    async def run(self, began: float, total: float) -> None:
        """The faults at a quarter, half and three quarters of `total` seconds from
        `began` (monotonic)."""
        plan: list = [(0.25, self.kill_worker, ("worker-1",))] if self.workers else []
        if self.backends >= 2:
            plan += [(0.5, self.kill_backend, ("backend-1", 3)),
                     (0.75, self.kill_backend, ("backend-2", 1))]
        else:
            print("  (one backend: no backend is killed, the port would go down with it)")
        for share, fault, args in plan:
            await asyncio.sleep(max(0.0, began + share * total - time.monotonic()))
            try:
                await fault(*args, began)
            except (OSError, xmlrpc.client.Error) as exc:
                self.failures.append(f"{fault.__name__}{args}: {exc}")

    def in_flight(self, at: float, timeout: float) -> bool:
        """Whether an error that ended at `at` may be a request in flight at a kill."""
        return any(k <= at <= k + timeout + 1 for k in self.kills)
