"""Durable transitions per second on SQLite (WAL, synchronous=FULL) or PostgreSQL, next to
the raw rate of a single-row UPDATE + COMMIT measured in the same run on the same database.

A transition is one completion through the Store: the engine step, then one transaction
with the instance compare-and-set, the changed circle rows and the history events.

    .venv/bin/python bench/durable_transitions.py [--transitions 3000] [--rounds 3]
        [--tenants 2] [--url postgresql://...] [--flows 16] [--json]

With `--tenants N` (N > 1) the instances are spread over N tenants (`default` and N-1
more, each with the template), the completions alternating between them.
With `--vote N`, N five-signer votes (`quorum: {"ratio": 0.6}`) are decided too, each by
three approvals through the mailbox (the third settles it), and the time of a decision is
printed next to the time of one durable step of the same run, with their ratio (target:
a decision costs no more than one step: ratio ≤ 1).
With `--url` the store is on that PostgreSQL database, in a schema of its own made for each
round and dropped after it (the raw rate: psycopg, autocommit UPDATE). With `--flows N`
(N > 0), N flows run at once from one event loop through the async path (`apply_async`:
the steps that arrive together share a commit); without, one thread completes step after
step. `--json` prints one JSON object with the figures instead of the text.
BPFLOW_PG_WRITER=sqlalchemy measures PostgreSQL through the SQLAlchemy writer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bpflow.memory import settle_memory  # noqa: E402
from bpflow.security import derive  # noqa: E402
from bpflow.store import Store  # noqa: E402
from bpflow.store.public import upgrade  # noqa: E402
from engine import bookmarks  # noqa: E402

STEPS = 10
CHAIN = {"name": "chain", "kind": "linear", "circles": [
    {"uri": f"s{i}", "box": {"form": [{"name": "v", "type": "integer"}]}} for i in range(STEPS)]}
SECRET = b"bench-secret-of-at-least-32-bytes-0123"
SIGNERS = ("v1", "v2", "v3", "v4", "v5")
VOTE = {"name": "vote", "circles": [
    {"uri": "ask", "box": {"action": {"type": "approval", "to": list(SIGNERS),
                                      "quorum": {"ratio": 0.6}, "subject": "Vote"}}}]}


def durable_rate(folder: Path, transitions: int, tenants: int = 1, flows: int = 0,
                 url: str | None = None) -> float:
    """Completions per second on the SQLite file in `folder`, or on `url` as given."""
    url = url or f"sqlite:///{folder / 'bench.db'}"
    upgrade(url)
    root = Store(url, secret=SECRET)
    views = [root] + [root.of(root.add_tenant(f"t{n}")) for n in range(1, tenants)]
    for view in views:
        view.put_template(CHAIN)
    key = derive(SECRET, "bookmarks")
    ids = [(views[n % len(views)], views[n % len(views)].start("chain").id)
           for n in range(transitions // STEPS + 1)]
    work = [(store, iid, f"s{i}") for i in range(STEPS) for store, iid in ids][:transitions]
    settle_memory()  # as a server or a worker settles its memory once started
    start = time.perf_counter()
    if flows:
        asyncio.run(concurrently(work, key, flows))
    else:
        for view, iid, cid in work:
            view.complete(iid, cid, bookmarks.make(key, iid, cid, 0), {"v": 1})
    elapsed = time.perf_counter() - start
    root.close()
    return len(work) / elapsed


def vote_decision_seconds(url: str, votes: int) -> float:
    """Seconds a decision takes on a five-signer vote (three approvals each; the third
    settles it), through `Mailbox.decide`, one after the other."""
    from bpflow.mailbox import Mailbox
    from bpflow.worker import Worker
    store = Store(url, secret=SECRET)
    starter = store.user("starter") or (store.add_user("starter", "pw-starter-0", ["user"])
                                        and store.user("starter"))
    for name in SIGNERS:
        if store.user(name) is None:
            store.add_user(name, f"pw-{name}-0", ["approver"])
    store.put_template(VOTE)
    ids = [store.start("vote", {}, starter).id for _ in range(votes)]
    Worker(store).run_once()
    people = {name: store.user(name) for name in SIGNERS}
    mailbox = Mailbox(store)
    mails = {name: {m["instance"]: m["id"] for m in mailbox.inbox(people[name], "approval",
                                                                  limit=votes)}
             for name in SIGNERS[:3]}
    settle_memory()
    start = time.perf_counter()
    for iid in ids:
        for name in SIGNERS[:3]:
            mailbox.decide(mails[name][iid], people[name], "approved")
    elapsed = time.perf_counter() - start
    assert all(store.get(iid).status == "completed" for iid in ids)
    store.close()
    return elapsed / (3 * votes)


async def concurrently(work: list[tuple[Store, str, str]], key: bytes, flows: int) -> None:
    """The completions by `flows` flows at once: each flow takes the next instance and
    completes its steps one after the other (`apply_async`, the API's path)."""
    chains: dict[str, list[tuple[Store, str]]] = {}
    for view, iid, cid in work:
        chains.setdefault(iid, []).append((view, cid))
    queue = list(chains.items())

    async def flow() -> None:
        while queue:
            iid, steps = queue.pop()
            for view, cid in steps:
                mark = bookmarks.make(key, iid, cid, 0)
                await view.apply_async(iid, lambda e, i, c=cid, m=mark: e.complete(
                    i, c, m, {"v": 1}))
    await asyncio.gather(*(flow() for _ in range(flows)))


@contextmanager
def pg_schema(url: str) -> Iterator[str]:
    """A schema of its own on the PostgreSQL database of `url`: the URL using it."""
    import psycopg
    from sqlalchemy.engine import make_url
    address = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    schema = f"bench_durable_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{url}{'&' if '?' in url else '?'}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(address, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def pg_raw_rate(url: str, commits: int) -> float:
    """Single-row UPDATEs, each its own transaction, through psycopg (autocommit)."""
    import psycopg
    from sqlalchemy.engine import make_url
    address = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute("CREATE TABLE raw_t (id integer PRIMARY KEY, v integer NOT NULL)")
        conn.execute("INSERT INTO raw_t SELECT i, 0 FROM generate_series(0, 999) i")
        start = time.perf_counter()
        for i in range(commits):
            conn.execute("UPDATE raw_t SET v = v + 1 WHERE id = %s", (i % 1000,))
        return commits / (time.perf_counter() - start)


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
    parser.add_argument("--url", help="a PostgreSQL URL (default: an SQLite file)")
    parser.add_argument("--flows", type=int, default=0,
                        help="this many flows at once from one event loop (0: one thread)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--vote", type=int, default=0,
                        help="also decide this many five-signer votes (the ratio to a step)")
    args = parser.parse_args()
    durable, raw, votes = [], [], []
    database = "postgresql" if args.url else "sqlite"
    for r in range(args.rounds):
        if args.url:
            with pg_schema(args.url) as url:
                raw.append(pg_raw_rate(url, args.transitions))
                durable.append(durable_rate(Path(), args.transitions, args.tenants,
                                            args.flows, url))
                if args.vote:
                    votes.append(vote_decision_seconds(url, args.vote))
        else:
            with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
                raw.append(raw_rate(Path(tmp), args.transitions))
                durable.append(durable_rate(Path(tmp), args.transitions, args.tenants,
                                            args.flows))
                if args.vote:
                    votes.append(vote_decision_seconds(f"sqlite:///{Path(tmp) / 'bench.db'}",
                                                       args.vote))
        if not args.json:
            print(f"round {r + 1}: durable {durable[-1]:,.0f}/s,"
                  f" raw {database} {raw[-1]:,.0f}/s")
    d, w = statistics.median(durable), statistics.median(raw)
    ok = d >= 2000 and (args.url is not None or d / w >= 0.25)
    vote = statistics.median(votes) if votes else None
    ratio = vote * d if vote is not None else None  # a decision's time / a step's
    if args.json:
        print(json.dumps({
            "database": database, "flows": args.flows, "tenants": args.tenants,
            "transitions": args.transitions, "writer": writer_name(args.url),
            "durable_median": round(d, 1), "durable_rounds": [round(x, 1) for x in durable],
            "raw_median": round(w, 1), "ratio": round(d / w, 3), "targets_met": ok,
            **({"vote_decision_ms": round(vote * 1000, 3),
                "vote_decision_rounds_ms": [round(v * 1000, 3) for v in votes],
                "vote_decision_per_step": round(ratio, 3)} if vote is not None else {})}))
        return 0 if ok else 1
    print(f"durable transitions/s (median): {d:,.0f}")
    print(f"raw {database} update+commit/s (median): {w:,.0f}")
    print(f"ratio durable/raw: {d / w:.2f}  (targets: >= 2,000/s"
          f"{'' if args.url else ' and >= 0.25'})")
    print("targets met" if ok else "targets NOT met")
    if vote is not None and ratio is not None:
        print(f"a decision on a five-signer vote: {vote * 1000:.2f} ms (median of"
              f" {', '.join(f'{v * 1000:.2f}' for v in votes)}); a durable step:"
              f" {1000 / d:.2f} ms")
        print(f"ratio decision/step: {ratio:.2f}  (target: <= 1)"
              f" {'met' if ratio <= 1 else 'NOT met'}")
    return 0 if ok else 1


def writer_name(url: str | None) -> str:
    if url is None:
        return "sqlite3"
    return "sqlalchemy" if os.environ.get("BPFLOW_PG_WRITER") == "sqlalchemy" else "psycopg"


if __name__ == "__main__":
    sys.exit(main())
