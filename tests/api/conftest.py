"""The API served for real: uvicorn on a free port, spoken to over HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn

from bpflow.api import create_app
from bpflow.store import Store
from tests.api.helpers import hostile_store
from tests.conftest import SECRET
from tests.servers import free_port

PEOPLE = {"admin": ["admin"], "alice": ["user"], "bob": ["user"], "ann": ["approver"]}


@dataclass
class Api:
    url: str
    store: Store
    tokens: dict[str, str]

    def client(self, who: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture
def api(db_url) -> Iterator[Api]:
    store = Store(db_url, secret=SECRET)
    for name, roles in PEOPLE.items():
        store.add_user(name, f"pw-{name}", roles)
    port = free_port()
    # without the app's lifespan: it sets up a process of its own (its log lines, the
    # secret check, gc.freeze), not the tests' process; tests/services/test_security.py and
    # test_logs.py start such processes
    server = uvicorn.Server(uvicorn.Config(create_app(lambda: store), host="127.0.0.1",
                                           port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the API server did not start"
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}"
    tokens = {}
    with httpx.Client(base_url=url) as c:
        for name in PEOPLE:
            r = c.post("/api/auth/token", json={"username": name, "password": f"pw-{name}"})
            tokens[name] = r.json()["access_token"]
    yield Api(url, store, tokens)
    server.should_exit = True
    thread.join(timeout=10)
    store.close()


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory) -> Iterator[Store]:
    """A store on SQLite with admin, alice and ann and the templates of `helpers`, one
    for the tests of a module (what the API does before it reaches the database is not
    the database's)."""
    s = hostile_store(tmp_path_factory.mktemp("api"))
    yield s
    s.close()
