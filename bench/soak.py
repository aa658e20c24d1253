"""A soak of the paper's reimbursement flow in scale-out mode (SPEC §14, 14a; issues #16, #28).

The server is bench/paper_flow.py's `scaled`: `python -m bpflow.scaled --backends 2
--workers 2 --backend-only` from a copy of the tree, on a PostgreSQL database created for
the run (and dropped after it) and Reflex's Redis state manager: under supervisord, 2
backends (each its own Granian server, both on one port) and 2 `bpflow worker`s.
paper_flow's open-loop generator drives the flow at `--rate` requests a second for
`--minutes` (fractions allowed), a minute at a time (the instances in flight carry over
from one minute to the next). With the workers running, the approval circle's action runs
as well (it mails the claim's manager, whose approval the load's admin then overrides by
hand, as paper_flow completes it): the claims name an approver of their own
(`bench-manager`), since nobody may approve their own claim.

Faults (bench/faults.py; `--no-faults` leaves them out): worker-1 killed at a quarter of
the run, backend-1 killed three times within 5 s at half, backend-2 killed at three
quarters; each printed with how long the port took to answer again and the process to be
back. A request in flight on a killed backend may fail: those (ended within `--timeout`
+ 1 s of a kill) are counted apart.

Every `--sample` seconds it reads the resident memory (RSS) of every process of the
server's tree, by role (the manager, supervisord, each backend's Granian process and its
worker process, each worker; a restarted program is the same role under a new pid). It
prints a line a minute (throughput, p50/p99/max, errors, each role's RSS) and at the end,
per process, its RSS after the first minute (the caches, pools and code of a fresh
process are filled by then; in a run shorter than 2 minutes after half the run), at the
end, and the growth between; a process the faults restarted is not judged. Every instance
the load completed is read back through the API and must be `completed`, and no circle of
them may have succeeded twice in the database.

Verdict: PASS only with no error besides those in flight at a kill (none answered wrongly
or late, none read back other than completed, no circle applied twice, no process gone or
restarted but by the faults), every fault recovered from (the port answering within 10 s
of a backend's kill, the killed program back), and no process whose RSS grew more than
`--growth` % (default 10) after the first minute. Exit status 0 on PASS, 1 otherwise.

    .venv/bin/python bench/soak.py [--minutes 10] [--rate 50] [--backends 2] [--workers 2]
        [--sample 5] [--connections 100] [--timeout 5] [--growth 10] [--no-faults]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from faults import Faults, Supervisor
from paper_flow import (
    Figures,
    Flow,
    Server,
    connect,
    open_loop,
    process_tree,
    read_back,
    serve,
)

GROWTH_LIMIT_PCT = 10.0
# With workers running, the approval circle's action runs too: it mails the claim's manager,
# who must not be the claimant (the load's admin), else the action fails the circle before
# the admin completes it by hand. The claims of the soak name this approver instead.
MANAGER = "bench-manager"


class ManagedFlow(Flow):
    """paper_flow's Flow, its claims naming MANAGER."""

    def next(self) -> tuple[str, str, Any, str]:
        method, path, payload, step = super().next()
        if step == "claim":
            payload["result"]["manager"] = MANAGER  # the claim's result is its own dict
        return method, path, payload, step


def rss_reader():
    """RSS in bytes of a pid (None once it is gone): psutil when installed, else /proc."""
    if importlib.util.find_spec("psutil") is not None:
        import psutil

        def rss(pid: int) -> int | None:
            try:
                return psutil.Process(pid).memory_info().rss
            except psutil.Error:
                return None
        return rss

    def rss(pid: int) -> int | None:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None
    return rss


def environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0")
                if "=" in kv)


def roles(root: int) -> dict[int, str]:
    """The processes of the server's tree by what they are: `manager` (bpflow.scaled),
    `supervisord`, each program by the name supervisord gives it (`BPFLOW_PROCESS`:
    `worker-1`, …; for a backend, `backend-1` is its Granian worker process, which
    serves, and `backend-1 main` the Granian process that forked it)."""
    tree = process_tree(root)
    names = {pid: environ(pid).get("BPFLOW_PROCESS") for pid in tree}
    named: dict[int, str] = {}
    for pid, (parent, _) in tree.items():
        name = names[pid]
        if pid == root:
            named[pid] = "manager"
        elif name is None:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            named[pid] = "supervisord" if b"supervisord" in cmd else f"pid {pid}"
        elif name.startswith("backend-") and names.get(parent) != name:
            named[pid] = f"{name} main"
        else:
            named[pid] = name
    return named


