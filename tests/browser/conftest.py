"""Fixtures for real-browser tests: the app served as `make run` serves it, and Chromium.

- ``app_server`` (session): starts ``reflex run --env prod --single-port`` from the repository
  root on a free port and yields its base URL (``http://localhost:PORT``). The server log goes
  to ``test-output/browser/reflex-server.log``. Set ``BPFLOW_TEST_URL`` to test an app that is
  already running instead.
- ``browser`` (session): Debian's Chromium driven by Playwright (never ``playwright install``).
- ``page`` (function): a fresh browser context and page whose ``base_url`` is the app.
- ``screenshot``: ``screenshot(page, "name")`` saves ``test-output/browser/name.png``.

Every test under tests/browser/ is marked ``browser`` (``pytest -m "not browser"`` skips them).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
OUTPUT_DIR = REPO_ROOT / "test-output" / "browser"
SERVER_LOG = OUTPUT_DIR / "reflex-server.log"
DEFAULT_BUN = REPO_ROOT / ".tools" / "node_modules" / "bun" / "bin" / "bun.exe"
CHROMIUM = os.environ.get("BPFLOW_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# The first production build installs the frontend packages and bundles them (about a
# minute on a fresh machine); later starts take seconds.
STARTUP_TIMEOUT_S = float(os.environ.get("BPFLOW_SERVER_TIMEOUT", "300"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.browser)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _log_tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no server log at {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the server and every process it started (it leads its own process group)."""
    if process.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("REFLEX_BUN_PATH", str(DEFAULT_BUN))
    # Tests never touch the developer's database.
    env["DATABASE_URL"] = os.environ.get(
        "BPFLOW_TEST_DATABASE_URL", f"sqlite:///{OUTPUT_DIR / 'bpflow-test.db'}"
    )
    env.pop("REFLEX_FRONTEND_PORT", None)
    env.pop("REFLEX_BACKEND_PORT", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="session")
def app_server() -> Iterator[str]:
    """Base URL of the running app, started like `make run` on a free port."""
    external = os.environ.get("BPFLOW_TEST_URL")
    if external:
        yield external.rstrip("/")
        return

    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    # The built frontend talks to the backend at localhost:PORT, so browse it there too.
    base_url = f"http://localhost:{port}"
    # Hook: once the CLI has them, prepare the database here (`bpflow db upgrade`) and seed it.
    command = [
        sys.executable,
        "-m",
        "reflex",
        "run",
        "--env",
        "prod",
        "--single-port",
        "--frontend-port",
        str(port),
        "--backend-port",
        str(port),
    ]
    with SERVER_LOG.open("wb") as log:
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=_server_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _answers(base_url + "/"):
            if process.poll() is not None:
                pytest.fail(
                    f"reflex server exited with code {process.returncode} before answering "
                    f"on {base_url}; last lines of {SERVER_LOG}:\n{_log_tail(SERVER_LOG)}",
                    pytrace=False,
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"reflex server did not answer on {base_url} within "
                    f"{STARTUP_TIMEOUT_S:.0f} s; last lines of {SERVER_LOG}:\n"
                    f"{_log_tail(SERVER_LOG)}",
                    pytrace=False,
                )
            time.sleep(1)
        yield base_url
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, for the whole session."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium`", pytrace=False)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, app_server: str):
    """A fresh page (own cookies and storage) whose relative URLs resolve to the app."""
    context = browser.new_context(base_url=app_server, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(30_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot() -> Callable[..., Path]:
    """Save a full-page screenshot under test-output/browser/ and return its path."""

    def save(page, name: str) -> Path:
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        path = OUTPUT_DIR / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
