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
import os
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.designer import BAD, GOOD, NAME, WATCH, prepare  # noqa: E402
from bench.ui_latency import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    OUT,
    SECRET,
    free_port,
    serve,
)
from bpflow.auth import issue_token  # noqa: E402

# each state delta marked in the trace, with its size
MARKS = """(() => {
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => {
        const text = String(e.data);
        if (text.includes('"delta"')) console.timeStamp(`delta ${text.length}`);
      });
    }
  };
})()"""
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
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    db, port = OUT / "designer-trace.db", free_port()
    store = prepare(db, args.circles)
    server = serve(db, port)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(base_url=f"http://localhost:{port}",
                                          viewport={"width": 1600, "height": 1000},
                                          locale="en")
            token = issue_token(store.user("root"), secret=SECRET.encode())
            context.add_init_script(
                f"window.localStorage.setItem('bpflow_token', {json.dumps(token)})")
            context.add_init_script(MARKS)
            page = context.new_page()
            page.set_default_timeout(30_000)
            page.goto(f"/design/{NAME}")
            uri = f"c{args.circles // 2 - (args.circles // 2) % 4 + 2}"
            page.locator(f'.react-flow__node[data-id="{uri}"]').click()
            field = page.locator("#circle-when")
            field.wait_for()
            page.evaluate(WATCH)
            field.evaluate("f => f.addEventListener('input', () => console.timeStamp('key'))")
            for i in range(args.rounds + 2):  # the first two warm up
                bad = i % 2 == 0
                typed = BAD if bad else GOOD
                if i == 2:
                    browser.start_tracing(page=page, categories=[
                        "devtools.timeline", "disabled-by-default-devtools.timeline"])
                page.evaluate("([uri, bad, typed]) => window.__watch(uri, bad, typed)",
                              [uri, bad, typed])
                field.press("Control+a")
                field.press_sequentially(typed, delay=20)
                page.wait_for_function("window.__shown !== undefined && "
                                       "window.__json !== undefined")
            trace = json.loads(browser.stop_tracing())
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        store.close()
    tasks(trace["traceEvents"] if isinstance(trace, dict) else trace)


if __name__ == "__main__":
    main()
