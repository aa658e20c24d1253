"""Fixtures of the service tests: the person-facing side of the boxes on a real store
(SQLite and PostgreSQL, from tests/conftest.py) and a real local HTTP server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bpflow.interactions import Interactions
from bpflow.store import Store
from tests.http_server import LocalServer


@pytest.fixture
def units(store: Store) -> Interactions:
    return Interactions(store)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer() as s:
        yield s
