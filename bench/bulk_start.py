"""Crowds (SPEC §11): a bulk start of `--users` instances (100,000) and the batch's counts.

Data: a fresh SQLite database in a temporary folder (or `DATABASE_URL`, e.g. PostgreSQL, whose
tables are emptied first), `--users` users with the role `crowd` (inserted straight), the
template `simple` of the tests (three form circles, the first its starter's task).

Measured:
- `start`: `Store.start_batch("simple", role="crowd")`, the whole of it: the users looked
  up, each instance started by the engine in memory, the rows written (target: 100,000 in
  <= 30 s on SQLite);
- `http` (with `--http`): the same over the API, `POST /api/instances/bulk {"role":
  "crowd"}` answered by the app in-process (a second batch of as many instances);
- `stats`: `Store.batch_stats(batch)` (what GET /api/batches/{batch}/stats answers),
  `--calls` times, median and max (target: median <= 200 ms).
With `--profile`, the start runs under cProfile and its 25 costliest functions are printed.

Exit status 0 when both targets are met.

    .venv/bin/python bench/bulk_start.py [--users 100000] [--calls 7] [--http] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from sqlalchemy import insert, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bpflow.api import create_app  # noqa: E402
from bpflow.auth import issue_token  # noqa: E402
from bpflow.store import Store  # noqa: E402
from bpflow.store.public import upgrade, users_t  # noqa: E402
from tests.api.helpers import FORM  # noqa: E402

SECRET = b"bench-secret-of-at-least-32-bytes!!"
START_TARGET_S, STATS_TARGET_MS = 30.0, 200.0


def database() -> str:
    url = os.environ.get("DATABASE_URL")
    if url:
        upgrade(url)
        store = Store(url, secret=SECRET)
        with store.db.begin() as conn:  # a clean slate (a DELETE of 100,000 instances
            # checks each against every table referring to them: minutes)
            conn.execute(text("TRUNCATE task_audience, events, circle_states,"
                              " instance_templates, instances, batches, templates, users"
                              " CASCADE"))
        store.close()
        return url
    folder = Path(tempfile.mkdtemp(prefix="bpflow-bulk-"))
    url = f"sqlite:///{folder / 'bulk.db'}"
    upgrade(url)
    return url


def people(store: Store, count: int) -> None:
    now = datetime.now(UTC)
    store.add_user("boss", "pw-boss", ["admin"])
    rows = [{"tenant": "default", "username": f"member-{i:06d}", "password_hash": "-",
             "roles": ["user", "crowd"], "created_at": now} for i in range(count)]
    with store.db.begin() as conn:
        for at in range(0, count, 10_000):
            conn.execute(insert(users_t), rows[at:at + 10_000])


def over_http(store: Store) -> tuple[float, dict]:
    app = create_app(lambda: store)
    token = issue_token(store.user("boss"), SECRET)

    async def send():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench",
                                     timeout=600) as client:
            began = time.perf_counter()
            r = await client.post("/api/instances/bulk", json={"template": "simple",
                                                               "role": "crowd"},
                                  headers={"Authorization": f"Bearer {token}"})
            return time.perf_counter() - began, r
    import asyncio
    took, r = asyncio.run(send())
    if r.status_code != 201:
        raise SystemExit(f"the API answered {r.status_code}: {r.text[:300]}")
    return took, r.json()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--http", action="store_true")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    url = database()
    store = Store(url, secret=SECRET)
    began = time.perf_counter()
    people(store, args.users)
    store.put_template(FORM)
    print(f"database: {store.db.dialect.name}; {args.users:,} users added in"
          f" {time.perf_counter() - began:.1f} s")

    profile = cProfile.Profile() if args.profile else None
    began = time.perf_counter()
    if profile:
        profile.enable()
    batch, started = store.start_batch("simple", role="crowd", created_by="boss")
    if profile:
        profile.disable()
    took = time.perf_counter() - began
    print(f"start: {started:,} instances in {took:.1f} s"
          f" ({took / started * 1e6:.0f} µs each; target <= {START_TARGET_S:.0f} s)")
    if profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)

    times = []
    for _ in range(args.calls):
        began = time.perf_counter()
        counts = store.batch_stats(batch)
        times.append((time.perf_counter() - began) * 1000)
    assert counts["instances"] == {"running": started}, counts
    assert all(sum(c.values()) == started for c in counts["circles"].values()), counts
    median = statistics.median(times)
    print(f"stats: median {median:.0f} ms, max {max(times):.0f} ms over {args.calls} calls"
          f" (target: median <= {STATS_TARGET_MS:.0f} ms)")
    print(json.dumps(counts))

    if args.http:
        took_http, answer = over_http(store)
        print(f"http: POST /api/instances/bulk (role) started {answer['started']:,} in"
              f" {took_http:.1f} s")
    store.close()
    return 0 if took <= START_TARGET_S and median <= STATS_TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