def counts(named: dict[int, str]) -> tuple[int, int]:
    """(serving backend processes, workers) among `named`."""
    return (sum(r.startswith("backend-") and not r.endswith("main") for r in named.values()),
            sum(r.startswith("worker-") for r in named.values()))


async def sample(root: int, rss, every: float,
                 samples: dict[str, list[tuple[float, int, int]]]) -> None:
    """Every `every` seconds each process's (monotonic time, pid, RSS), by its role (the
    tree read anew each time: a restarted program has a new pid)."""
    while True:
        now = time.monotonic()
        for pid, role in roles(root).items():
            value = rss(pid)
            if value is not None:
                samples.setdefault(role, []).append((now, pid, value))
        await asyncio.sleep(every)


def mb(value: float) -> str:
    return f"{value / 2**20:.0f}"


def exactly_once(url: str, ids: list[str]) -> int:
    """How many circles of the instances `ids` succeeded more than once in the database."""
    from sqlalchemy import create_engine, text

    from bpflow.store.public import normalize_url

    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            return conn.execute(text(
                "select count(*) from (select 1 from events where kind = 'circle_succeeded'"
                " and instance_id = any(:ids) group by instance_id, circle"
                " having count(*) > 1) twice"), {"ids": ids}).scalar_one()
    finally:
        engine.dispose()


