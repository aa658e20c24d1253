"""Fixtures for real-browser tests: the app served as `make run` serves it, and Chromium.

- ``app_server`` (session): starts ``reflex run --env prod --single-port`` from the repository
  root on a free port and yields its base URL (``http://localhost:PORT``). The server log goes
  to ``test-output/browser/reflex-server.log``. Set ``BPFLOW_TEST_URL`` to test an app that is
  already running instead.
- ``browser`` (session): Debian's Chromium driven by Playwright (never ``playwright install``).
- ``page`` (function): a fresh browser context and page whose ``base_url`` is the app.
- ``AXE``: axe-core's script (``make axe``), for ``page.add_script_tag(path=AXE)``.
- ``screenshot``: ``screenshot(page, "name")`` saves ``test-output/browser/name.png``.
- ``accounts`` (session): the users of the journeys (``alice`` user, ``bob`` approver,
  ``root`` admin), created with ``bpflow user add`` in the server's database before it
  starts; ``sign_in(page, name)`` signs one of them in through the outer circle's form.
- ``app_store`` (session): a Store on the server's database with the server's secret, to
  arrange what a journey starts from (the server's worker does the rest).

The database starts empty at every session and the server secret is fixed
(``BPFLOW_SECRET``), so tokens and bookmarks agree between this process and the server.

Every test under tests/browser/ is marked ``browser`` (``pytest -m "not browser"`` skips them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import servers
from tests.scaled import conftest as scaled

REPO_ROOT = Path(__file__).resolve().parents[2]
OUTPUT_DIR = REPO_ROOT / "test-output" / "browser"
SERVER_LOG = OUTPUT_DIR / "reflex-server.log"
DEFAULT_BUN = REPO_ROOT / ".tools" / "node_modules" / "bun" / "bin" / "bun.exe"
# axe-core, installed by `make axe` (the Makefile pins its version)
AXE = REPO_ROOT / ".tools" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
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
SECRET = "browser-test-secret-0123456789-abcdef"
ACCOUNTS = {"alice": ("alice-pass-1", "user"), "bob": ("bob-pass-1", "approver"),
            "root": ("root-pass-1", "admin")}


def pytest_configure(config: pytest.Config) -> None:
    """Assertions wait up to 15 s (Playwright's default is 5): a page follows the worker and
    the changes pushed to it, which a busy machine slows down."""
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.browser)










DB_FILE = OUTPUT_DIR / "bpflow-test.db"


def _database_url() -> str:
    return os.environ.get("BPFLOW_TEST_DATABASE_URL", f"sqlite:///{DB_FILE}")


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("REFLEX_BUN_PATH", str(DEFAULT_BUN))
    # Tests never touch the developer's database nor its secret.
    env["DATABASE_URL"] = _database_url()
    env["BPFLOW_SECRET"] = SECRET
    env["BPFLOW_HOME"] = str(OUTPUT_DIR / ".bpflow")
    env.pop("REFLEX_FRONTEND_PORT", None)
    env.pop("REFLEX_BACKEND_PORT", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _bpflow(*args: str, stdin: str | None = None) -> None:
    cli = Path(sys.executable).with_name("bpflow")
    subprocess.run([str(cli), *args], cwd=REPO_ROOT, env=_server_env(), input=stdin,
                   text=True, check=True, capture_output=True)


def _prepare_database() -> None:
    """A fresh database with the journeys' users, as an operator would set it up."""
    if "BPFLOW_TEST_DATABASE_URL" not in os.environ:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{DB_FILE}{suffix}").unlink(missing_ok=True)
    _bpflow("db", "upgrade")
    _bpflow("import", "upload/workflow")
    for name, (password, role) in ACCOUNTS.items():
        _bpflow("user", "add", name, "--role", role, "--password-stdin", stdin=password + "\n")


@pytest.fixture(scope="session")
def app_server() -> Iterator[str]:
    """Base URL of the running app, started like `make run` on a free port."""
    external = os.environ.get("BPFLOW_TEST_URL")
    if external:
        yield external.rstrip("/")
        return

    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    _prepare_database()
    # The built frontend talks to the backend at localhost:PORT, so browse it there too
    # (a port taken before the server binds it is chosen again: `servers.started`).
    base_url, process = servers.started(
        lambda port: [sys.executable, "-m", "reflex", "run", "--env", "prod", "--single-port",
                      "--frontend-port", str(port), "--backend-port", str(port)],
        _server_env(), SERVER_LOG, paths=("/",), host="localhost", timeout=STARTUP_TIMEOUT_S)
    try:
        yield base_url
    finally:
        servers.stop(process)


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
def new_page(browser, app_server: str) -> Callable[..., object]:
    """A page in a fresh browser context (own storage), like a person on their own machine;
    closed when the test ends (an open page keeps its socket, gets the server's pushes and
    keeps Chromium drawing: CPU the rest of the suite would lose)."""
    contexts = []

    def make(width: int = 1280, height: int = 800):
        context = browser.new_context(base_url=app_server, reduced_motion="reduce",
                                      viewport={"width": width, "height": height})
        context.set_default_timeout(30_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(browser, app_server: str):
    """A fresh page (own cookies and storage) whose relative URLs resolve to the app."""
    # people who ask for less motion get no pulsing circles (assets/styles.css), and
    # Chromium, drawing without a GPU here, no frame every 16 ms for them
    context = browser.new_context(base_url=app_server, viewport={"width": 1280, "height": 800},
                                  reduced_motion="reduce")
    context.set_default_timeout(30_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture(scope="session")
def screenshot() -> Callable[..., Path]:
    """Save a full-page screenshot under test-output/browser/ and return its path."""

    def save(page, name: str) -> Path:
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        path = OUTPUT_DIR / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save


@pytest.fixture(scope="session")
def accounts(app_server: str) -> dict[str, tuple[str, str]]:
    """name -> (password, role) of the users the server knows."""
    return ACCOUNTS


@pytest.fixture(scope="session")
def app_store(app_server: str):
    """A Store on the server's database, with the server's secret."""
    from bpflow.store import Store

    store = Store(_database_url(), secret=SECRET.encode())
    yield store
    store.close()


@pytest.fixture(scope="session")
def sign_in(accounts) -> Callable[..., None]:
    """Sign `name` in through the sign-in form of the outer circle on the current page."""
    from playwright.sync_api import expect

    def go(page, name: str, path: str = "/flows") -> None:
        if path:
            page.goto(path)
        page.get_by_label("Username").fill(name)
        page.get_by_label("Password").fill(accounts[name][0])
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#user-menu")).to_contain_text(name)

    return go


@pytest.fixture(scope="session")
def scaled_site(pg_available) -> Iterator[object]:
    """The app scaled out, built once for the tests that need it (a build bakes its port in,
    and takes half a minute): `reflex run --env prod --single-port` with two Granian workers
    behind its port and an API-only backend before it, on a PostgreSQL schema of its own
    and Reflex's Redis state manager (tests/scaled/conftest.py, `app_site`)."""
    from tests.conftest import pg_schema

    scaled.require_servers(pg_available)
    with pg_schema() as url, scaled.app_site(url, api=True, workers=2,
                                             web="web-scaled") as served:
        yield served
