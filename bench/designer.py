"""The designer's live analysis in a real browser (SPEC §16): an admin has a 200-circle
template open at `/design/<name>` and types into the selected circle's `when` field; the
time from the last keystroke to the analysis' errors shown (the problems list and the
circle's mark on the canvas, the frame after they enter the page). Target p95 <= 300 ms.

Rounds are interleaved: one types an expression comparing a number with a string (an error
appears), the next a good one (the error goes), so each round is a change to show. The
time is measured in the page: the last keystroke's `input` event, a MutationObserver,
then the next frame; the field's debounce (`pages/design.py`'s DEBOUNCE_MS) is in it, as a
person waits for it too. Also measured: when the JSON view's text holds the change (it is
sent after the analysis). The app is served as the browser tests serve it
(`reflex run --env prod --single-port`, tests/browser/conftest.py), on its own SQLite
database, with Debian's Chromium.

    .venv/bin/python bench/designer.py [--circles 200] [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ui_latency import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    OUT,
    SECRET,
    bpflow,
    free_port,
    serve,
    summary,
)
from bpflow.auth import issue_token  # noqa: E402
from bpflow.store import Store  # noqa: E402
from bpflow_app.pages.design import DEBOUNCE_MS  # noqa: E402

NAME = "bench_design"
TARGET_MS = 300
BAD, GOOD = "${start.amount} > 'a'", "${start.amount} > 1"  # a type error, then none
# Installed once: the last keystroke's time, and `__watch(bad)` that records when the
# page shows the errors of a bad round (or their absence after a good one), after the
# frame that draws them.
WATCH = """() => {
  const field = document.querySelector('#circle-when');
  field.addEventListener('input', () => { window.__last = performance.now(); });
  window.__watch = (uri, bad, text) => {
    window.__shown = undefined;
    window.__json = undefined;
    const shown = () => {
      const mark = document.querySelector(`.react-flow__node[data-id="${uri}"] .dc-bad`);
      const listed = document.querySelector('.design-problem');
      return bad ? Boolean(mark && listed) : !mark && !listed;
    };
    const seen = new MutationObserver(() => {
      if (!shown()) return;
      seen.disconnect();
      requestAnimationFrame(() => setTimeout(() => { window.__shown = performance.now(); }));
    });
    seen.observe(document.body, {childList: true, subtree: true, attributes: true,
                                 attributeFilter: ['class']});
    // the JSON view in step: its text holds the expression typed (looked at each frame)
    const json = () => {
      if (document.querySelector('#design-json').value.includes(JSON.stringify(text))) {
        window.__json = performance.now();
      } else {
        requestAnimationFrame(json);
      }
    };
    requestAnimationFrame(json);
  };
}"""


# Installed before the page's scripts: when the backend's state delta with the canvas's
# picture (the analysis') arrived, to tell the wait for the server (debounce, round trip,
# analysis) from the drawing; and each delta marked, with its size, in a trace
# (bench/designer_trace.py).
DELTAS = """(() => {
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => {
        const text = String(e.data);
        if (!text.includes('"delta"')) return;
        console.timeStamp(`delta ${text.length}`);
        if (text.includes('"graph_rx_state_"')) window.__delta = performance.now();
      });
    }
  };
})()"""


def template(circles: int) -> dict:
    """A form, then `circles - 2` steps (confirmations, approvals, computes, markers) in
    rows of four joined by arrows, then `done`: a body of the size the target names."""
    body = [{"uri": "start", "box": {"form": [
        {"name": "amount", "type": "number", "label": "Amount", "required": True},
        {"name": "reason", "type": "text", "label": "Reason"}]}}]
    prev = ["start"]
    for i in range(1, circles - 1):
        kind = i % 4
        box = ({"confirm": f"Step {i} for ${{start.amount}}?"} if kind == 0 else
               {"action": {"type": "approval", "to": "root", "subject": f"Step {i}"}}
               if kind == 1 else
               {"action": {"type": "compute", "outputs": {"value": "${start.amount} * 2"}}}
               if kind == 2 else None)
        circle: dict = {"uri": f"c{i}", "deps": [[prev[-1]]]}
        if box:
            circle["box"] = box
        body.append(circle)
        prev.append(f"c{i}")
    body.append({"uri": "done", "deps": [[prev[-1]]]})
    return {"name": NAME, "title": "Designer bench", "circles": body}


def prepare(db: Path, circles: int) -> Store:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    bpflow(db, "db", "upgrade")
    bpflow(db, "user", "add", "root", "--role", "admin", "--password-stdin",
           stdin="root-password-1\n")
    store = Store(f"sqlite:///{db}", secret=SECRET.encode())
    store.put_template(template(circles))
    return store


def opened(browser, base: str, store: Store, circles: int, script: str):
    """An admin's `/design/<NAME>` (`script` installed before the page's own), a compute
    step in the middle selected, WATCH installed: (context, page, the step's uri)."""
    context = browser.new_context(base_url=base, viewport={"width": 1600, "height": 1000},
                                  locale="en")
    token = issue_token(store.user("root"), secret=SECRET.encode())
    context.add_init_script(f"window.localStorage.setItem('bpflow_token', {json.dumps(token)})")
    context.add_init_script(script)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"/design/{NAME}")
    uri = f"c{circles // 2 - (circles // 2) % 4 + 2}"  # a compute step in the middle
    node = page.locator(f'.react-flow__node[data-id="{uri}"]')
    node.wait_for()
    assert page.locator(".react-flow__node").count() == circles
    node.click()
    page.locator("#circle-when").wait_for()
    page.evaluate(WATCH)
    return context, page, uri


