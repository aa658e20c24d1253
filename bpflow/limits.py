"""What a request body may hold (SPEC §13): the limits as named constants, `parse` that
reads a JSON body strictly, once, and `check` that holds any parsed value to the limits.

The API reads every JSON body through `parse` before routing (`bpflow.api.hot.Api`), so
no route, the short path included, ever sees a value that breaks them:

- a body over `max_body()` bytes (1 MiB; `BPFLOW_MAX_BODY` sets another) is refused 413;
- integers outside 64 bits, numbers that are not finite (`NaN`, `Infinity`, `1e400`),
  lone surrogates (`"\\ud800"`), strings over `MAX_STRING` characters and arrays or objects
  nested over `MAX_DEPTH` deep are `LimitError`, answered 422 with a message saying what
  and where (a JSON pointer).

The request models add the limits of single fields: `small` keeps `inputs` and a
completion's `result` within `MAX_VALUE_BYTES` as JSON.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import orjson

from engine.messages import N_

__all__ = ["INT_MAX", "INT_MIN", "MAX_BODY", "MAX_DEPTH", "MAX_STRING", "MAX_VALUE_BYTES",
           "LimitError", "NotJson", "check", "max_body", "parse", "small"]

MAX_BODY = 1 << 20  # bytes of one request body (BPFLOW_MAX_BODY overrides)
MAX_VALUE_BYTES = 64 * 1024  # inputs, a completion's result: bytes as compact JSON
MAX_STRING = 64 * 1024  # characters of any one string of a body (an object's keys too)
MAX_DEPTH = 200  # arrays and objects nested inside each other (as engine.limits allows)
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 63 - 1

# Any integer of 19 digits or more may be outside 64 bits, and orjson would read one past
# 2^64 as a float: such a body is read by Python's json module, which keeps it exact.
# Found by mapping digits to 1 and opening brackets to 2 (faster than a regular expression).
_CLASSES = bytes(1 if chr(i).isascii() and chr(i).isdigit() else 2 if chr(i) in "[{" else 0
                 for i in range(256))
_LONG_NUMBER = b"\x01" * 19


class LimitError(ValueError):
    """A value that breaks one of the limits; the message says which one, and where."""


class NotJson(ValueError):
    """A body that is not JSON at all (the API leaves it to the framework's answer)."""


def max_body() -> int:
    """The most bytes a request body may have: `BPFLOW_MAX_BODY`, else `MAX_BODY`."""
    raw = os.environ.get("BPFLOW_MAX_BODY", "").strip()
    if not raw:
        return MAX_BODY
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ValueError(f"BPFLOW_MAX_BODY must be a positive number of bytes, not {raw!r}")
    return int(raw)


def parse(body: bytes) -> Any:
    """The JSON value of `body`, held to the limits (LimitError); NotJson if it is not
    JSON. What orjson reads in full is checked only when the body is big or nested enough
    to break a limit (orjson itself refuses non-finite numbers and lone surrogates)."""
    classes = body.translate(_CLASSES)
    if _LONG_NUMBER not in classes:
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            pass  # perhaps JSON that only Python reads (NaN, a lone surrogate, UTF-16)
        else:
            if len(body) > MAX_DEPTH and (len(body) > MAX_STRING
                                          or classes.count(2) > MAX_DEPTH):
                check(value)
            return value
    try:
        value = json.loads(body, parse_int=_integer, parse_constant=_constant)
    except LimitError:
        raise
    except json.JSONDecodeError as exc:
        raise NotJson(str(exc)) from None
    except RecursionError:
        raise LimitError(N_("arrays and objects nested more than %(n)s deep",
                              n=MAX_DEPTH)) from None
    except ValueError as exc:  # not UTF-8
        raise LimitError(N_("the body cannot be read as JSON: %(why)s",
                              why=_safe(str(exc), 200))) from None
    check(value)
    return value


def check(value: Any) -> None:
    """LimitError unless `value` (as JSON gives it: dicts, lists, str, int, float, bool,
    None) keeps every limit: integers within 64 bits, finite numbers, text without lone
    surrogates and at most `MAX_STRING` characters, at most `MAX_DEPTH` levels."""
    try:
        _check(value, 0)
    except _Bad as bad:
        where = "".join("/" + _safe(str(p), 40).replace("~", "~0").replace("/", "~1")
                        for p in reversed(bad.path))
        raise LimitError(N_("%(problem)s (at %(where)s)", problem=bad.problem, where=where)
                         if where and bad.located else bad.problem) from None


def small(value: Any, what: str = "value", limit: int = MAX_VALUE_BYTES) -> Any:
    """`value` if it is at most `limit` bytes as compact JSON; LimitError otherwise."""
    try:
        size = len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        check(value)
        raise LimitError(N_("%(what)s cannot be written as JSON", what=what)) from None
    if size > limit:
        raise LimitError(N_("%(what)s is %(size)s bytes as JSON; at most %(limit)s are allowed",
                            what=what, size=size, limit=limit))
    return value


_OUTSIDE_64_BITS = N_("an integer outside 64 bits (from -2^63 to 2^63-1)")
_NOT_FINITE = N_("a number that is not finite (NaN and infinities are not allowed)")


def _integer(literal: str) -> int:
    if len(literal) > 20:  # more digits than 64 bits hold (and maybe too many for int())
        raise LimitError(_OUTSIDE_64_BITS)
    return int(literal)


def _constant(_literal: str) -> float:
    raise LimitError(_NOT_FINITE)


class _Bad(Exception):
    def __init__(self, problem: str, located: bool = True):
        self.problem, self.located = problem, located
        self.path: list[str | int] = []  # where, innermost first


def _check(value: Any, level: int) -> None:
    kind = type(value)
    if kind is str:
        _text(value)
    elif kind is int:
        if not INT_MIN <= value <= INT_MAX:
            raise _Bad(_OUTSIDE_64_BITS)
    elif kind is float:
        if not math.isfinite(value):
            raise _Bad(_NOT_FINITE)
    elif kind is dict or kind is list:
        if level >= MAX_DEPTH:
            raise _Bad(N_("arrays and objects nested more than %(n)s deep", n=MAX_DEPTH), False)
        key: Any  # an object's key (text) or an array's index
        for key, item in (value.items() if kind is dict else enumerate(value)):
            try:
                if kind is dict:
                    _text(key)
                _check(item, level + 1)
            except _Bad as bad:
                bad.path.append(key)
                raise


def _text(text: str) -> None:
    if len(text) > MAX_STRING:
        raise _Bad(N_("a text longer than %(n)s characters", n=MAX_STRING))
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise _Bad(N_("a lone surrogate (a \\ud800-\\udfff escape without its pair), "
                          "which is not text")) from None


def _safe(text: str, most: int) -> str:
    """`text` shortened, with what cannot be UTF-8 (a lone surrogate) escaped."""
    text = text if len(text) <= most else text[:most] + "…"
    return text.encode("utf-8", "backslashreplace").decode()
