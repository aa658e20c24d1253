"""Scaled out (SPEC §14): a flow page served by one backend follows a step made through the
REST API of another. Backend B serves the built app on its port (`reflex run --env prod
--single-port`), backend A the API only (`--backend-only`); both on a PostgreSQL schema of
the module's own and Reflex's Redis state manager, as tests/scaled/ sets them up. The
step reaches B by PostgreSQL NOTIFY, not by the page polling."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from bpflow.store import Store
from tests.conftest import pg_schema
from tests.scaled.conftest import (
    OUTPUT,
    ROOT,
    SECRET,
    free_port,
    require_servers,
    server_env,
    spawn,
    stop,
    wait_for,
)

pytestmark = pytest.mark.browser
FORM = {"name": "storm", "circles": [
    {"uri": "fill", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["fill"]]}]}


def own_web_dir() -> Path:
    """A frontend folder of B's own: a build bakes its backend's port into the bundle, and
    the session's app (tests/browser/conftest.py) serves its build from .web/ meanwhile.
    The copy shares .web/'s installed packages; without them (no app started in this
    checkout yet) Reflex sets the folder up itself."""
    web = OUTPUT / "web"
    shutil.rmtree(web, ignore_errors=True)
    if not (ROOT / ".web" / "node_modules").is_dir():
        return web
    shutil.copytree(ROOT / ".web", web, symlinks=True,
                    ignore=shutil.ignore_patterns("node_modules", "build", ".react-router"))
    (web / "node_modules").symlink_to(ROOT / ".web" / "node_modules")
    return web


@pytest.fixture(scope="module")
def site(pg_available) -> Iterator[tuple[str, str, Store]]:
    """(A's base URL, B's base URL, a Store on their database)."""
    require_servers(pg_available)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with pg_schema() as url:
        env = {**server_env(url), "REFLEX_WEB_WORKDIR": str(own_web_dir())}
        store = Store(url, secret=SECRET.encode())
        port_a, port_b = free_port(), free_port()
        # the built frontend talks to its backend at localhost:PORT: browse it there
        a, b = f"http://127.0.0.1:{port_a}", f"http://localhost:{port_b}"
        reflex = [sys.executable, "-m", "reflex", "run", "--env", "prod"]
        logs = {a: OUTPUT / "page-backend-a.log", b: OUTPUT / "page-backend-b.log"}
        # one after the other: a starting Reflex clears the folder's disk state files
        processes = [
            spawn([*reflex, "--backend-only", "--backend-port", str(port_a)], env, logs[a])]
        try:
            wait_for({a: processes[0]}, logs)
            processes.append(spawn([*reflex, "--single-port", "--frontend-port", str(port_b),
                                    "--backend-port", str(port_b)], env, logs[b]))
            wait_for({b: processes[1]}, logs)
            wait_for({b: processes[1]}, logs, "/")
            yield a, b, store
        finally:
            for process in processes:
                stop(process)
            store.close()


def test_step_through_backend_a_appears_on_the_page_of_backend_b(browser, site,
                                                                  screenshot) -> None:
    a, b, store = site
    store.add_user("alice", "pw-alice", ["user"])
    store.put_template(FORM)
    token = httpx.post(f"{a}/api/auth/token", json={"username": "alice",
                                                    "password": "pw-alice"}, timeout=30)
    bearer = {"Authorization": f"Bearer {token.json()['access_token']}"}
    inst = httpx.post(f"{a}/api/instances", json={"template": "storm"}, headers=bearer,
                      timeout=30).json()

    context = browser.new_context(base_url=b, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        page.goto(f"/flow/{inst['id']}")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill("pw-alice")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#user-menu")).to_contain_text("alice")
        fill = page.locator('.flow-node[data-circle="fill"]')
        expect(fill).to_have_attribute("data-state", "ready")

        done = httpx.post(f"{a}/api/instances/{inst['id']}/circles/fill/complete",
                          json={"bookmark": inst["circles"]["fill"]["bookmark"],
                                "result": {"n": 7}}, headers=bearer, timeout=30)
        assert done.status_code == 200, done.text
        expect(fill).to_have_attribute("data-state", "success")
        expect(page.locator("#flow-status")).to_contain_text("completed")
        screenshot(page, "scaled_step_through_another_backend")
    finally:
        context.close()
