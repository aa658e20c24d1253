"""Timer lateness: 10,000 instances each waiting on a 1-second timer, fired by the worker.

Lateness = when the worker fired the timer minus when it was due (both recorded in the
timer circle's result). The instances are started as fast as the store takes them while
the worker runs beside them, on SQLite (WAL, synchronous=FULL): by default in its own
process (`bpflow worker`, as deployed beside the web backend), with `--in-process` as a
thread of the starting process (the backend's built-in worker). The peer
is the lateness of plain `time.sleep` wake-ups of a thread measured in the same run: what
the machine's scheduler alone costs.

    .venv/bin/python bench/timers.py [--instances 10000] [--delay 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bpflow.store import Store  # noqa: E402
from bpflow.store.public import upgrade  # noqa: E402
from bpflow.worker import Worker  # noqa: E402

SECRET = "bench-secret-of-at-least-32-bytes-0123"  # the server refuses a shorter one


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sleep_peer(samples: int, delay: float) -> list[float]:
    """Lateness of time.sleep wake-ups (ms), interleaved like the timers' due times."""
    late = []
    for i in range(samples):
        target = time.perf_counter() + delay / 20 + (i % 7) / 1000
        time.sleep(max(0.0, target - time.perf_counter()))
        late.append((time.perf_counter() - target) * 1000)
    return late


def start_worker(store: Store, url: str, in_process: bool) -> Callable[[], None]:
    """A worker on the database at `url`: a thread of this process (`in_process`) or its
    own process (`bpflow worker`, as deployed); the function stopping it."""
    worker, stop = Worker(store, name="bench"), threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop, 0.02), daemon=True)
    if in_process:
        thread.start()

        def end_thread() -> None:
            stop.set()
            thread.join(timeout=10)
        return end_thread
    env = {**os.environ, "DATABASE_URL": url, "BPFLOW_SECRET": SECRET}
    proc = subprocess.Popen([sys.executable, "-m", "bpflow.cli", "worker", "--poll", "0.02"],
                            env=env, stderr=subprocess.DEVNULL,
                            cwd=Path(__file__).resolve().parents[1])

    def end_process() -> None:
        proc.terminate()
        proc.wait(timeout=30)
    return end_process


def report(what: str, figures: dict[str, float], peer: list[float]) -> int:
    """Print `what`'s lateness, the peer's and whether the target holds; the exit code."""
    print(f"{what} lateness: p50 {figures['p50']:.1f} ms, p99 {figures['p99']:.1f} ms,"
          f" max {figures['max']:.1f} ms")
    print(f"peer time.sleep lateness: p50 {statistics.median(peer):.2f} ms,"
          f" p99 {percentile(peer, 0.99):.2f} ms")
    ok = figures["p99"] <= 100
    print("target p99 <= 100 ms " + ("met" if ok else "NOT met"))
    return 0 if ok else 1


def run(instances: int, delay: float, in_process: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
        url = f"sqlite:///{Path(tmp) / 'timers.db'}"
        upgrade(url)
        store = Store(url, secret=SECRET.encode(), cache_size=instances + 100)
        store.put_template({"name": "nap", "circles": [
            {"uri": "t", "box": {"action": {"type": "timer", "delay": delay}}}]})
        stop = start_worker(store, url, in_process)
        probe = store.start("nap").id  # measure only once the worker is up and warm
        while store.get(probe).status != "completed":
            time.sleep(0.05)
        started = time.perf_counter()
        ids = [store.start("nap").id for _ in range(instances)]
        start_rate = instances / (time.perf_counter() - started)
        deadline = time.monotonic() + delay + 120
        while store.next_due() is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        stop()
        late = []
        for iid in ids:  # in start order, so also in due order
            result = store.get(iid).circles["t"].result
            if result is None:
                raise SystemExit(f"timer of {iid} never fired")
            fired = datetime.fromisoformat(result["fired_at"])
            due = datetime.fromisoformat(result["due_at"])
            late.append((fired - due).total_seconds() * 1000)
        store.close()
    if os.environ.get("BENCH_TRACE"):
        for i in range(0, len(late), len(late) // 20):
            chunk = late[i:i + len(late) // 20]
            print(f"  instances {i}-{i + len(chunk)}: max lateness {max(chunk):.0f} ms")
    return {"p50": statistics.median(late), "p99": percentile(late, 0.99), "max": max(late),
            "start_rate": start_rate}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--in-process", action="store_true",
                        help="run the worker as a thread of the starting process")
    args = parser.parse_args()
    peer = sleep_peer(500, args.delay)
    figures = run(args.instances, args.delay, args.in_process)
    where = "a thread of the starting process" if args.in_process else "its own process"
    print(f"{args.instances:,} instances started at {figures['start_rate']:,.0f}/s,"
          f" each on a {args.delay:g} s timer; worker in {where}")
    return report("timer", figures, peer)


if __name__ == "__main__":
    sys.exit(main())
