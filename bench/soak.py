"""A soak of the paper's reimbursement flow in scale-out mode (SPEC §14, issue #16).

The server is bench/paper_flow.py's `scaled`: `python -m bpflow.scaled --backends 2
--workers 2 --backend-only` from a copy of the tree, on a PostgreSQL database created for
the run (and dropped after it) and Reflex's Redis state manager: Granian with 2 backend
processes behind one port and 2 `bpflow worker`s. paper_flow's open-loop generator drives
the flow at `--rate` requests a second for `--minutes` (fractions allowed), a minute at a
time (the instances in flight carry over from one minute to the next). With the workers
running, the approval circle's action runs as well (it mails the claim's manager, whose
approval the load's admin then overrides by hand, as paper_flow completes it): the claims
name an approver of their own (`bench-manager`), since nobody may approve their own claim.

Every `--sample` seconds it reads the resident memory (RSS) of every process of the
server's tree (the supervisor, Reflex's Granian main process, each backend process, each
worker). It prints a line a minute (throughput, p50/p99/max, errors, each process's RSS)
and at the end, per process, its RSS after the first minute (the caches, pools and code
of a fresh process are filled by then; in a run shorter than 2 minutes after half the
run), at the end, and the growth between. Every instance the load completed is read back
through the API and must be `completed`.

Verdict: PASS only with no error (none answered wrongly or late, none read back other
than completed, no process gone) and no process whose RSS grew more than `--growth` %
(default 10) after the first minute. Exit status 0 on PASS, 1 otherwise.

    .venv/bin/python bench/soak.py [--minutes 10] [--rate 50] [--backends 2] [--workers 2]
        [--sample 5] [--connections 100] [--timeout 5] [--growth 10]
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


def roles(root: int) -> dict[int, str]:
    """The processes of the server's tree by what they are: the `bpflow.scaled`
    supervisor, the Reflex process that runs Granian (`granian main`), its forked backend
    processes and the `bpflow worker`s."""
    tree = process_tree(root)
    named: dict[int, str] = {}
    counts = {"backend": 0, "worker": 0}
    for pid in sorted(tree):
        parent = tree[pid][0]
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if pid == root:
            named[pid] = "supervisor"
        elif "bpflow.cli worker" in cmd:
            counts["worker"] += 1
            named[pid] = f"worker {counts['worker']}"
        elif parent == root:
            named[pid] = "granian main"
        else:
            counts["backend"] += 1
            named[pid] = f"backend {counts['backend']}"
    return named


async def sample(named: dict[int, str], rss, every: float,
                 samples: dict[int, list[tuple[float, int]]], gone: set[int]) -> None:
    """Every `every` seconds each process's (monotonic time, RSS); a vanished one in `gone`."""
    while True:
        now = time.monotonic()
        for pid in named:
            value = rss(pid)
            if value is None:
                gone.add(pid)
            else:
                samples[pid].append((now, value))
        await asyncio.sleep(every)


def mb(value: float) -> str:
    return f"{value / 2**20:.0f}"


async def run(server: Server, args: argparse.Namespace) -> bool:
    http, completed = await connect(server, args, ManagedFlow)
    named = roles(server.pid)
    backends = sum(r.startswith("backend") for r in named.values())
    workers = sum(r.startswith("worker") for r in named.values())
    print(f"processes: {', '.join(f'{r} (pid {p})' for p, r in named.items())}")
    if backends != args.backends or workers != args.workers:
        print(f"expected {args.backends} backends and {args.workers} workers, found"
              f" {backends} and {workers}")
        return False
    rss = rss_reader()
    samples: dict[int, list[tuple[float, int]]] = {pid: [] for pid in named}
    gone: set[int] = set()
    began = time.monotonic()
    sampler = asyncio.create_task(sample(named, rss, args.sample, samples, gone))
    total = args.minutes * 60
    # the reference: after the first minute, or in a run shorter than 2 minutes after half
    base_at = began + (60.0 if total >= 120 else total / 2)
    print(f"{args.rate:g} req/s for {args.minutes:g} min; RSS every {args.sample:g} s;"
          f" reference RSS at {base_at - began:.0f} s")
    order = sorted(named, key=lambda p: named[p])
    print("  minute  achieved  p50 ms  p99 ms  max ms  errors  instances  RSS MB: "
          + "  ".join(named[p] for p in order))
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
        now = {p: samples[p][-1][1] if samples[p] else 0 for p in order}
        print(f"  {done / 60:6.2f} {f.achieved:7.0f}/s {f.pct(0.5):7.1f} {f.pct(0.99):7.1f}"
              f" {max(f.latencies) * 1000:7.1f} {sum(f.errors.values()):7}"
              f" {len(flow.completed) / span:8.1f}/s          "
              + "  ".join(f"{mb(now[p]):>{len(named[p])}}" for p in order)
              + (f"  ({detail})" if detail else ""), flush=True)
    sampler.cancel()
    end_at = time.monotonic()
    for pid in named:  # one last sample, as the load ends
        value = rss(pid)
        if value is None:
            gone.add(pid)
        else:
            samples[pid].append((end_at, value))
    latencies = [x for f in figures for x in f.latencies]
    whole = Figures(args.rate, latencies=latencies)
    print(f"whole run: {len(latencies) - errors:,} requests answered well"
          f" ({(len(latencies) - errors) / (end_at - began):.1f}/s), p50"
          f" {whole.pct(0.5):.1f} ms, p99 {whole.pct(0.99):.1f} ms; median of the minutes'"
          f" p99: {statistics.median(f.pct(0.99) for f in figures):.1f} ms; errors: {errors}")
    bad = await read_back(http, server, completed)
    print(f"  process        pid   RSS MB at {base_at - began:.0f} s   at the end   growth")
    worst, over = 0.0, []
    for pid in order:
        points = samples[pid]
        base = next((v for t, v in points if t >= base_at), None)
        if pid in gone or base is None or not points:
            print(f"  {named[pid]:12} {pid:6}   GONE during the run")
            over.append(named[pid])
            continue
        end = points[-1][1]
        growth = (end - base) / base * 100
        worst = max(worst, growth)
        if growth > args.growth:
            over.append(named[pid])
        print(f"  {named[pid]:12} {pid:6} {mb(base):>13} {mb(end):>12} {growth:+8.1f} %")
    reasons = []
    if errors:
        reasons.append(f"{errors} request errors")
    if bad:
        reasons.append(f"{len(bad)} instances not completed")
    if over:
        reasons.append(f"over {args.growth:g} % growth or gone: {', '.join(over)}")
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