def typed(page, uri: str, i: int) -> bool:
    """Round `i`: an expression typed into the step's `when` (an error for an even `i`)
    until the page shows what it makes of it, and its JSON view holds it; whether bad."""
    bad = i % 2 == 0
    text = BAD if bad else GOOD
    page.evaluate("([uri, bad, text]) => window.__watch(uri, bad, text)", [uri, bad, text])
    field = page.locator("#circle-when")
    field.press("Control+a")
    field.press_sequentially(text, delay=20)
    page.wait_for_function("window.__shown !== undefined && window.__json !== undefined")
    return bad


def rounds(browser, base: str, store: Store, circles: int, count: int) -> dict[str, list]:
    context, page, uri = opened(browser, base, store, circles, DELTAS)
    out: dict[str, list] = {"bad": [], "good": [], "answer": [], "drawn": [], "json": []}
    for i in range(count + 2):  # the first two warm the server and the browser
        bad = typed(page, uri, i)
        elapsed, answer, json_view = page.evaluate(
            "[window.__shown - window.__last, window.__delta - window.__last, "
            "window.__json - window.__last]")
        if i >= 2:
            out["bad" if bad else "good"].append(elapsed)
            out["answer"].append(answer)  # the server's answer arrived
            out["drawn"].append(elapsed - answer)  # ... and then drawn
            out["json"].append(json_view)  # the JSON view in step
    context.close()
    return out


def served(circles: int, work: Callable[[Any, str, Store], Any]) -> Any:
    """`work(browser, base, store)` with the app served on a fresh database holding the
    `circles`-circle template, in Chromium; what it gives."""
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    db, port = OUT / "designer.db", free_port()
    store = prepare(db, circles)
    server = serve(db, port)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                return work(browser, f"http://localhost:{port}", store)
            finally:
                browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--circles", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    found = served(args.circles, lambda browser, base, store: rounds(
        browser, base, store, args.circles, args.rounds))
    both = found["bad"] + found["good"]
    report = {"circles": args.circles, "debounce_ms": DEBOUNCE_MS,
              "keystroke_to_errors_ms": summary(both),
              "error_appears_ms": summary(found["bad"]),
              "error_goes_ms": summary(found["good"]),
              # where the time goes: until the server's delta arrived (the debounce
              # included), and from then until drawn
              "keystroke_to_answer_ms": summary(found["answer"]),
              "answer_to_drawn_ms": summary(found["drawn"]),
              # the JSON view's text in step (sent after the analysis)
              "keystroke_to_json_view_ms": summary(found["json"]),
              "load_average_1m": round(os.getloadavg()[0], 2)}
    report["target_met"] = {f"p95_le_{TARGET_MS}":
                            report["keystroke_to_errors_ms"]["p95"] <= TARGET_MS}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
