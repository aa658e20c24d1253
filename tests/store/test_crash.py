"""Crash safety under load: the API server is killed (SIGKILL) while clients start and
complete flows, restarted, killed again; afterwards every step a client saw acknowledged
is stored, and no step is stored twice.

Short in `make test` (2 kills, a few seconds of load); `make soak` sets BPFLOW_SOAK=1 for
a long run (20 kills).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from bpflow.auth import issue_token
from bpflow.store import Store
from bpflow.store.migrate import upgrade
from tests.servers import free_port

SECRET = "crash-test-secret-of-at-least-32-bytes"
STEPS = 5
CHAIN = {"name": "chain", "kind": "linear", "circles": [
    {"uri": f"s{i}", "box": {"form": [{"name": "v", "type": "integer"}]}}
    for i in range(STEPS)]}
SOAK = os.environ.get("BPFLOW_SOAK") == "1"
KILLS = 20 if SOAK else 2
CLIENTS = 8


class Server:
    """The API app served by granian (as Reflex serves it) in its own process."""

    def __init__(self, url: str, home: Path):
        self.port = free_port()
        self.env = {**os.environ, "DATABASE_URL": url, "BPFLOW_SECRET": SECRET,
                    "BPFLOW_HOME": str(home), "BPFLOW_INPROCESS_WORKER": "0"}
        self.proc: subprocess.Popen | None = None
        self.base = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        granian = Path(sys.executable).parent / "granian"
        self.proc = subprocess.Popen(
            [str(granian), "--interface", "asgi", "--factory", "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1", "bpflow.api:create_app"],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/api/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("the server did not come up")

    def kill(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # granian and its worker
            self.proc.wait()
            self.proc = None


class Client(threading.Thread):
    """Starts flows and completes their circles one by one; records what was
    acknowledged (a 2xx answer received). After a failed request it reads the instance
    back and carries on from where it is."""

    def __init__(self, base: str, token: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.base, self.stop = base, stop
        self.http = httpx.Client(base_url=base, timeout=5,
                                 headers={"Authorization": f"Bearer {token}"})
        self.started: list[str] = []
        self.acked: list[tuple[str, str]] = []
        self.failures = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self._flow()
            except httpx.HTTPError:
                self.failures += 1
                time.sleep(0.05)

    def _flow(self) -> None:
        answer = self.http.post("/api/instances", json={"template": "chain"})
        answer.raise_for_status()
        inst = answer.json()
        self.started.append(inst["id"])
        while not self.stop.is_set() and inst["status"] == "running":
            ready = [(cid, c) for cid, c in inst["circles"].items() if c["bookmark"]]
            if not ready:
                return
            cid, circle = ready[0]
            try:
                answer = self.http.post(f"/api/instances/{inst['id']}/circles/{cid}/complete",
                                        json={"bookmark": circle["bookmark"],
                                              "result": {"v": 1}})
            except httpx.HTTPError:
                self.failures += 1
                inst = self._read_back(inst["id"])
                continue
            if answer.status_code == 409:  # applied before a crash, answer lost: re-read
                inst = self._read_back(inst["id"])
                continue
            answer.raise_for_status()
            self.acked.append((inst["id"], cid))
            inst = answer.json()

    def _read_back(self, iid: str) -> dict:
        while not self.stop.is_set():
            try:
                answer = self.http.get(f"/api/instances/{iid}")
                if answer.status_code == 200:
                    return answer.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        return {"status": "stopped", "circles": {}}


def test_killed_server_loses_no_acknowledged_step_and_applies_none_twice(tmp_path):
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET.encode())
    store.add_user("ann", "pw-ann-crash", ["user"])
    store.put_template(CHAIN)
    token = issue_token(store.user("ann"), store.secret)
    store.close()

    server = Server(url, tmp_path / "home")
    server.start()
    stop = threading.Event()
    clients = [Client(server.base, token, stop) for _ in range(CLIENTS)]
    for c in clients:
        c.start()
    try:
        for _ in range(KILLS):
            time.sleep(1.0 if not SOAK else 3.0)  # load, then a crash mid-flight
            server.kill()
            time.sleep(0.2)
            server.start()
        time.sleep(1.0)
    finally:
        stop.set()
        for c in clients:
            c.join(timeout=30)
        server.kill()

    started = [iid for c in clients for iid in c.started]
    acked = [step for c in clients for step in c.acked]
    assert len(acked) > 20 and sum(c.failures for c in clients) > 0  # load met the crashes

    store = Store(url, secret=SECRET.encode())
    try:
        for iid in started:  # every acknowledged start is stored
            store.get(iid)
        for iid, cid in acked:  # every acknowledged completion is stored
            assert store.get(iid).circles[cid].state == "success", (iid, cid)
        for iid in {iid for iid, _ in acked} | set(started):
            events = store.history(iid)
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            succeeded = [e["circle"] for e in events if e["kind"] == "circle_succeeded"]
            assert len(succeeded) == len(set(succeeded)), (iid, succeeded)  # none twice
    finally:
        store.close()
