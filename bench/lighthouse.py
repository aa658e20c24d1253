"""Lighthouse's mobile preset on the app served as `make run` serves it (production build,
one port), on its own SQLite database: `/guest`, and `/flows` signed in.

Lighthouse (npm `lighthouse`, installed under .tools/lighthouse by `make bench`) runs
through its Node API with its default settings, which are the mobile preset: a Moto
G Power-sized screen, simulated throttling (150 ms round trips, 1.6 Mbit/s down, the CPU
slowed 4×), the performance category. Each run starts its own Debian Chromium
(`--headless=new --no-sandbox --disable-gpu`, as `lighthouse --chrome-path
--chrome-flags` would), and Lighthouse clears the origin's storage and the browser's
cache before it loads the page, so every run is a first visit. The signed-in page gets
the session as a browser that had signed in has it: the token in localStorage
(`bpflow_token`, bpflow_app/session.py), set by a script the page runs before its own
(Puppeteer's evaluateOnNewDocument, so after Lighthouse's storage reset).

Prints, per page, the median of the runs: Performance score, FCP, LCP, TBT, Speed Index,
CLS, the unused JavaScript, and the opportunities Lighthouse lists (estimated savings),
as JSON; each run's report is kept in test-output/bench/lighthouse/.

    .venv/bin/python bench/lighthouse.py [--runs 5] [--pages guest,flows] [--url URL]

With --url the app already served there is measured (it must use this bench's database
and secret: `--serve-only` starts one and waits), which lets two builds take turns.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ui_latency import SECRET, bpflow, env, free_port  # noqa: E402 (the same set-up)

from bpflow.auth import issue_token  # noqa: E402
from bpflow.store import Store  # noqa: E402

OUT = ROOT / "test-output" / "bench"
REPORTS = OUT / "lighthouse"
CHROMIUM = os.environ.get("BPFLOW_CHROMIUM", "/usr/bin/chromium")
CHROME_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu"]
# npm prefix holding node_modules/lighthouse (the Makefile's bench target installs it)
LIGHTHOUSE = Path(os.environ.get("BPFLOW_LIGHTHOUSE", ROOT / ".tools" / "lighthouse"))
PAGES = {"guest": "/guest", "flows": "/flows"}
USER = "alice"
FLOWS = 6  # alice's flows on /flows: a page with rows, as a user sees it

# One Lighthouse run (Node API), run with the npm prefix as working directory so that the
# bare imports resolve there. argv: url, token ('' for none), chromium, flags (JSON),
# output file.
RUN_JS = r"""
const [url, token, chromePath, flags, out] = process.argv.slice(1);
const {default: lighthouse} = await import('lighthouse');
const chromeLauncher = await import('chrome-launcher');
const {default: puppeteer} = await import('puppeteer-core');
const fs = await import('node:fs');
const chrome = await chromeLauncher.launch({chromePath, chromeFlags: JSON.parse(flags)});
try {
  const browser = await puppeteer.connect({browserURL: `http://127.0.0.1:${chrome.port}`,
                                           defaultViewport: null});
  const page = await browser.newPage();
  if (token) {
    await page.evaluateOnNewDocument((t) => {
      try { window.localStorage.setItem('bpflow_token', t); } catch (e) { /* about:blank */ }
    }, token);
  }
  const result = await lighthouse(url, {logLevel: 'error', output: 'json',
                                        onlyCategories: ['performance']}, undefined, page);
  fs.writeFileSync(out, result.report);
  await browser.disconnect();
} finally {
  await chrome.kill();
}
"""


def prepare(db: Path) -> None:
    """A fresh database: the shipped templates, alice and a few flows of hers."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    bpflow(db, "db", "upgrade")
    bpflow(db, "import", "upload/workflow")
    bpflow(db, "user", "add", USER, "--role", "user", "--password-stdin",
           stdin=f"{USER}-password\n")
    store = Store(f"sqlite:///{db}", secret=SECRET.encode())
    try:
        for _ in range(FLOWS):
            store.start("reimbursement", {}, store.user(USER))
    finally:
        store.close()


def token(db: Path) -> str:
    store = Store(f"sqlite:///{db}", secret=SECRET.encode())
    try:
        return issue_token(store.user(USER), secret=SECRET.encode())
    finally:
        store.close()


def serve(db: Path, port: int) -> subprocess.Popen:
    """`make run`'s server (reflex run --env prod --single-port: the production build,
    then Granian), on `port`."""
    log = (OUT / f"{db.stem}-server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "reflex", "run", "--env", "prod", "--single-port",
         "--frontend-port", str(port), "--backend-port", str(port)],
        cwd=ROOT, env=env(db), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SystemExit(f"server exited; see {log.name}")
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/guest", timeout=5):
                    return process
            except OSError:
                time.sleep(1)
        raise SystemExit("server did not start in 600 s")
    except BaseException:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)
        raise


