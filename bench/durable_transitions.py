"""Durable transitions per second on SQLite (WAL, synchronous=FULL), next to the raw
sqlite3 rate of single-row UPDATE + COMMIT measured in the same run on the same disk.

A transition is one completion through the Store: the engine step, then one transaction
with the instance compare-and-set, the changed circle rows and the history events.

    .venv/bin/python bench/durable_transitions.py [--transitions 3000] [--rounds 3]
        [--tenants 2]

With `--tenants N` (N > 1) the instances are spread over N tenants (`default` and N-1
more, each with the template), the completions alternating between them.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bpflow.security import derive  # noqa: E402
from bpflow.store import Store  # noqa: E402
from bpflow.store.migrate import upgrade  # noqa: E402
from engine import bookmarks  # noqa: E402

STEPS = 10
CHAIN = {"name": "chain", "kind": "linear", "circles": [
    {"uri": f"s{i}", "box": {"form": [{"name": "v", "type": "integer"}]}} for i in range(STEPS)]}
SECRET = b"bench-secret-of-at-least-32-bytes-0123"


def durable_rate(folder: Path, transitions: int, tenants: int = 1) -> float:
    url = f"sqlite:///{folder / 'bench.db'}"
    upgrade(url)
    root = Store(url, secret=SECRET)
    views = [root] + [root.of(root.add_tenant(f"t{n}")) for n in range(1, tenants)]
    for view in views:
        view.put_template(CHAIN)
    key = derive(SECRET, "bookmarks")
    ids = [(views[n % len(views)], views[n % len(views)].start("chain").id)
           for n in range(transitions // STEPS + 1)]
    work = [(store, iid, f"s{i}") for i in range(STEPS) for store, iid in ids][:transitions]
    store = root
    start = time.perf_counter()
    for view, iid, cid in work:
        view.complete(iid, cid, bookmarks.make(key, iid, cid, 0), {"v": 1})
    elapsed = time.perf_counter() - start
    store.close()
    return len(work) / elapsed


def raw_rate(folder: Path, commits: int) -> float:
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
    conn.executemany("INSERT INTO t VALUES (?, 0)", [(i,) for i in range(1000)])
    start = time.perf_counter()
    for i in range(commits):
        conn.execute("BEGIN")
        conn.execute("UPDATE t SET v = v + 1 WHERE id = ?", (i % 1000,))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return commits / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tenants", type=int, default=1,
                        help="spread the instances over this many tenants")
    args = parser.parse_args()
    durable, raw = [], []
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
            raw.append(raw_rate(Path(tmp), args.transitions))
            durable.append(durable_rate(Path(tmp), args.transitions, args.tenants))
        print(f"round {r + 1}: durable {durable[-1]:,.0f}/s, raw sqlite3 {raw[-1]:,.0f}/s")
    d, w = statistics.median(durable), statistics.median(raw)
    print(f"durable transitions/s (median): {d:,.0f}")
    print(f"raw sqlite3 update+commit/s (median): {w:,.0f}")
    print(f"ratio durable/raw: {d / w:.2f}  (targets: >= 2,000/s and >= 0.25)")
    ok = d >= 2000 and d / w >= 0.25
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
