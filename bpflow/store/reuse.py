"""Lookups a process reuses for a few seconds (a token's account, a user by name, a
template's latest version, a tenant's quotas): the database is asked again once the time
is up, and at once after this process changed what was looked up (`forget`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

SIZE = 10_000  # lookups kept at most: past it, all are dropped


class Reused:
    def __init__(self) -> None:
        self._hits: dict[Hashable, tuple[Any, float]] = {}

    def get(self, key: Hashable, ttl: float, load: Callable[[], Any]) -> Any:
        """The value of `key`: as looked up in the last `ttl` seconds, else `load()`."""
        now = time.monotonic()
        hit = self._hits.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        value = load()
        if len(self._hits) >= SIZE:
            self._hits.clear()
        self._hits[key] = (value, now + ttl)
        return value

    def forget(self, key: Hashable | None = None) -> None:
        """Ask again for `key` (for every key when None)."""
        if key is None:
            self._hits.clear()
        else:
            self._hits.pop(key, None)
