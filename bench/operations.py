"""Operations (SPEC §18): the operations page's lists at a large instance count, and a
template's durations from a large history.

Data: a fresh SQLite database in a temporary folder, or with `--pg URL` a PostgreSQL
schema `bench_operations` (dropped and created; nothing else touched). Rows are inserted
straight (not through the engine, which would take hours at this size) in the shapes a
step writes: `--instances` instances of the template `claim` (two form circles, `a` then
`b`) spread over a year, 2 versions, 1,000 starters; 80 % completed, 10 % running
(circle `a` ready and waiting since 0 to 240 hours, every tenth an open task past its due
time), 6 % failed at `a` with one of five reasons, 4 % suspended; each with its two circle
rows and `--events` history events (default 10: started, `a` ready, a retry and ready
again, pending, succeeded, `b` ready and succeeded, completed), so `--instances 100000`
gives 1,000,000 events (an instance not completed has its `a` events, then fillers). Then
ANALYZE.

Measured, `--rounds` times each, median and p95 in ms, through the store methods the
routes call (`Store.operation_instances`, `incidents`, `overdue_tasks`, `durations`):
a page of 50 newest first with its total counted (up to COUNT_MAX + 1) for the filters of
`FILTERS` (the last: the list an incident group opens on the page); the incident groups
(each with its 20 newest instances); the overdue tasks;
then the worker's fold of the whole history into the durations aggregate
(`Store.fold_waits`, once, as a fresh upgrade does: its time is reported, not a
target), and the durations of `claim` read from it: of every version and day, and of
version 2 in the last 30 days.
Targets (issue 32): lists and incident groups p95 <= 200 ms; durations <= 500 ms. The
load average is printed before and after (the machine may be shared). `--again`
measures a database an earlier run filled (an SQLite FILE, or the PostgreSQL schema),
upgraded to the current migrations first.

    .venv/bin/python bench/operations.py [--instances 100000] [--events 10] [--rounds 20]
                                         [--pg URL [--again] | --again FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, insert, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bpflow.store import Store  # noqa: E402
from bpflow.store.public import COUNT_MAX, upgrade  # noqa: E402
from bpflow.store.tables import circles_t, events_t, instances_t, users_t  # noqa: E402

SECRET = b"bench-secret-of-at-least-32-bytes!!"
LIST_TARGET_MS, DURATIONS_TARGET_MS = 200.0, 500.0
SCHEMA = "bench_operations"
FLOW = {"name": "claim", "kind": "linear", "circles": [
    {"uri": "a", "box": {"form": [{"name": "v", "type": "integer"}]}},
    {"uri": "b", "box": {"form": [{"name": "v", "type": "integer"}]}}]}
REASONS = ["HTTP 503: service unavailable", "HTTP 500", "timeout after 30 s",
           "connection refused", "declined"]
NOW = datetime.now(UTC).replace(microsecond=0)
FILTERS: dict[str, dict[str, Any]] = {
    "everything": {},
    "status=failed": {"status": "failed"},
    "template+status=running": {"template": "claim", "status": "running"},
    "template+version+status": {"template": "claim", "version": 2, "status": "completed"},
    "starter": {"starter": "starter-0042"},
    "started in a month": {"started_after": NOW - timedelta(days=60),
                           "started_before": NOW - timedelta(days=30)},
    "updated in a day": {"updated_after": NOW - timedelta(days=2),
                         "updated_before": NOW - timedelta(days=1)},
    "waiting > 48 h (many)": {"waiting_hours": 48},
    "waiting > 239 h (few)": {"waiting_hours": 239},
    "failed circle+reason": {"circle": "a", "reason": REASONS[0]},
    "template+circle+reason": {"template": "claim", "circle": "a", "reason": REASONS[1]},
}


def database(pg: str | None) -> str:
    if pg is None:
        url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='bpflow-ops-')) / 'ops.db'}"
    else:
        admin = create_engine(pg)
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
            conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
        admin.dispose()
        url = _in_schema(pg)
    upgrade(url)
    return url


def _in_schema(pg: str) -> str:
    return f"{pg}{'&' if '?' in pg else '?'}options={quote(f'-csearch_path={SCHEMA}')}"


def fill(store: Store, count: int, per: int) -> None:
    """`count` instances, their circle rows and `per` events each, in chunks."""
    rng = random.Random(32)
    store.put_template(FLOW)
    store.put_template({**FLOW, "title": "claim, version 2"})
    versions = {v: store._version_id("claim", v) for v in (1, 2)}
    users = [{"tenant": "default", "username": f"starter-{i:04d}", "password_hash": "-",
              "roles": ["user"], "created_at": NOW} for i in range(1000)]
    with store.db.begin() as conn:
        conn.execute(insert(users_t), users)
    ids = {u["username"]: u["id"] for u in store.list_users()}
    starters = [(ids[f"starter-{i:04d}"], f"starter-{i:04d}") for i in range(1000)]
    chunk = 5000
    for at in range(0, count, chunk):
        instances, circles, events = [], [], []
        for n in range(at, min(at + chunk, count)):
            iid = f"{n:032x}"
            roll = rng.random()
            status = ("completed" if roll < .8 else "running" if roll < .9
                      else "failed" if roll < .96 else "suspended")
            version = 1 + (n % 2)
            created = NOW - timedelta(seconds=rng.uniform(3600, 365 * 86400))
            uid, name = starters[n % 1000]
            ready_a = created + timedelta(seconds=1)
            left_a = ready_a + timedelta(seconds=rng.expovariate(1 / 3600))
            left_b = left_a + timedelta(seconds=rng.expovariate(1 / 600))
            updated = left_b if status == "completed" else left_a
            reason = rng.choice(REASONS) if status == "failed" else None
            instances.append({
                "id": iid, "tenant": "default", "template_id": versions[version],
                "template": "claim", "version": version, "nested_versions": {},
                "user_id": uid, "user": {"id": uid, "username": name, "roles": ["user"]},
                "status": status, "reason": reason, "inputs": {}, "variables": {},
                "seq": per, "lock_version": per, "created_at": created,
                "updated_at": updated})
            a_state = {"completed": "success", "failed": "failure"}.get(status, "waiting")
            waiting_since = NOW - timedelta(hours=rng.uniform(0, 240))
            task = status == "running" and n % 10 == 0
            circles.append(_circle(iid, "a", a_state, reason,
                                   waiting_since if a_state == "waiting" else ready_a,
                                   NOW - timedelta(hours=1) if task else None,
                                   f"u:{name}" if task else None))
            circles.append(_circle(iid, "b", "success" if status == "completed" else "waiting",
                                   None, left_a if status == "completed" else None, None,
                                   None))
            kinds = ["instance_started", "circle_ready", "circle_retry_scheduled",
                     "circle_ready", "circle_pending", "circle_succeeded", "circle_ready",
                     "circle_succeeded", "instance_completed", "circle_pending"]
            uris = [None, "a", "a", "a", "a", "a", "b", "b", None, "b"]
            times = [created, ready_a, ready_a, ready_a, ready_a, left_a, left_a, left_b,
                     left_b, left_b]
            if status != "completed":  # its history ends at `a`
                kinds = kinds[:6] + ["circle_pending"] * 4
                if status == "failed":
                    kinds[5] = "circle_failed"
            for seq in range(per):
                events.append({"tenant": "default", "instance_id": iid, "seq": seq + 1,
                               "at": times[seq % 10], "kind": kinds[seq % 10],
                               "actor": name, "circle": uris[seq % 10], "data": {}})
        with store.db.begin() as conn:
            conn.execute(insert(instances_t), instances)
            conn.execute(insert(circles_t), circles)
            if events:
                conn.execute(insert(events_t), events)
    with store.db.begin() as conn:
        conn.execute(text("ANALYZE"))


def _circle(iid: str, uri: str, state: str, reason: str | None, ready: datetime | None,
            due: datetime | None, audience: str | None) -> dict[str, Any]:
    return {"tenant": "default", "instance_id": iid, "circle": uri, "state": state,
            "reason": reason, "attempts": 1 if state == "failure" else 0,
            "ready_at": ready, "due_at": due, "epoch": 0,
            "task": {"assignee": None} if audience else None, "audience": audience}


def timed(call: Callable[[], Any], rounds: int) -> tuple[float, float, Any]:
    call()  # warm
    took = []
    for _ in range(rounds):
        began = time.perf_counter()
        out = call()
        took.append((time.perf_counter() - began) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * .95))], out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=10, help="history events per instance")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--pg", help="a PostgreSQL URL (a schema of its own is used)")
    ap.add_argument("--again", metavar="FILE", nargs="?", const="",
                    help="measure what an earlier run filled: an SQLite FILE, or with --pg"
                         " its schema (upgraded again, not refilled)")
    args = ap.parse_args()
    if args.again is not None:  # a database an earlier run filled
        if args.pg:
            url = _in_schema(args.pg)
        elif args.again:
            url = f"sqlite:///{args.again}"
        else:
            ap.error("--again needs an SQLite FILE, or --pg")
        upgrade(url)
        store = Store(url, secret=SECRET)
        with store.db.begin() as conn:  # what the migrations added, as autovacuum would
            conn.execute(text("ANALYZE"))
        print(f"database: {store.db.dialect.name} ({url.split('?')[0]}), "
              f"{store.list_instances(limit=1)[1]:,} instances", flush=True)
    else:
        url = database(args.pg)
        store = Store(url, secret=SECRET)
        began = time.perf_counter()
        fill(store, args.instances, args.events)
        print(f"database: {store.db.dialect.name} ({url.split('?')[0]}); "
              f"{args.instances:,} instances, {2 * args.instances:,} circle rows, "
              f"{args.events * args.instances:,} events inserted in "
              f"{time.perf_counter() - began:.0f} s", flush=True)
    met = True
    print("load average: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    print(f"{'what':32} {'median ms':>10} {'p95 ms':>10}  result")
    for name, f in FILTERS.items():
        med, p95, (rows, total) = timed(lambda f=f: store.operation_instances(f), args.rounds)
        met &= p95 <= LIST_TARGET_MS
        print(f"{'list ' + name:32} {med:10.1f} {p95:10.1f}  {len(rows)} shown of {total:,}"
              f"{'+' if total > COUNT_MAX else ''}")
    med, p95, groups = timed(store.incidents, args.rounds)
    met &= p95 <= LIST_TARGET_MS
    print(f"{'incident groups':32} {med:10.1f} {p95:10.1f}  {len(groups)} groups, "
          f"{sum(g['count'] for g in groups):,} failed circles")
    med, p95, (rows, total) = timed(store.overdue_tasks, args.rounds)
    met &= p95 <= LIST_TARGET_MS
    print(f"{'overdue tasks':32} {med:10.1f} {p95:10.1f}  {total:,}")
    began = time.perf_counter()
    folded = 0
    while n := store.fold_waits(20_000):
        folded += n
    print(f"{'fold the history (once)':32} {(time.perf_counter() - began) * 1000:10.0f}"
          f" {'':>10}  {folded:,} events read", flush=True)
    rounds = max(3, args.rounds // 4)
    med, p95, out = timed(lambda: store.durations("claim"), rounds)
    met &= p95 <= DURATIONS_TARGET_MS
    print(f"{'durations of claim':32} {med:10.1f} {p95:10.1f}  "
          f"{ {k: v['count'] for k, v in out['circles'].items()} } circles, "
          f"{out['instances']['count']:,} instances")
    med, p95, out = timed(lambda: store.durations(
        "claim", 2, since=NOW - timedelta(days=30)), rounds)
    met &= p95 <= DURATIONS_TARGET_MS
    print(f"{'durations, v2, last 30 days':32} {med:10.1f} {p95:10.1f}  "
          f"{out['instances']['count']:,} instances")
    print("load average: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    print("targets", "met" if met else "NOT met")
    store.close()
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