def lighthouse(url: str, session: str, out: Path) -> dict:
    subprocess.run(["node", "--input-type=module", "-e", RUN_JS, url, session, CHROMIUM,
                    json.dumps(CHROME_FLAGS), str(out)],
                   cwd=LIGHTHOUSE, check=True, timeout=300)
    return json.loads(out.read_text())


def figures(lhr: dict) -> dict:
    audits = lhr["audits"]

    def ms(name: str) -> float:
        return round(audits[name]["numericValue"])

    unused = audits["unused-javascript"].get("details") or {}
    return {
        "score": round(lhr["categories"]["performance"]["score"] * 100),
        "fcp_ms": ms("first-contentful-paint"), "lcp_ms": ms("largest-contentful-paint"),
        "tbt_ms": ms("total-blocking-time"), "si_ms": ms("speed-index"),
        "cls": round(audits["cumulative-layout-shift"]["numericValue"], 3),
        "unused_js_kib": round(unused.get("overallSavingsBytes", 0) / 1024),
        "transfer_kib": round(audits["total-byte-weight"]["numericValue"] / 1024),
        "requests": len((audits["network-requests"].get("details") or {}).get("items", [])),
    }


def opportunities(lhr: dict) -> dict[str, float]:
    """Lighthouse's opportunities and diagnostics with estimated savings (ms of LCP or
    FCP, else bytes) that did not pass."""
    out = {}
    for audit in lhr["audits"].values():
        score = audit.get("score")
        if score is None or score >= 0.9:
            continue
        savings = audit.get("metricSavings") or {}
        ms = max(savings.get("LCP", 0), savings.get("FCP", 0))
        if ms:
            out[f"{audit['id']} (ms)"] = ms
        elif (audit.get("details") or {}).get("overallSavingsBytes"):
            out[f"{audit['id']} (KiB)"] = round(audit["details"]["overallSavingsBytes"] / 1024)
        elif audit.get("displayValue") and savings:
            out[audit["id"]] = audit["displayValue"]
    return out


def median_of(runs: list[dict]) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per page (median)")
    parser.add_argument("--pages", default=",".join(PAGES))
    parser.add_argument("--url", help="measure the app served there (see --serve-only)")
    parser.add_argument("--serve-only", action="store_true",
                        help="prepare the database, serve, print the URL and wait")
    parser.add_argument("--label", default="", help="names this run's reports")
    parser.add_argument("--db", default="lighthouse.db",
                        help="the database's file in test-output/bench/")
    args = parser.parse_args()
    if not (LIGHTHOUSE / "node_modules" / "lighthouse").is_dir():
        raise SystemExit(f"no lighthouse under {LIGHTHOUSE}: `make bench` installs it")
    OUT.mkdir(parents=True, exist_ok=True)
    REPORTS.mkdir(parents=True, exist_ok=True)
    db = OUT / args.db
    # SIGTERM as SIGINT: an exception, so that the server started below is ended
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    server = None
    if args.url:
        base = args.url.rstrip("/")
    else:
        prepare(db)
        port = free_port()
        server = serve(db, port)
        base = f"http://localhost:{port}"
    try:
        if args.serve_only:
            print(base, flush=True)
            while True:
                signal.pause()
        session = token(db)
        pages = args.pages.split(",")
        runs: dict[str, list[dict]] = {page: [] for page in pages}
        lhrs: dict[str, list[dict]] = {page: [] for page in pages}
        for i in range(args.runs):
            for page in pages:  # the pages take turns: the machine's moods fall on both
                out = REPORTS / f"{args.label or 'run'}-{page}-{i}.json"
                lhr = lighthouse(base + PAGES[page], session if page == "flows" else "", out)
                runs[page].append(figures(lhr))
                lhrs[page].append(lhr)
                print(page, runs[page][-1], file=sys.stderr, flush=True)
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(30)
    report = {}
    for page in pages:
        middle = sorted(range(len(runs[page])), key=lambda i: runs[page][i]["score"])
        report[page] = {
            "runs": len(runs[page]),
            "median": median_of(runs[page]),
            "scores": [run["score"] for run in runs[page]],
            # from the run whose score is the median
            "opportunities": opportunities(lhrs[page][middle[len(middle) // 2]]),
        }
    report["lighthouse"] = lhrs[pages[0]][0]["lighthouseVersion"]
    report["chromium"] = lhrs[pages[0]][0]["environment"]["hostUserAgent"]
    report["load_average_1m"] = round(os.getloadavg()[0], 2)  # the machine was this busy
    report["target_met"] = all(report[page]["median"]["score"] >= 90 for page in pages)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
