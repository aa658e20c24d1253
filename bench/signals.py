"""Signal delivery over HTTP (SPEC §11): `POST /api/signals/{name}` at a fixed rate, each
request completing a different waiting instance (target: p99 <= 20 ms at 500 req/s).

Data: a fresh SQLite database in a temporary folder beside this file (WAL,
`synchronous=FULL`), filled through the store before the server starts: `--instances`
instances of a template whose first circle waits for the signal `payment` with the key
`${workflow.input.order}` (each instance its own order number), then a second circle. A
user with the role `integration` sends the signals. Server: its own process, the API app
alone (`--server granian`, as Reflex serves it, or `uvicorn`), no worker.

Load: `bench/paper_flow.py`'s open-loop generator (request i is due at t0 + i/rate, its
latency runs from that due time, so waiting behind a slow server counts). Request i
signals order i with `{"key": i, "data": {...}}` and must answer `{"delivered": 1}`;
anything else is an error. The peer, same rate, same generator: `GET /api/health` (no
database). At the end the store is read: every signalled instance must have its circle
completed with the data sent, no other one. With `--profile`, py-spy samples the server
during the signal run and the functions taking most of its time are printed.

Exit status 0 when the p99 of every rate <= 20 ms with no errors.

    .venv/bin/python bench/signals.py [--rates 500] [--duration 10] [--warmup 2]
        [--connections 100] [--server granian] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal as signals
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from sqlalchemy import select

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import paper_flow as pf  # noqa: E402

from bpflow.store import Store  # noqa: E402
from bpflow.store.public import circles_t, instances_t, upgrade  # noqa: E402

TARGET_P99_MS = 20.0
NAME = "payment"
USER, PASSWORD = "gateway", "gateway-password"
TEMPLATE = {"name": "order", "inputs": {"order": "integer"}, "circles": [
    {"uri": "paid", "box": {"action": {"type": "signal", "name": NAME,
                                       "key": "${workflow.input.order}"}}},
    {"uri": "ship", "deps": [["paid"]], "box": {"form": [{"name": "ok", "type": "boolean"}]}}]}


class Signalling:
    """Each request signals the next order: one waiting instance each."""

    name = "signal"

    def __init__(self, first: int, last: int) -> None:
        self.next_key, self.last = first, last
        self.delivered: list[int] = []

    def next(self) -> tuple[str, str, dict, str]:
        key = self.next_key
        if key >= self.last:
            raise SystemExit(f"more requests than instances ({self.last}): raise --instances")
        self.next_key += 1
        return "POST", f"/api/signals/{NAME}", {"key": key, "data": {"order": key}}, str(key)

    def done(self, step: str, status: int, data: bytes, measured: bool) -> str | None:
        if status != 200:
            return f"HTTP {status}"
        if json.loads(data) != {"delivered": 1}:
            return f"answered {data[:80]!r}"
        self.delivered.append(int(step))
        return None


def fill(url: str, count: int) -> float:
    """`count` waiting instances (orders 0 .. count-1; none with `--hot`: the server
    starts them) and the integration user; seconds."""
    upgrade(url)
    store = Store(url, secret=pf.SECRET.encode())
    t0 = time.perf_counter()
    try:
        store.add_user("starter", "starter-password", ["user"])
        store.add_user(USER, PASSWORD, ["integration"])
        store.put_template(TEMPLATE)
        starter = store.user("starter")
        for order in range(count):
            store.start("order", {"order": order}, starter)
    finally:
        store.close()
    return time.perf_counter() - t0


def check(url: str, sent: list[int]) -> list[str]:
    """What is wrong in the store after the load: a signalled instance whose circle did
    not complete with the data sent, or one not signalled that moved."""
    store = Store(url, secret=pf.SECRET.encode())
    try:
        with store.reader() as conn:
            rows = conn.execute(select(instances_t.c.inputs, circles_t.c.state,
                                       circles_t.c.result)
                                .join(circles_t, circles_t.c.instance_id == instances_t.c.id)
                                .where(circles_t.c.circle == "paid")).all()
    finally:
        store.close()
    moved = {row.inputs["order"]: row.result for row in rows if row.state != "waiting"}
    problems = []
    if set(moved) != set(sent):
        problems.append(f"{len(moved)} instances moved, {len(sent)} signals delivered;"
                        f" e.g. {sorted(set(moved) ^ set(sent))[:3]}")
    wrong = [k for k, result in moved.items() if result != {"order": k}]
    if wrong:
        problems.append(f"{len(wrong)} completed with other data, e.g. order {wrong[0]}")
    return problems


def profile(pid: int, seconds: float, out: Path) -> subprocess.Popen | None:
    """py-spy sampling the server for `seconds` (raw collapsed stacks), if it can."""
    spy = pf.BIN / "py-spy"
    if not spy.exists():
        print("  (py-spy is not installed: no profile)")
        return None
    return subprocess.Popen([str(spy), "record", "-p", str(pid), "-d", str(int(seconds)),
                             "-r", "200", "-f", "raw", "-o", str(out), "--nonblocking",
                             "--subprocesses"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def summarize_profile(path: Path, top: int = 15) -> None:
    """The functions the server spent most samples in (inclusive), from py-spy's raw
    output; idle waiting (the event loop's select) is shown as such."""
    if not path.exists():
        print("  (no profile was written: py-spy may lack the permission to attach)")
        return
    inclusive: Counter = Counter()
    own: Counter = Counter()  # where the samples were taken: the innermost frame
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        own[stack.split(";")[-1]] += n
        for frame in set(stack.split(";")):
            if "(bpflow/" in frame or "(engine/" in frame or "select" in frame \
                    or "sqlite" in frame or "orjson" in frame:
                inclusive[frame] += n
    print(f"  profile of the server: {total} samples; inclusive share of the top functions:")
    for frame, n in inclusive.most_common(top):
        print(f"    {100 * n / max(total, 1):5.1f}%  {frame[:110]}")
    print("  where the samples were taken (innermost frame):")
    for frame, n in own.most_common(top):
        print(f"    {100 * n / max(total, 1):5.1f}%  {frame[:110]}")


async def start_over_http(http: pf.Http, count: int, clients: int = 20) -> float:
    """The instances started through the server (`--hot`): each then in its cache, as
    an instance started shortly before its signal is."""
    orders, t0 = iter(range(count)), time.perf_counter()

    async def client() -> None:
        for order in orders:
            status, data = await http.call("POST", "/api/instances", {
                "template": "order", "inputs": {"order": order}})
            if status != 201:
                raise SystemExit(f"start failed: HTTP {status} {data[:200]!r}")
    await asyncio.gather(*(client() for _ in range(clients)))
    return time.perf_counter() - t0


async def measure(server: pf.Server, args: argparse.Namespace, count: int,
                  tmp: Path) -> tuple[list[int], list[pf.Figures]]:
    http = pf.Http(server.port, args.connections)
    status, data = await http.call("POST", "/api/auth/token",
                                   {"username": USER, "password": PASSWORD})
    if status != 200:
        raise SystemExit(f"sign-in failed: HTTP {status} {data[:200]!r}")
    http.auth = f"Authorization: Bearer {json.loads(data)['access_token']}\r\n"
    if args.hot:
        took = await start_over_http(http, count)
        print(f"{count:,} instances started over HTTP in {took:.1f} s (in the server's cache)")
    warm = Signalling(0, count)  # the process warmed: code paths run, connections open
    await pf.open_loop(http, warm, 50, 2, 0, args.timeout, server)
    sent, rows, cursor = list(warm.delivered), [], warm
    print(pf.HEADER)
    for rate in args.rates:
        await pf.quiesce(http, server)
        health = await pf.open_loop(http, pf.Health(), rate, args.duration, args.warmup,
                                    args.timeout, server)
        print(pf.line("health", health, f"{rate:,.0f}/s"), flush=True)
        await pf.quiesce(http, server)
        work = cursor = Signalling(cursor.next_key, count)
        spy = profile(server.pid, args.warmup + args.duration, tmp / f"spy-{rate}.txt") \
            if args.profile else None
        figures = await pf.open_loop(http, work, rate, args.duration, args.warmup,
                                     args.timeout, server)
        print(pf.line("signal", figures, f"{rate:,.0f}/s"), flush=True)
        print(f"  {'':6} p99 signal / p99 health: {figures.pct(0.99) / health.pct(0.99):.1f}")
        sent += work.delivered
        rows.append(figures)
        if spy is not None:
            spy.wait(timeout=60)
            summarize_profile(tmp / f"spy-{rate}.txt")
    await pf.quiesce(http, server)
    http.close()
    return sent, rows


def stop(proc: subprocess.Popen) -> None:
    """The server's process group ended: asked to stop, then killed after 30 s."""
    for sig, patience in ((signals.SIGTERM, 30.0), (signals.SIGKILL, None)):
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=patience)
            return
        except subprocess.TimeoutExpired:
            continue


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=pf.numbers, default=[500],
                        help="request rates (req/s), comma-separated")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds a rate")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds not counted")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="a request is an error after this long (s, from its slot)")
    parser.add_argument("--server", default="granian", choices=["granian", "uvicorn"])
    parser.add_argument("--instances", type=int, default=0,
                        help="waiting instances (default: what the rates need)")
    parser.add_argument("--startup", type=float, default=60.0)
    parser.add_argument("--hot", action="store_true",
                        help="start the instances through the server (in its cache) rather"
                             " than before it starts (each read from the database)")
    parser.add_argument("--profile", action="store_true",
                        help="sample the server with py-spy during each signal run")
    args = parser.parse_args()
    need = 100 + sum(round(r * (args.warmup + args.duration)) + 10 for r in args.rates)
    count = max(args.instances, need)
    print(f"{os.cpu_count()} CPUs shared by the server and this load generator")
    with tempfile.TemporaryDirectory(dir=HERE) as name:
        tmp = Path(name)
        url = f"sqlite:///{tmp / 'bench.db'}"
        took = fill(url, 0 if args.hot else count)
        if not args.hot:
            print(f"{count:,} instances waiting for a signal each, started before the server"
                  f" ({took:.1f} s): each signal reads its instance from the database")
        port = pf.free_port()
        argv, extra, folder = pf.server_command(args.server, port, tmp)
        (tmp / "hook").mkdir()
        (tmp / "hook" / "sitecustomize.py").write_text(pf.GC_HOOK)
        gc_log = tmp / "gc.log"
        gc_log.touch()
        path = os.pathsep.join(p for p in (str(tmp / "hook"), os.environ.get("PYTHONPATH", ""))
                               if p)
        env = {**os.environ, "DATABASE_URL": url, "BPFLOW_SECRET": pf.SECRET,
               "BPFLOW_INPROCESS_WORKER": "0", "PYTHONPATH": path,
               "BENCH_GC_LOG": str(gc_log), **extra}
        with open(tmp / "server.log", "w") as log:
            proc = subprocess.Popen(argv, env=env, cwd=folder, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if not pf.wait_healthy(port, proc, args.startup):
                print(f"the server did not start; log:\n{(tmp / 'server.log').read_text()}")
                return 1
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"{args.server} (pid {proc.pid}) on SQLite (WAL, synchronous=FULL);"
                  f" {args.connections} connections, {args.warmup:g} s warm-up +"
                  f" {args.duration:g} s a rate; load average before: {load}")
            sent, rows = asyncio.run(measure(pf.Server(port, proc.pid, gc_log), args, count,
                                             tmp))
        finally:
            stop(proc)
        problems = check(url, sent)
    print(f"signals delivered: {len(sent):,}; store checked: "
          + ("every signalled instance moved, no other" if not problems else
             "; ".join(problems)))
    met = all(not f.errors and not f.warmup_errors and f.pct(0.99) <= TARGET_P99_MS
              for f in rows) and not problems
    print(f"target p99 <= {TARGET_P99_MS:.0f} ms with zero errors at "
          f"{', '.join(f'{r:,.0f}' for r in args.rates)} req/s: " + ("met" if met else "NOT met"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
