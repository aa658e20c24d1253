"""bpflow scaled out on the real servers: two Reflex backends (`reflex run --env prod
--backend-only`, each on its own port, Reflex's Redis state manager) and two `bpflow
worker`s, all on a PostgreSQL schema of the module's own (SPEC §14).

- ``cluster`` (module): the four processes, started together; ``cluster.a`` and
  ``cluster.b`` are the backends' base URLs (processes named ``backend-a`` and
  ``backend-b``), ``cluster.store`` a Store on their database with their secret,
  ``cluster.workers`` the worker processes (``worker-1``, ``worker-2``, on a lease of
  LEASE_S seconds). Logs go to ``test-output/scaled/``.
- ``app_site(url, ...)``: a context manager for the pages' tests and bench/push_latency.py:
  the built app served (`--single-port`) from a frontend folder of its own, optionally with
  several Granian workers and beside an API-only backend; see ``AppSite``. With it
  ``started_flow``, ``sign_in`` and ``complete``: a flow started, signed in on its page,
  and a step made, through the REST API.

Without PostgreSQL or Redis the tests skip with a loud reason, except under CI (CI=true),
where an absent server fails the run (as tests/conftest.py does for PostgreSQL).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from bpflow.store import Store
from tests.conftest import pg_schema
from tests.servers import ROOT, spawn, started, stop

OUTPUT = ROOT / "test-output" / "scaled"
REDIS_URL = os.environ.get("BPFLOW_TEST_REDIS_URL", "redis://127.0.0.1:6379")
SECRET = "scaled-test-secret-0123456789-abcdefgh"
LEASE_S = 5  # the workers' lease (renewed while they work): a killed worker's instance is
# due again this soon


def _redis_reason() -> str | None:
    import redis
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
        return None
    except Exception as exc:  # any failure to connect
        return f"Redis at {REDIS_URL} is unreachable: {exc}"


def require_servers(pg_reason: str | None) -> None:
    reason = pg_reason or _redis_reason()
    if not reason:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI requires PostgreSQL and Redis: {reason}")
    warnings.warn(reason, stacklevel=1)
    pytest.skip(f"SKIPPING SCALED-OUT TESTS: {reason}")


@dataclass
class Cluster:
    store: Store
    a: str
    b: str
    backends: list[subprocess.Popen] = field(default_factory=list)
    workers: list[subprocess.Popen] = field(default_factory=list)


def server_env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("REFLEX_BUN_PATH", str(ROOT / ".tools/node_modules/bun/bin/bun.exe"))
    env.pop("REFLEX_FRONTEND_PORT", None)
    env.pop("REFLEX_BACKEND_PORT", None)
    # a web and a states folder apart from the browser tests' app, which may run at the
    # same time (a Reflex start empties its states folder; app_site gives its build a web
    # folder of its own)
    env.update(REFLEX_WEB_WORKDIR=str(OUTPUT / "backend-web"),
               REFLEX_STATES_WORKDIR=str(OUTPUT / ".states"))
    env.update(DATABASE_URL=url, BPFLOW_SECRET=SECRET, REFLEX_REDIS_URL=REDIS_URL,
               BPFLOW_HOME=str(OUTPUT / ".bpflow"), BPFLOW_INPROCESS_WORKER="0",
               GRANIAN_WORKERS="1", PYTHONUNBUFFERED="1")
    return env


@pytest.fixture(scope="module")
def cluster(pg_available) -> Iterator[Cluster]:
    require_servers(pg_available)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with pg_schema() as url:
        env = server_env(url)
        store = Store(url, secret=SECRET.encode())
        cluster = Cluster(store, "", "")
        try:
            # one after the other: a starting Reflex clears the disk state files of the
            # folder, and two at once raced on the same file
            for name in ("a", "b"):
                base, process = started(
                    lambda port: [sys.executable, "-m", "reflex", "run", "--env", "prod",
                                  "--backend-only", "--backend-port", str(port),
                                  "--loglevel", "info"],
                    {**env, "BPFLOW_PROCESS": f"backend-{name}"},
                    OUTPUT / f"backend-{name}.log")
                cluster.backends.append(process)
                setattr(cluster, name, base)
            for i in (1, 2):
                cluster.workers.append(spawn(
                    [sys.executable, "-m", "bpflow.cli", "worker", "--poll", "0.1"],
                    {**env, "BPFLOW_PROCESS": f"worker-{i}",
                     "BPFLOW_LEASE_SECONDS": str(LEASE_S)}, OUTPUT / f"worker-{i}.log"))
            yield cluster
        finally:
            for process in cluster.backends + cluster.workers:
                stop(process)
            store.close()


def own_web_dir(name: str = "web") -> Path:
    """A frontend folder of the app's own: a build bakes its backend's port into the bundle,
    and the browser session's app (tests/browser/conftest.py) serves its build from .web/
    meanwhile. The copy shares .web/'s installed packages; without them (no app started in
    this checkout yet) Reflex sets the folder up itself."""
    web = OUTPUT / name
    shutil.rmtree(web, ignore_errors=True)
    if not (ROOT / ".web" / "node_modules").is_dir():
        return web
    shutil.copytree(ROOT / ".web", web, symlinks=True,
                    ignore=shutil.ignore_patterns("node_modules", "build", ".react-router"))
    (web / "node_modules").symlink_to(ROOT / ".web" / "node_modules")
    return web


@dataclass
class AppSite:
    """``app``: the base URL of the built app (``http://localhost:PORT``: its frontend
    talks to its backend there); ``api``: the API-only backend's, when one was asked for;
    ``server``: the app's process (Reflex's CLI; its Granian workers are its children);
    ``store``: a Store on their database with their secret."""
    app: str
    server: subprocess.Popen
    store: Store
    api: str | None = None


@contextmanager
def app_site(url: str, *, api: bool = True, workers: int = 1,
             web: str = "web") -> Iterator[AppSite]:
    """The built app served by `reflex run --env prod --single-port` with `workers` Granian
    workers behind its port, and with `api` a backend serving the API only
    (`--backend-only`) before it; on the database `url` and Reflex's Redis state manager;
    every process stopped afterwards. Logs go to ``test-output/scaled/<web>-*.log``."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    env = {**server_env(url), "REFLEX_WEB_WORKDIR": str(own_web_dir(web))}
    reflex = [sys.executable, "-m", "reflex", "run", "--env", "prod"]
    processes: list[subprocess.Popen] = []
    store = Store(url, secret=SECRET.encode())
    try:
        base_api = None
        if api:
            # one after the other: a starting Reflex clears the folder's disk state files
            base_api, process = started(
                lambda port: [*reflex, "--backend-only", "--backend-port", str(port)], env,
                OUTPUT / f"{web}-backend-api.log")
            processes.append(process)
        base, process = started(
            lambda port: [*reflex, "--single-port", "--frontend-port", str(port),
                          "--backend-port", str(port)],
            {**env, "GRANIAN_WORKERS": str(workers)}, OUTPUT / f"{web}-backend-app.log",
            paths=("/api/health", "/"), host="localhost")
        processes.append(process)
        yield AppSite(base, process, store, base_api)
    finally:
        for process in processes:
            stop(process)
        store.close()


