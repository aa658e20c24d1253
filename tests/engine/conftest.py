"""Fixtures for the pure engine tests."""

from __future__ import annotations

import pytest

from engine.runtime import Engine
from tests.engine.helpers import KEY, Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(clock: Clock) -> Engine:
    return Engine(KEY, clock)
