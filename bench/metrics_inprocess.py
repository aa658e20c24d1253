"""The cost of counting metrics (SPEC §18) in one process: the API app over httpx's ASGI
transport on a fresh SQLite file, a start and a completion per flow, the app's counting
(`counted`) and the store's step hook switched on and off in turns (6 × 500 flows a
setting after a warm-up), the CPU time a request in µs (the client's included).

Run: `.venv/bin/python bench/metrics_inprocess.py`. What it adds to bench/paper_flow.py's
`--metrics-ab` (requests a second of a server at saturation, on and off in turns): the
same comparison without the machine's drift between the server's runs."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time

os.environ.setdefault("BPFLOW_EGRESS_ALLOW", "127.0.0.1")

import httpx  # noqa: E402

from bpflow import metrics  # noqa: E402
from bpflow.api import create_app  # noqa: E402
from bpflow.auth import issue_token  # noqa: E402
from bpflow.store import Store  # noqa: E402
from bpflow.store.migrate import upgrade  # noqa: E402

SECRET = b"metrics-inprocess-bench-secret-0123456789"
FLOW = {"name": "f", "circles": [
    {"uri": "a", "box": {"form": [{"name": "v", "type": "integer"}]}},
    {"uri": "end", "deps": [["a"]]}]}


async def flows(app, store: Store, headers: dict[str, str], n: int, on: bool) -> float:
    """CPU µs a request over `n` flows, with the counting `on` or off."""
    app.counted = on
    store.on_steps(metrics._stepped if on else None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:
        began = time.process_time()
        for _ in range(n):
            r = await c.post("/api/instances", content=json.dumps({"template": "f"}),
                             headers=headers)
            assert r.status_code == 201, r.text
            inst = r.json()
            body = {"bookmark": inst["circles"]["a"]["bookmark"], "result": {"v": 1}}
            r = await c.post(f"/api/instances/{inst['id']}/circles/a/complete",
                             content=json.dumps(body), headers=headers)
            assert r.status_code == 200, r.text
        return (time.process_time() - began) / (2 * n) * 1e6


async def main() -> None:
    url = f"sqlite:///{tempfile.mkdtemp()}/metrics.db"
    upgrade(url)
    store = Store(url, secret=SECRET)
    store.add_user("u", "pw-u-123456", ["user"])
    store.put_template(FLOW)
    app = create_app(lambda: store)
    headers = {"Authorization": f"Bearer {issue_token(store.user('u'), SECRET)}",
               "Content-Type": "application/json"}
    await flows(app, store, headers, 200, True)  # warm-up
    seen: dict[bool, list[float]] = {True: [], False: []}
    for turn in range(6):
        for on in (True, False) if turn % 2 else (False, True):
            seen[on].append(await flows(app, store, headers, 500, on))
    for on, label in ((True, "on "), (False, "off")):
        print(f"metrics {label}: {[round(x) for x in seen[on]]} µs a request, "
              f"median {statistics.median(seen[on]):.0f}")
    ratio = statistics.median(seen[True]) / statistics.median(seen[False])
    print(f"on / off (medians): {ratio:.3f}")
    store.close()


if __name__ == "__main__":
    asyncio.run(main())
