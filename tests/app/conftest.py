"""Fixtures for the web app's state handlers, run without a browser: a SQLite (or, asked
for, PostgreSQL) store with the example templates and three users installed as the
process-wide store, and states built the way Reflex builds them (a root state, the page's
substate, router data)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reflex as rx
from reflex.istate.data import RouterData

from bpflow import backend
from bpflow.auth import issue_token
from bpflow.store import Store
from bpflow.worker import Worker
from tests.conftest import pg_schema, sqlite_database

SECRET = "app-state-test-secret-of-32-bytes-or-more"  # SPEC §13: at least 32 bytes


def _add_examples(store: Store) -> None:
    store.import_dir(backend.TEMPLATES)
    for name, role in (("alice", "user"), ("bob", "approver"), ("root", "admin"),
                       ("carol", "user")):
        store.add_user(name, f"{name}-password", [role])


def web_examples(url: str) -> None:
    """Fill the upgraded database at `url` with the example templates and the users."""
    store = Store(url, secret=SECRET.encode())
    try:
        _add_examples(store)
    finally:
        store.close()


def open_web_store(folder, url: str | None = None) -> Store:
    """A new SQLite store in `folder` (or the upgraded database at `url`) with the
    example templates and four users (on SQLite a copy of one database so filled: scrypt
    makes each user cost a tenth of a second)."""
    if url is None:
        return Store(sqlite_database(folder / "app.db", web_examples), secret=SECRET.encode())
    store = Store(url, secret=SECRET.encode())
    _add_examples(store)
    return store


@pytest.fixture
def web_store(request, tmp_path, monkeypatch, pg_available) -> Iterator[Store]:
    """The process-wide store: on SQLite, or on PostgreSQL (a schema of its own) for a
    test that asks for it with `@pytest.mark.parametrize("web_store", ["postgres"],
    indirect=True)`."""
    monkeypatch.setenv("BPFLOW_SECRET", SECRET)
    with contextlib.ExitStack() as stack:
        url = None
        if getattr(request, "param", "sqlite") == "postgres":
            if pg_available:
                if os.environ.get("CI") == "true":
                    pytest.fail(f"CI requires PostgreSQL: {pg_available}")
                pytest.skip(f"SKIPPING POSTGRESQL TESTS: {pg_available}")
            url = stack.enter_context(pg_schema())
        store = open_web_store(tmp_path, url)
        monkeypatch.setattr(backend, "_store", store)
        yield store
        store.close()


@pytest.fixture
def token(web_store) -> Callable[[str], str]:
    return lambda name: issue_token(web_store.user(name))


@pytest.fixture
def make_state(web_store) -> Callable[..., Any]:
    """`make_state(StateClass, user=None, path="/")`: the state as an event would see it."""

    def make(cls, user: str | None = None, path: str = "/", ip: str = "10.0.0.1"):
        root = rx.State(_reflex_internal_init=True)
        state = root.get_substate(cls.get_full_name().split(".")[1:])
        state.router = RouterData.from_router_data(
            {"pathname": path, "asPath": path, "headers": {"origin": "http://test"},
             "ip": ip, "token": "client-1"})
        if user is not None and hasattr(state, "token"):
            state.token = issue_token(web_store.user(user))
        return state

    return make


@pytest.fixture
def work(web_store) -> Callable[[], None]:
    """Let the worker do what is due (approval mail, HTTP calls)."""
    worker = Worker(web_store)
    return lambda: worker.run_once()

