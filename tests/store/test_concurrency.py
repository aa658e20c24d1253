"""Two processes racing on the same instances: no lost update, no double apply."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

from bpflow.security import derive
from bpflow.store import Store
from engine import bookmarks
from engine.errors import TransitionError
from tests.conftest import SECRET, processes

CIRCLES = 100
INSTANCES = 2
WIDE = {"name": "wide", "circles": [
    *({"uri": f"c{i}", "box": {"form": [{"name": "by", "type": "string"}]}}
      for i in range(CIRCLES)),
    {"uri": "end", "deps": [[f"c{i}"] for i in range(CIRCLES)]}]}


def race(url: str, iids: list[str], seed: int, out) -> None:
    """Try to complete every circle of every instance (4 threads); report the wins."""
    store = Store(url, secret=SECRET)
    key = derive(SECRET, "bookmarks")
    work = [(iid, f"c{i}") for iid in iids for i in range(CIRCLES)]
    random.Random(seed).shuffle(work)

    def attempt(item: tuple[str, str]) -> tuple[str, str] | None:
        iid, cid = item
        mark = bookmarks.make(key, iid, cid, 0)
        try:
            store.complete(iid, cid, mark, {"by": f"p{seed}"}, actor=f"p{seed}")
            return item
        except TransitionError:
            return None

    try:
        with ThreadPoolExecutor(4) as pool:
            wins = [w for w in pool.map(attempt, work) if w]
    except Exception as exc:  # report instead of leaving the parent waiting
        out.put((seed, f"{type(exc).__name__}: {exc}"))
        return
    finally:
        store.close()
    out.put((seed, wins))


def test_two_processes_times_200_completions(db_url, store):
    store.put_template(WIDE)
    iids = [store.start("wide").id for _ in range(INSTANCES)]
    ctx = processes()
    out = ctx.Queue()
    procs = [ctx.Process(target=race, args=(db_url, iids, seed, out)) for seed in (1, 2)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=240) for _ in procs)
    assert all(isinstance(r, list) for r in results.values()), results
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    wins = results[1] + results[2]
    assert len(wins) == INSTANCES * CIRCLES == len(set(wins))  # each applied exactly once
    winner = {w: f"p{seed}" for seed, ws in results.items() for w in ws}
    for iid in iids:
        inst = store.get(iid)
        assert inst.status == "completed"
        for i in range(CIRCLES):  # the stored result is the winner's, nothing lost
            assert inst.circles[f"c{i}"].result == {"by": winner[(iid, f"c{i}")]}
        history = store.history(iid)
        assert [e["seq"] for e in history] == list(range(1, len(history) + 1))
        succeeded = [e["circle"] for e in history if e["kind"] == "circle_succeeded"]
        assert sorted(succeeded) == sorted([f"c{i}" for i in range(CIRCLES)] + ["end"])
