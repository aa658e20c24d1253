"""Signals (SPEC §11): how a circle waiting for the outside world and a signal sent to it
meet. A `signal` action's circle, once ready, waits with `pending = {"signal": {"name",
"key"}}` (its key rendered then); a signal with the same name and key completes it."""

from __future__ import annotations

import json
from typing import Any

from engine.instance import WAITING, CircleRun
from engine.phase import signal_wait

MAX_KEY = 300  # characters of a rendered key


def key_text(key: Any) -> str:
    """A key as matched: text as is, anything else as JSON (so 42 and "42" meet)."""
    if key is None:
        return ""
    if isinstance(key, str):
        return key
    return json.dumps(key, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def token(name: str, key: Any) -> str:
    """Name and key as one text: the column a waiting circle is found by."""
    return f"{name}\x1f{key_text(key)}"


def waiting_for(run: CircleRun) -> str | None:
    """The token a circle waits for (None unless it is a signal circle still waiting)."""
    wait = signal_wait(run)
    if run.state != WAITING or wait is None:
        return None
    return token(wait["name"], wait["key"])