async def run(server: Server, args: argparse.Namespace) -> bool:
    http, completed = await connect(server, args, ManagedFlow)
    # the ready line needs one backend answering: wait for all of them
    deadline = time.monotonic() + args.startup
    while counts(named := roles(server.pid)) != (args.backends, args.workers):
        if time.monotonic() > deadline:
            print(f"expected {args.backends} backends and {args.workers} workers, found"
                  f" {counts(named)}: {named}")
            return False
        await asyncio.sleep(0.5)
    print(f"processes: {', '.join(f'{r} (pid {p})' for p, r in sorted(named.items()))}")
    rss = rss_reader()
    samples: dict[str, list[tuple[float, int, int]]] = {}
    began = time.monotonic()
    sampler = asyncio.create_task(sample(server.pid, rss, args.sample, samples))
    total = args.minutes * 60
    faults = None
    if args.faults:
        assert server.log is not None
        faults = Faults(Supervisor(server.log.parent / "home" / "supervisord.conf"),
                        server.port, args.backends, args.workers)
        fault_task = asyncio.create_task(faults.run(began, total))
        print("faults: worker-1 killed at 1/4 of the run, backend-1 three times within 5 s"
              " at 1/2, backend-2 at 3/4 (bench/faults.py)")
    # the reference: after the first minute, or in a run shorter than 2 minutes after half
    base_at = began + (60.0 if total >= 120 else total / 2)
    print(f"{args.rate:g} req/s for {args.minutes:g} min; RSS every {args.sample:g} s;"
          f" reference RSS at {base_at - began:.0f} s")
    order = sorted(set(named.values()))
    print("  minute  achieved  p50 ms  p99 ms  max ms  errors  instances  RSS MB: "
          + "  ".join(order))
    done, flow, figures = 0.0, ManagedFlow(), []
    errors = 0
    while done < total - 1e-6:
        span = min(60.0, total - done)
        minute = ManagedFlow()
        minute.ready = flow.ready  # the instances in flight go on in the next minute
        flow = minute
        f = await open_loop(http, flow, args.rate, span, 0, args.timeout, server)
        figures.append(f)
        completed += flow.completed
        done += span
        errors += sum(f.errors.values())
        detail = ", ".join(f"{k}: {v}" for k, v in f.errors.most_common())
        now = {r: samples[r][-1][2] if samples.get(r) else 0 for r in order}
        print(f"  {done / 60:6.2f} {f.achieved:7.0f}/s {f.pct(0.5):7.1f} {f.pct(0.99):7.1f}"
              f" {max(f.latencies) * 1000:7.1f} {sum(f.errors.values()):7}"
              f" {len(flow.completed) / span:8.1f}/s          "
              + "  ".join(f"{mb(now[r]):>{len(r)}}" for r in order)
              + (f"  ({detail})" if detail else ""), flush=True)
    if faults:
        await fault_task
    sampler.cancel()
    end_at = time.monotonic()
    final = roles(server.pid)
    for pid, role in final.items():  # one last sample, as the load ends
        if (value := rss(pid)) is not None:
            samples.setdefault(role, []).append((end_at, pid, value))
    latencies = [x for f in figures for x in f.latencies]
    error_at = [t for f in figures for t in f.error_at]
    at_kills = sum(faults.in_flight(t, args.timeout) for t in error_at) if faults else 0
    errors -= at_kills
    whole = Figures(args.rate, latencies=latencies)
    print(f"whole run: {len(latencies) - errors - at_kills:,} requests answered well"
          f" ({(len(latencies) - errors - at_kills) / (end_at - began):.1f}/s), p50"
          f" {whole.pct(0.5):.1f} ms, p99 {whole.pct(0.99):.1f} ms; median of the minutes'"
          f" p99: {statistics.median(f.pct(0.99) for f in figures):.1f} ms; errors: {errors}"
          + (f" (besides {at_kills} requests in flight at a kill)" if faults else ""))
    bad = await read_back(http, server, completed)
    twice = exactly_once(server.url, completed) if server.url else 0
    print(f"circles of those instances that succeeded more than once: {twice}")
    print(f"  process         pid   RSS MB at {base_at - began:.0f} s   at the end   growth")
    worst, over, restarted = 0.0, [], []
    killed = faults.killed if faults else set()
    # "pid N": a passing process of the tree that is none of the run's (not judged)
    for role in sorted(r for r in set(samples) | set(final.values()) if " " not in r
                       or r.endswith(" main")):
        points = samples.get(role, [])
        pids = {pid for _, pid, _ in points}
        if role not in final.values():
            print(f"  {role:14}        GONE by the end of the run")
            over.append(role)
            continue
        if len(pids) > 1:
            ours = role.removesuffix(" main") in killed
            print(f"  {role:14} {points[-1][1]:6}   restarted"
                  f" ({'by the faults' if ours else 'NOT by the faults'}): not judged")
            if not ours:
                restarted.append(role)
            continue
        base = next((v for t, _, v in points if t >= base_at), None)
        if base is None:
            print(f"  {role:14}          no sample after the reference")
            continue
        end = points[-1][2]
        growth = (end - base) / base * 100
        worst = max(worst, growth)
        if growth > args.growth:
            over.append(role)
        print(f"  {role:14} {points[-1][1]:6} {mb(base):>13} {mb(end):>12} {growth:+8.1f} %")
    if faults and faults.lines:
        print("faults:\n" + "\n".join(faults.lines))
    reasons = []
    if errors:
        reasons.append(f"{errors} request errors")
    if bad:
        reasons.append(f"{len(bad)} instances not completed")
    if twice:
        reasons.append(f"{twice} circles succeeded twice")
    if over:
        reasons.append(f"over {args.growth:g} % growth or gone: {', '.join(over)}")
    if restarted:
        reasons.append(f"restarted though not killed: {', '.join(restarted)}")
    if faults:
        reasons += faults.failures
    print(f"verdict: {'PASS' if not reasons else 'FAIL'}: "
          + ("; ".join(reasons) if reasons else
             f"no error, largest RSS growth after the reference {worst:+.1f} %"
             f" (limit {args.growth:g} %)"), flush=True)
    return not reasons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="how long the load runs (fractions allowed)")
    # scaled out on PostgreSQL a step costs this 2-CPU machine more than on SQLite, and
    # the soak judges errors and memory, not capacity: well below what it serves at most
    parser.add_argument("--rate", type=float, default=50.0, help="requests a second")
    parser.add_argument("--backends", type=int, default=2, help="backend processes")
    parser.add_argument("--workers", type=int, default=2, help="`bpflow worker`s")
    parser.add_argument("--sample", type=float, default=5.0,
                        help="seconds between two readings of the processes' RSS")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="a request is an error after this long (s, from its slot)")
    parser.add_argument("--growth", type=float, default=GROWTH_LIMIT_PCT,
                        help="the most RSS growth (%%) allowed after the first minute")
    parser.add_argument("--startup", type=float, default=180.0,
                        help="seconds to wait for the server")
    parser.add_argument("--no-faults", dest="faults", action="store_false",
                        help="no process killed during the run")
    args = parser.parse_args()
    args.tenants, args.approvers = 1, (MANAGER,)
    if args.minutes <= 0 or args.rate <= 0:
        parser.error("--minutes and --rate must be positive")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"soak: the paper flow in scale-out mode, {args.backends} backends and"
          f" {args.workers} workers; {os.cpu_count()} CPUs; load average before: {load}")
    with serve("scaled", args, workers=args.workers) as server:
        if not isinstance(server, Server):
            print("verdict: FAIL: the server did not start")
            return 1
        print(f"server pid {server.pid} on {server.store}, port {server.port}")
        return 0 if asyncio.run(run(server, args)) else 1


if __name__ == "__main__":
    sys.exit(main())