FORM = {"name": "storm", "circles": [
    {"uri": "fill", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["fill"]]}]}
USER = ("alice", "pw-alice")


def started_flow(store: Store, api: str, template: dict = FORM) -> tuple[dict, dict]:
    """alice (a user), `template`, and an instance of it started by alice through the REST
    API at `api`: (alice's bearer header, the instance as the API answered it)."""
    if store.user(USER[0]) is None:  # a site may serve several tests
        store.add_user(USER[0], USER[1], ["user"])
    store.put_template(template)
    token = httpx.post(f"{api}/api/auth/token", timeout=30,
                       json={"username": USER[0], "password": USER[1]}).json()
    bearer = {"Authorization": f"Bearer {token['access_token']}"}
    inst = httpx.post(f"{api}/api/instances", json={"template": template["name"]},
                      headers=bearer, timeout=30).json()
    return bearer, inst


def sign_in(page, path: str, user: tuple[str, str] = USER) -> None:
    """Open `path` and sign `user` (name, password) in through its sign-in form."""
    from playwright.sync_api import expect

    page.goto(path)
    page.get_by_label("Username").fill(user[0])
    page.get_by_label("Password").fill(user[1])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#user-menu")).to_contain_text(user[0])


def complete(api: str, inst: dict, bearer: dict, circle: str = "fill",
             result: dict | None = None) -> httpx.Response:
    """Complete `circle` of `inst` through the REST API at `api`, with the bookmark the
    instance's answer gave."""
    answer = httpx.post(f"{api}/api/instances/{inst['id']}/circles/{circle}/complete",
                        json={"bookmark": inst["circles"][circle]["bookmark"],
                              "result": {"n": 7} if result is None else result},
                        headers=bearer, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer
