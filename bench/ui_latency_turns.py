"""`bench/ui_latency.py`'s inbox loads, two builds taking turns: each arm is an app served
from its own checkout (old code and new), driven by one Chromium, the arms' batches in a
shuffled order every round, so that the machine's moods fall on both alike. Prints the
median of each arm's loads: in the app (a click on the Inbox link as soon as the header
shows), by page load, in a new tab, and when the backend's first answer came (page load,
new tab).

Serve an arm (in its checkout, with its own modules first on the path; waits):

    PYTHONPATH=<tree> .venv/bin/python <this tree>/bench/ui_latency_turns.py --serve <tree> <db>

Then take turns:

    .venv/bin/python bench/ui_latency_turns.py --arm old=<url>=<db>=<tree> \\
        --arm new=<url>=<db>=<tree> [--rounds 6] [--loads 3] [--lang en|zh-CN]

Each arm's session token is issued by that arm's own code (its users table).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = """import sys
from bpflow.auth import issue_token
from bpflow.store import Store
store = Store(sys.argv[1], secret=sys.argv[2].encode())
print(issue_token(store.user("boss"), secret=sys.argv[2].encode()))"""


def serve(tree: str, db: str) -> None:
    """Prepare `db` with the code of `tree` (on PYTHONPATH) and serve it from there."""
    sys.path[:0] = [str(Path(tree) / "bench"), tree]
    import ui_latency as arm  # that tree's bench: its schema, its build
    arm.OUT.mkdir(parents=True, exist_ok=True)
    arm.prepare(Path(db), 5, 10_000).close()
    port = arm.free_port()
    server = arm.serve(Path(db), port)
    print(f"http://localhost:{port}", flush=True)
    try:
        server.wait()
    except KeyboardInterrupt:
        server.terminate()


def token(db: str, tree: str, secret: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", TOKEN, f"sqlite:///{db}", secret], check=True,
        capture_output=True, text=True, env={"PYTHONPATH": tree, "PATH": "/usr/bin"}, cwd=tree,
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", nargs=2, metavar=("TREE", "DB"))
    parser.add_argument("--arm", action="append", default=[], metavar="NAME=URL=DB=TREE")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--loads", type=int, default=3, help="loads of each kind a round")
    parser.add_argument("--lang", choices=["en", "zh-CN"], default="en")
    args = parser.parse_args()
    if args.serve:
        return serve(*args.serve)
    sys.path.insert(0, str(ROOT / "bench"))
    import ui_latency as bench  # this tree's bench drives the browser
    from playwright.sync_api import sync_playwright
    bench.LANG = args.lang
    arms = {}
    for spec in args.arm:
        name, url, db, tree = spec.split("=")
        arms[name] = (url, token(db, tree, bench.SECRET))

    # the arm's token (issued by its own code), not one of this tree's store
    bench.signed_in = lambda browser, base, session, _name: bench.with_session(
        browser, base, session)

    kinds = ("app", "page_load", "page_load_answer", "new_tab", "new_tab_answer")
    out = {name: {kind: [] for kind in kinds} for name in arms}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=bench.CHROMIUM, args=bench.CHROMIUM_ARGS)
        for _ in range(args.rounds):
            order = list(arms)
            random.shuffle(order)
            for name in order:
                base, session = arms[name]
                got = out[name]
                got["app"] += bench.in_app_loads(browser, base, session, ["boss"],
                                                 args.loads)["boss"]
                for kind, same_tab in (("page_load", True), ("new_tab", False)):
                    loads = bench.first_loads(browser, base, session, ["boss"], args.loads,
                                              same_tab=same_tab)
                    got[kind] += loads["boss"]
                    got[f"{kind}_answer"] += loads["boss:answer"]
        browser.close()
    print(json.dumps({"lang": args.lang, "rounds": args.rounds, "loads": args.loads,
                      "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                      "median_ms": {name: {k: round(statistics.median(v), 1)
                                           for k, v in got.items()}
                                    for name, got in out.items()},
                      "n": {name: len(got["app"]) for name, got in out.items()}}, indent=2))


if __name__ == "__main__":
    main()
