"""Where the designer's keystroke → errors shown goes (bench/designer.py's setting): a
Chromium trace of a few rounds, and for each its main-thread tasks from the last
keystroke on, what each spent on scripts, styles and layout (with how many layout
objects were dirty), and when each state delta arrived and how large it was.

    .venv/bin/python bench/designer_trace.py [--circles 200] [--rounds 4]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.designer import DELTAS, opened, served, typed  # noqa: E402

PARTS = ("FunctionCall", "UpdateLayoutTree", "Layout", "PrePaint", "Paint", "Commit",
         "MinorGC", "MajorGC")


def tasks(events: list[dict]) -> None:
    """Each round's main-thread tasks (>= 2 ms) from its last keystroke on."""
    marks = sorted((e["ts"], e["args"]["data"]["message"]) for e in events
                   if e.get("name") == "TimeStamp")
    main = collections.Counter((e["pid"], e["tid"]) for e in events
                               if e.get("name") == "Layout").most_common(1)[0][0]
    timed = sorted((e for e in events if e.get("ph") == "X"
                    and (e["pid"], e["tid"]) == main), key=lambda e: e["ts"])
    keys = [t for t, m in marks if m == "key"]
    for last, end in zip(keys, [*keys[1:], float("inf")], strict=True):
        deltas = [f"+{(t - last) / 1000:.0f} ms ({m.split()[1]} B)" for t, m in marks
                  if m.startswith("delta") and last <= t < end]
        if not deltas:
            continue  # a keystroke before the round's last one
        print(f"round: deltas at {', '.join(deltas)}")
        for e in timed:
            if not (last <= e["ts"] < min(end, last + 1_500_000)) or \
                    e["name"] != "RunTask" or e.get("dur", 0) < 2000:
                continue
            inside = [c for c in timed if e["ts"] <= c["ts"]
                      and c["ts"] + c.get("dur", 0) <= e["ts"] + e["dur"]]
            spent = collections.Counter()
            dirty = []
            for c in inside:
                if c["name"] in PARTS:
                    spent[c["name"]] += c.get("dur", 0)
                if c["name"] == "Layout":
                    dirty.append(c["args"].get("beginData", {}).get("dirtyObjects"))
            print(f"  +{(e['ts'] - last) / 1000:5.0f} ms  task {e['dur'] / 1000:6.1f} ms: "
                  + ", ".join(f"{k} {v / 1000:.1f}" for k, v in spent.most_common())
                  + (f" (layout objects dirty: {dirty})" if dirty else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--circles", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    def traced(browser, base: str, store) -> dict:
        context, page, uri = opened(browser, base, store, args.circles, DELTAS)
        page.locator("#circle-when").evaluate(
            "f => f.addEventListener('input', () => console.timeStamp('key'))")
        for i in range(args.rounds + 2):  # the first two warm up
            if i == 2:
                browser.start_tracing(page=page, categories=[
                    "devtools.timeline", "disabled-by-default-devtools.timeline"])
            typed(page, uri, i)
        trace = json.loads(browser.stop_tracing())
        context.close()
        return trace
    trace = served(args.circles, traced)
    tasks(trace["traceEvents"] if isinstance(trace, dict) else trace)


if __name__ == "__main__":
    main()
