"""Helpers for the pure engine tests: a controllable clock and template builders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from engine.analysis import load_template
from engine.model import Template
from engine.runtime import Engine

KEY = b"test-bookmark-key"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)  # a Monday

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def circle(uri: str, *deps: Any, **extra: Any) -> dict[str, Any]:
    """A circle: deps given as strings (required arrows) or lists (OR-groups)."""
    body: dict[str, Any] = {"uri": uri, **extra}
    if deps:
        body["deps"] = [[d] if isinstance(d, str) else list(d) for d in deps]
    return body


FORM = {"form": [{"name": "x", "type": "string"}]}


def waits(uri: str, *deps: Any, **extra: Any) -> dict[str, Any]:
    """A circle that waits for the outside world (a one-field form)."""
    return circle(uri, *deps, box=FORM, **extra)


def template(*circles: dict[str, Any], name: str = "t", **extra: Any) -> Template:
    return load_template({"name": name, "circles": list(circles), **extra})


def finish(engine: Engine, inst, cid: str, result: Any = None) -> None:
    engine.complete(inst, cid, engine.bookmark(inst, cid), result)


def fail(engine: Engine, inst, cid: str, reason: str = "boom") -> None:
    engine.fail(inst, cid, engine.bookmark(inst, cid), reason)


def states(inst) -> dict[str, str]:
    return {cid: run.state for cid, run in inst.circles.items()}
