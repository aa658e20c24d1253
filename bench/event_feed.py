"""The event feed and webhooks (SPEC §11): events read from the feed and delivered by one
worker to a local receiver, per second (target ≥ 2,000/s).

N events are written first (instances of a one-circle template started in a loop: four
feed events each, instance.started, circle.entered, circle.left, instance.completed),
after a webhook subscribed to every type was added. Then the worker's webhook duty runs
round after round (`Deliverer.run`, the worker's own settings) until the receiver has
every event: the figure is events delivered per second, from the first round to the
last answer. The receiver is a separate process (uvicorn, httptools) answering 200 to
each POST and counting distinct `X-Bpflow-Event-Id`s. The peer is the feed read alone:
every page of `Store.feed` from the start, 1,000 items a page.

    .venv/bin/python bench/event_feed.py [--events 20000] [--database URL]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("BPFLOW_EGRESS_ALLOW", "127.0.0.1")  # the receiver is local

SECRET = b"bench-secret-of-at-least-32-bytes-0123"
TICK = {"name": "tick", "circles": [{"uri": "a"}]}
TYPES = ["instance.started", "instance.completed", "circle.entered", "circle.left"]


def receiver(port: int) -> None:
    """The receiving process: 200 to every POST, GET /count → distinct ids and posts."""
    import uvicorn

    seen: set[bytes] = set()
    posts = [0]

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        if scope["method"] == "POST":
            posts[0] += 1
            for name, value in scope["headers"]:
                if name == b"x-bpflow-event-id":
                    seen.add(value)
            body = b"{}"
        else:
            body = f"{len(seen)} {posts[0]}".encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    uvicorn.run(app, host="127.0.0.1", port=port, http="httptools", log_level="warning",
                access_log=False)


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--database", default="")
    parser.add_argument("--receiver", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.receiver:
        receiver(args.receiver)
        return

    import httpx

    from bpflow.store import Store
    from bpflow.store.public import upgrade
    from bpflow.webhooks import Deliverer

    folder = tempfile.mkdtemp(prefix="bpflow-feed-")
    url = args.database or f"sqlite:///{folder}/bench.db"
    upgrade(url)
    store = Store(url, secret=SECRET)
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--receiver", str(port)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/count", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the receiver did not start"
                time.sleep(0.1)
        if store.user("bench") is None:
            store.add_user("bench", "bench-password", ["admin"])
        store.put_template(TICK)
        store.add_webhook(f"http://127.0.0.1:{port}/hook", TYPES, "bench-webhook-secret-0123",
                          "bench")
        user = store.user("bench")
        starts = args.events // 4
        t0 = time.perf_counter()
        for _ in range(starts):
            store.start("tick", {}, user)
        wrote = time.perf_counter() - t0
        events = starts * 4
        print(f"wrote {events} events ({starts} instances) in {wrote:.1f} s "
              f"({events / wrote:,.0f}/s)")

        t0 = time.perf_counter()
        read, cursor = 0, None
        while True:
            items, nxt = store.feed(cursor, 1000)
            read += len(items)
            if nxt == cursor and read >= events:
                break
            cursor = nxt
        reading = time.perf_counter() - t0
        print(f"feed read alone: {read} events in {reading:.2f} s ({read / reading:,.0f}/s)")

        deliverer, hub = Deliverer(), store.of(None)
        rounds, got = 0, 0
        t0 = time.perf_counter()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            while got < events:
                deliverer.run(hub)
                rounds += 1
                got = int(client.get("/count").text.split()[0])
                assert time.perf_counter() - t0 < 600, f"only {got} delivered in 10 min"
        took = time.perf_counter() - t0
        posts = int(httpx.get(f"http://127.0.0.1:{port}/count").text.split()[1])
        deliverer.close()
        print(f"delivered {got} events ({posts} POSTs) in {took:.2f} s, {rounds} rounds: "
              f"{got / took:,.0f} events/s (target ≥ 2,000/s: "
              f"{'met' if got / took >= 2000 else 'NOT met'})")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        store.close()


if __name__ == "__main__":
    main()
