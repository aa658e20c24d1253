"""Reminder lateness (SPEC §15 `remind`): 10,000 instances each waiting on a person's
confirmation whose `remind` falls due 1 second after it became ready (`due` 61 s,
`before_due` 60 s), sent by the worker as an urge mail.

Lateness = when the worker recorded the reminder (`nudges.reminded_at` of the circle)
minus when it was due (`ready_at` + 1 s), measured as `bench/timers.py` measures its
timers: the instances started as fast as the store takes them while the worker runs
beside them, on SQLite (WAL, synchronous=FULL), by default in its own process (`bpflow
worker`), with `--in-process` as a thread of the starting process. Every reminder's mail
is checked to be in the inbox. Peer: `time.sleep` wake-up lateness in the same run.

    .venv/bin/python bench/reminders.py [--instances 10000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timers import SECRET, percentile, report, sleep_peer, start_worker  # noqa: E402
from bpflow.store import Store  # noqa: E402
from bpflow.store.public import upgrade  # noqa: E402

DELAY = 1.0  # seconds from ready to the reminder: due 61 s, before_due 60 s
TEMPLATE = {"name": "nudge", "circles": [
    {"uri": "t", "box": {"confirm": "OK?"}, "due": 60 + DELAY,
     "remind": {"before_due": 60}},
    {"uri": "end", "deps": [["t"]]}]}


def run(instances: int, in_process: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
        url = f"sqlite:///{Path(tmp) / 'reminders.db'}"
        upgrade(url)
        store = Store(url, secret=SECRET.encode(), cache_size=instances + 100)
        store.add_user("ann", "ann-password-0123", ["user"])
        ann = store.user("ann")
        store.put_template(TEMPLATE)
        stop = start_worker(store, url, in_process)

        def reminded(iid: str) -> bool:
            return bool((store.get(iid).circles["t"].nudges or {}).get("reminded_at"))
        probe = store.start("nudge", {}, ann).id  # measure only once the worker is warm
        while not reminded(probe):
            time.sleep(0.05)
        started = time.perf_counter()
        ids = [store.start("nudge", {}, ann).id for _ in range(instances)]
        start_rate = instances / (time.perf_counter() - started)
        deadline = time.monotonic() + DELAY + 180
        while time.monotonic() < deadline and not all(reminded(i) for i in ids[-50:]):
            time.sleep(0.2)
        time.sleep(1.0)
        stop()
        late = []
        for iid in ids:
            run_ = store.get(iid).circles["t"]
            at = (run_.nudges or {}).get("reminded_at")
            if at is None:
                raise SystemExit(f"reminder of {iid} never sent")
            due = run_.ready_at + timedelta(seconds=DELAY)
            late.append((datetime.fromisoformat(at) - due).total_seconds() * 1000)
        mails = store.mail_counts(store.account(ann["id"]))["urge"]["total"]
        store.close()
    if mails != instances + 1:
        raise SystemExit(f"{mails} urge mails for {instances + 1} reminders")
    return {"p50": statistics.median(late), "p99": percentile(late, 0.99), "max": max(late),
            "start_rate": start_rate, "mails": mails}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--in-process", action="store_true",
                        help="run the worker as a thread of the starting process")
    args = parser.parse_args()
    peer = sleep_peer(500, DELAY)
    figures = run(args.instances, args.in_process)
    where = "a thread of the starting process" if args.in_process else "its own process"
    print(f"{args.instances:,} instances started at {figures['start_rate']:,.0f}/s, each"
          f" reminded {DELAY:g} s after it became ready; worker in {where};"
          f" {figures['mails']:,} urge mails")
    return report("reminder", figures, peer)


if __name__ == "__main__":
    sys.exit(main())
