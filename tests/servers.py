"""Servers the tests start and stop: a free port, a process group spawned with its log,
waited for until it answers (a port taken meanwhile chosen again), stopped with all it
started. Used by the scaled-out tests, the browser tests and the API's."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A backend starts in about 10 s on a busy machine; the first start on a fresh checkout
# may set up .web/ first.
STARTUP_S = float(os.environ.get("BPFLOW_SCALED_STARTUP_TIMEOUT", "180"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def kill(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send `sig` to the process and everything it started (it leads its own group)."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    kill(process, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        kill(process)
        process.wait(timeout=10)


def spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        return subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(urls: dict[str, subprocess.Popen], logs: dict[str, Path],
             path: str = "/api/health", timeout: float = STARTUP_S) -> None:
    """Until every base URL answers `path`; a process that exits fails the test with its
    log's tail."""
    deadline = time.monotonic() + timeout
    pending = dict(urls)
    while pending:
        for url, process in list(pending.items()):
            if answers(url + path):
                del pending[url]
            elif process.poll() is not None:
                tail = logs[url].read_text(errors="replace").splitlines()[-30:]
                pytest.fail(f"backend {url} exited with {process.returncode}:\n"
                            + "\n".join(tail), pytrace=False)
        if pending and time.monotonic() > deadline:
            files = ", ".join(str(logs[u]) for u in sorted(pending))
            pytest.fail(f"backends {sorted(pending)} did not answer within {timeout:.0f} s "
                        f"(logs: {files})", pytrace=False)
        time.sleep(0.3)


def started(command: Callable[[int], list[str]], env: dict[str, str], log: Path,
            paths: tuple[str, ...] = ("/api/health",), host: str = "127.0.0.1",
            timeout: float = STARTUP_S) -> tuple[str, subprocess.Popen]:
    """A server started on a free port and answering `paths`, with its base URL. A port
    taken between its choice and the server's bind (by another test's server, or as the
    local port of a connection going out) is chosen again, up to three times."""
    for attempt in range(3):
        port = free_port()
        base = f"http://{host}:{port}"
        process = spawn(command(port), env, log)
        try:
            for path in paths:
                wait_for({base: process}, {base: log}, path, timeout)
            return base, process
        except pytest.fail.Exception:
            stop(process)
            if attempt == 2 or "already in use" not in log.read_text(errors="replace"):
                raise
    raise AssertionError("unreachable")
