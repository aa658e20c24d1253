"""Bounds of the analysis (SPEC §13): what a template may hold, and how long it may take.

`measure` walks the body once, without recursion, before anything expensive runs: the
number of JSON values, the characters in strings and keys, the JSON depth, the circles
and how deeply flows nest inline. Anything over a limit is a `too_large` error and the
analysis stops there. `Deadline` bounds the whole analysis; the checks call `check()` as
they go and the analysis turns the exception into a `too_large` error.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from engine.messages import N_

INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # integers a template may hold (64 bits)
PAUSE_FROM = 2_000  # circles from which the garbage collector waits (`collector_paused`)


@dataclass(frozen=True)
class Limits:
    circles: int = 100_000  # every circle, nested flows (inline and by name) included
    nesting: int = 32  # levels of flows inside flows
    depth: int = 200  # levels of JSON objects and lists
    values: int = 5_000_000  # JSON values: objects, lists, strings, numbers, ...
    text: int = 64 * 2**20  # characters in all strings and keys together
    seconds: float = 30.0  # the whole analysis, nested templates included
    stop: Callable[[], bool] | None = None  # asked as the deadline: True ends the work


DEFAULT_LIMITS = Limits()


class TooLarge(Exception):
    """A limit was exceeded; `path` is a JSON pointer into the template ("" for all of it)."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(message)


class Deadline:
    """The analysis's time limit, and whoever asked for it no longer waiting (`stop`: a
    server whose client went away)."""

    def __init__(self, seconds: float, stop: Callable[[], bool] | None = None):
        self.seconds, self.stop = seconds, stop
        self.end = time.monotonic() + seconds

    def check(self) -> None:
        if self.stop is not None and self.stop():
            raise TooLarge("", N_("the analysis was stopped: nobody waits for it any more"))
        if time.monotonic() > self.end:
            raise TooLarge("", N_("the analysis took longer than its limit of %(seconds)s seconds;"
                                  " split the template into smaller nested templates",
                                  seconds=format(self.seconds, "g")))


def measure(body: Any, limits: Limits) -> tuple[list[tuple[str, str, str]], int]:
    """Problems found by one cheap walk, as (code, path, message), and the body's own
    circle count. A `too_large` problem means nothing else should be looked at."""
    values = text = depth = 0
    odd = False  # a number out of range, a non-finite one, or a value that is not JSON
    max_values, max_text = limits.values, limits.text
    level: list[Any] = [body]
    while level:  # one level of nesting at a time, so no recursion and no bookkeeping
        depth += 1
        below: list[Any] = []
        containers = False
        for value in level:
            kind = type(value)
            if kind is str:
                text += len(value)
            elif kind is dict:
                containers = True
                try:
                    text += sum(map(len, value))
                except TypeError:  # keys that are not strings (not from JSON)
                    text += len(value)
                below.extend(value.values())
            elif kind is list:
                containers = True
                below.extend(value)
            elif kind is int:
                odd = odd or not INT_MIN <= value <= INT_MAX
            elif kind is float:
                odd = odd or not math.isfinite(value)
            elif value is not None and kind is not bool:
                odd = True
        values += len(level)
        if values > max_values or text > max_text:
            return [("too_large", "", N_("the template holds more than %(values)s JSON values"
                                       " or %(text)s characters", values=format(max_values, ","),
                                       text=format(max_text, ",")))], 0
        if containers and depth > limits.depth:
            return [("too_large", "", N_("the template is nested more than %(depth)s levels"
                                       " deep (objects and lists)", depth=limits.depth))], 0
        level = below
    problems = list(_odd_values(body)) if odd else []
    if any(code == "too_large" for code, _, _ in problems):
        return problems, 0
    circles, flow_problems = _flows(body, limits)
    return problems + flow_problems, circles


def _odd_values(body: Any):
    """The second, slower walk, with pointers, run only when the first saw a bad value."""
    stack: list[tuple[Any, str]] = [(body, "")]
    while stack:
        value, path = stack.pop()
        kind = type(value)
        if kind is dict:
            stack.extend((v, f"{path}/{_escape(str(k))}") for k, v in value.items())
        elif kind is list:
            stack.extend((v, f"{path}/{i}") for i, v in enumerate(value))
        elif kind is int and not INT_MIN <= value <= INT_MAX:
            yield ("too_large", path, N_("integers must fit in 64 bits"))
        elif kind is float and not math.isfinite(value):
            yield ("schema", path, N_("%(value)s is not a finite number", value=repr(value)))
        elif kind not in (str, int, float, bool) and value is not None:
            yield ("schema", path, N_("a %(kind)s is not a JSON value", kind=kind.__name__))


def _flows(body: Any, limits: Limits) -> tuple[int, list[tuple[str, str, str]]]:
    """Circles of the body (inline flows included) and inline nesting deeper than allowed."""
    count = 0
    stack: list[tuple[Any, int, str]] = [(body.get("circles") if type(body) is dict else None,
                                          0, "/circles")]
    while stack:
        circles, level, path = stack.pop()
        if type(circles) is not list:
            continue
        if level > limits.nesting:
            return count, [("too_large", path, N_("flows nest more than %(most)s levels deep",
                                                 most=limits.nesting))]
        count += len(circles)
        if count > limits.circles:
            return count, [("too_large", "", N_("the template has more than %(most)s circles"
                                             " (nested flows included)",
                                             most=format(limits.circles, ",")))]
        for i, c in enumerate(circles):
            box = c.get("box") if type(c) is dict else None
            action = box.get("action") if type(box) is dict else None
            if type(action) is dict and action.get("type") == "flow":
                stack.append((action.get("circles"), level + 1,
                              f"{path}/{i}/box/action/circles"))
    return count, []


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


_pause = threading.Lock()
_pausing = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector waits while a large template is analysed.

    Profiled at 100,000 circles, its full passes (each over the whole heap: the body and
    everything the analysis keeps) were about a third of the time and the only part that
    grew faster than the template. The analysis makes no reference cycles that need
    collecting, and it is bounded by its deadline; nested and concurrent analyses share
    one pause, and the collector is switched back on only if it was on before."""
    global _pausing, _was_enabled
    with _pause:
        if not _pausing:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pausing += 1
    try:
        yield
    finally:
        with _pause:
            _pausing -= 1
            if not _pausing and _was_enabled:
                gc.enable()
