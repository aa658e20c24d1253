"""Scaled out (SPEC §14): one backend process killed, the others keep serving, and a page
open in the browser reconnects and keeps its place.

The app is served by `reflex run --env prod --single-port` with two Granian workers behind
one port, Reflex's Redis state manager, PostgreSQL (a schema of the module's own), as
tests/scaled/ sets them up. (`make run-scaled` runs each backend as a Granian server of its
own, all on one port, under supervisord: tests/scaled/test_managed.py. A page whose
process dies reconnects to another the same way there.) A signed-in flow page is open;
the worker holding the page's websocket gets SIGKILL. Then:

- Granian starts a new worker in its place (rxconfig.py asks for that: as Reflex starts it,
  Granian would stop the whole server when one worker dies) and the port answers meanwhile;
- the page reconnects by itself (a new websocket, the same document: no reload), is still
  signed in (the session's state is in Redis), on the same flow page with the same data;
- a step made afterwards through the same port's REST API appears on the page (pushed);
- a reload lands on the same flow page, still signed in.

What does not survive: a value typed into a form and not sent. The app keeps a form's
values in the form only (uncontrolled inputs, not in its state), and a reconnecting page
hydrates in full (Reflex's frontend), which draws the form anew, empty.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.scaled import conftest as scaled

pytestmark = pytest.mark.browser
WORKERS = 2
RESPAWN_S = 60  # a new worker imports the app and connects to its servers
TCP_ESTABLISHED = "01"


@pytest.fixture
def site(scaled_site) -> scaled.AppSite:
    """The app with two Granian workers (its own REST API serves the steps here)."""
    return scaled_site


def workers(server: subprocess.Popen) -> list[int]:
    """The Granian worker processes: the children of Reflex's process (Granian's main
    process), each serving the port."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(server.pid)],
                         capture_output=True, text=True, check=False).stdout
    return [int(pid) for pid in out.split()]


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir() if fds.is_dir() else ():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def established(port: int) -> set[str]:
    """The inodes of the TCP connections accepted on `port` that are open."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == TCP_ESTABLISHED:
                inodes.add(cols[9])
    return inodes


def holders(server: subprocess.Popen, port: int) -> list[int]:
    """The workers holding connections of the port, those with the most first."""
    open_ = established(port)
    counts = {pid: len(socket_inodes(pid) & open_) for pid in workers(server)}
    return sorted((pid for pid, n in counts.items() if n), key=lambda pid: -counts[pid])


def wait_until(check, timeout_s: float, what: str, page=None):
    """`check()`'s first true value; with `page`, Playwright's events are handled while
    waiting (they arrive only while Playwright runs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        if page is None:
            time.sleep(0.2)
        else:
            page.wait_for_timeout(200)
    if what:
        pytest.fail(f"{what} within {timeout_s:.0f} s", pytrace=False)
    return None


def test_a_killed_backend_worker_the_page_reconnects_and_keeps_its_place(
        browser, site, screenshot) -> None:
    served = site
    base = served.app
    port = int(base.rsplit(":", 1)[1])
    before = wait_until(lambda: len(workers(served.server)) == WORKERS
                        and workers(served.server), 30, f"{WORKERS} Granian workers")
    bearer, inst = scaled.started_flow(served.store, base)
    context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        sockets: list = []
        page.on("websocket", lambda ws: sockets.append(ws))
        scaled.sign_in(page, f"/flow/{inst['id']}")
        fill = page.locator('.flow-node[data-circle="fill"]')
        expect(fill).to_have_attribute("data-state", "ready")
        page.evaluate("window.__sameDocument = true")
        live = [ws for ws in sockets if not ws.is_closed()]
        assert len(live) == 1, [ws.url for ws in sockets]
        closed: list = []
        live[0].on("close", lambda ws: closed.append(ws))

        # SIGKILL the worker holding the page's websocket: the one with the page's
        # connections; the page's earlier requests may have left idle ones on the other
        # worker, so that one goes too when the websocket was not on the first.
        killed = []
        for pid in wait_until(lambda: holders(served.server, port), 10,
                              "a worker holding the page's connections"):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            if wait_until(lambda: closed, 5, "", page):
                break
        assert closed, f"the page's websocket stayed open after killing {killed}"
        assert served.server.poll() is None, "the server stopped with its worker"
        assert httpx.get(f"{base}/api/health", timeout=10).status_code == 200

        # the page reconnects on its own, in the same document
        wait_until(lambda: any(not ws.is_closed() for ws in sockets[len(live):]), 60,
                   "the page did not open a new websocket", page)
        assert page.evaluate("window.__sameDocument === true"), "the page was reloaded"
        assert page.url == f"{base}/flow/{inst['id']}"
        expect(page.locator("#user-menu")).to_contain_text("alice")
        expect(fill).to_have_attribute("data-state", "ready")

        # a step made afterwards still reaches the page
        scaled.complete(base, inst, bearer)
        expect(fill).to_have_attribute("data-state", "success")
        expect(page.locator("#flow-status")).to_contain_text("completed")
        screenshot(page, "scaled_reconnect_after_kill")

        # Granian replaced the killed worker(s); the server kept its port
        after = wait_until(lambda: len(workers(served.server)) == WORKERS
                           and workers(served.server), RESPAWN_S,
                           f"Granian did not respawn to {WORKERS} workers")
        assert not set(killed) & set(after) and set(after) != set(before)

        # a reload: the same place, still signed in
        page.reload()
        expect(page.locator("#user-menu")).to_contain_text("alice")
        expect(page.locator('.flow-node[data-circle="fill"]')).to_have_attribute(
            "data-state", "success")
        assert page.url == f"{base}/flow/{inst['id']}"
    finally:
        context.close()
