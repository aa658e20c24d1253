"""Analysis time: how long `engine.analysis.analyze` takes as templates grow (SPEC §13).

Templates are random AND/OR DAGs drawn with a fixed seed: each circle depends on one to
three groups of one or two earlier circles (mostly recent ones, now and then any earlier
one), reads upstream circles in placeholders, `when` expressions and compute outputs,
and every 200th circle holds an inline nested flow of five circles that reads circles
of the outer flow. One circle ends the flow, after every circle nothing else follows.
Targets: 10,000 circles ≤ 1 s, 100,000 ≤ 15 s, growing about linearly (a growth ratio
near 1: CPU seconds per circle at this size over those at the previous size; CPU time,
as wall time also counts whatever else the machine is doing).

    .venv/bin/python bench/analysis.py [--sizes 1000,10000,100000] [--rounds 3]
                                       [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import expressions  # noqa: E402
from engine.analysis import analyze  # noqa: E402

SEED = 12


def template(n: int, seed: int = SEED) -> dict[str, Any]:
    """About `n` circles in all: the top flow's and its nested flows' together."""
    rng = random.Random(seed)
    n = n * 200 // 205  # every 200th circle nests five more
    circles: list[dict[str, Any]] = []
    ancestors_hint: list[list[int]] = []  # a few known ancestors of each circle
    has_succ: set[int] = set()
    for i in range(n - 1):
        c: dict[str, Any] = {"uri": f"c{i}"}
        hint: list[int] = []
        if i:
            groups = []
            for _ in range(rng.randint(1, 3)):
                group = sorted({_pick(rng, i) for _ in range(rng.randint(1, 2))})
                groups.append([f"c{d}" for d in group])
                has_succ.update(group)
                hint += group
            c["deps"] = groups
            hint += [a for d in hint[:2] for a in ancestors_hint[d][:2]]
        ancestors_hint.append(hint[:4])
        c["box"] = _box(rng, i, hint)
        if hint and rng.random() < 0.2:
            c["when"] = f"${{c{rng.choice(hint)}.x}} != 'skip'"
        if rng.random() < 0.1:
            c["retry"] = [1, 5, 30]
        circles.append(c)
    sinks = [f"c{i}" for i in range(n - 1) if i not in has_succ]
    circles.append({"uri": "end", "deps": [[s] for s in sinks]})
    return {"name": "bench", "circles": circles}


def _pick(rng: random.Random, i: int) -> int:
    if rng.random() < 0.05:
        return rng.randrange(i)  # a long arrow
    return max(0, i - 1 - int(rng.expovariate(1 / 8)))


def _box(rng: random.Random, i: int, hint: list[int]) -> dict[str, Any]:
    read = f"c{rng.choice(hint)}" if hint else "workflow.input"
    if i % 200 == 199:
        inner = [{"uri": "a", "box": {"confirm": f"outer ${{{read}.x}}"}}]
        inner += [{"uri": f"n{k}", "deps": [[f"n{k - 1}" if k else "a"]],
                   "box": {"confirm": f"${{{'a' if k == 0 else f'n{k - 1}'}.x}} ${{{read}.x}}"}}
                  for k in range(4)]
        return {"action": {"type": "flow", "circles": inner}}
    kind = rng.random()
    if kind < 0.35:
        return {"form": [{"name": "x", "type": "string", "default": f"${{{read}.x}}"}]}
    if kind < 0.55:
        return {"action": {"type": "approval", "to": f"${{{read}.x}}",
                           "subject": f"Claim {i} of ${{{read}.x}}"}}
    if kind < 0.75:
        return {"action": {"type": "compute", "outputs": {"x": f"${{{read}.x}} + '!'"}}}
    if kind < 0.9:
        return {"action": {"type": "http", "method": "POST", "url": "http://127.0.0.1:9000/x",
                           "json": {"v": f"${{{read}.x}}", "n": i}}}
    return {"action": {"type": "timer", "delay": 60}}


def measure(n: int, rounds: int) -> tuple[float, float, int, dict[str, Any]]:
    """Median wall and CPU seconds of `rounds` analyses, and the circles analysed."""
    body = template(n)
    wall, cpu = [], []
    for _ in range(rounds):
        cache = getattr(expressions, "_compile_cached", None)
        if hasattr(cache, "cache_clear"):  # every round parses its expressions, as the
            cache.cache_clear()  # first analysis of a template does
        start, start_cpu = time.perf_counter(), time.process_time()
        report = analyze(body)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if not report.valid:
            raise SystemExit(f"the generated template is invalid: {report.errors[:3]}")
    return statistics.median(wall), statistics.median(cpu), report.circles, body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="sizes 250,500,1000, one round")
    parser.add_argument("--profile", action="store_true",
                        help="profile the largest size and print the top functions")
    args = parser.parse_args()
    sizes = [250, 500, 1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    rounds = 1 if args.quick else args.rounds
    print(f"{'circles':>9} {'seconds':>9} {'cpu s':>9} {'µs/circle':>10} {'growth':>7}")
    previous = None
    body: dict[str, Any] = {}
    for n in sizes:
        seconds, cpu, circles, body = measure(n, rounds if n < 100_000 else 1)
        per = cpu / circles  # CPU time: the machine may be shared
        growth = f"{per / previous:.2f}" if previous else "-"
        print(f"{circles:>9,} {seconds:>9.3f} {cpu:>9.3f} {per * 1e6:>10.1f} {growth:>7}",
              flush=True)
        previous = per
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(analyze, body)
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(25)
        print(out.getvalue())


if __name__ == "__main__":
    main()
