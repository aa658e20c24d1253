"""What keeps one expression from blocking the server or producing an unusable value.

Three guards:

- regular expressions run on RE2 (`google-re2`), whose matching time is linear in the text:
  no pattern, however written, backtracks; what RE2 does not support (backreferences,
  lookaround) is an invalid pattern, told with the reason;
- an evaluation has a step budget (one step per operation, function call and variable read,
  plus one per 64 characters of string, or per item of a list or object, that an operation
  reads) and a CPU-time limit, checked every `CHECK_EVERY` steps;
- every value an operation or a function produces, and the expression's result, must be
  JSON-safe and small: integers within 64 bits, finite floats, at most 64 KiB.

Going over a limit is an `ExpressionLimitError`, an `ExpressionError` whose message names the
limit: a `when` or a compute output that trips one fails its circle with that reason, like
any other evaluation error.

The limits are module globals read when an evaluation starts, so a test can lower them.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import re2

from engine.errors import ExpressionError
from engine.messages import N_

__all__ = ["CHECK_EVERY", "INT_MAX", "INT_MIN", "MAX_CPU_SECONDS", "MAX_PATTERN_LENGTH",
           "MAX_STEPS", "MAX_VALUE_BYTES", "ExpressionLimitError",
           "LimitExceeded", "Run", "check_result", "check_value", "compile_regex",
           "regex_cached", "regex_steps", "weight"]

MAX_STEPS = 50_000
MAX_CPU_SECONDS = 0.05  # CPU time of the evaluating thread, so a busy machine cannot trip it
CHECK_EVERY = 1_000  # steps between two readings of the clock
MAX_VALUE_BYTES = 64 * 1024  # as SPEC §13's inputs and results
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 63 - 1
MAX_PATTERN_LENGTH = 2000  # a pattern from a variable; a literal one is bounded by the source
_CHARS_PER_STEP = 64
# RE2's time is linear in the text, but times the size of the compiled program: when its
# DFA runs out of memory it falls back to an NFA, and `[^c]{1000}[^d]{1000}c` (16,000
# instructions) takes seconds on 64 KiB. Measured here, the worst is about 16 ns per
# character per instruction, so a match pays text length x program size / 64 steps before
# it runs, and the whole step budget is about 50 ms of that.
_REGEX_UNITS_PER_STEP = 64

# 1 MiB (RE2's default is 8) caps a program near 25,000 instructions, so compiling one takes
# milliseconds (`\pL{300}` took ~1 s at 8 MiB), and bounds the memory a cached pattern holds.
# `~` needs no groups: without captures the program is smaller and the match faster.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.max_mem = 1 << 20
_RE2_OPTIONS.never_capture = True
_RE2_OPTIONS.log_errors = False  # RE2 would print every rejected pattern on stderr


class ExpressionLimitError(ExpressionError):
    """An evaluation that went over one of the limits above; the message names the limit."""


class LimitExceeded(Exception):
    """Raised inside the closure tree; `Expression.evaluate` turns it into
    `ExpressionLimitError` with the source attached."""


class Run:
    """One evaluation: what `${...}` and the clock functions read, and the budget spent."""

    __slots__ = ("resolve", "now", "steps", "checkpoint", "max_steps", "deadline")

    def __init__(self, resolve: Callable[[tuple[str, ...]], Any], now: datetime):
        self.resolve = resolve
        self.now = now
        self.steps = 0
        self.max_steps = MAX_STEPS
        self.checkpoint = min(CHECK_EVERY, MAX_STEPS + 1)
        self.deadline: float | None = None

    def charge(self, steps: int, at: str = "") -> None:
        self.steps += steps
        if self.steps >= self.checkpoint:
            self.check(at)

    def check(self, at: str = "") -> None:
        """Called when `steps` reaches `checkpoint`: enforce the budget, read the clock.
        The clock is first read at the first checkpoint (the first `CHECK_EVERY` steps are
        cheap by construction), which keeps small evaluations free of any clock reading."""
        if self.steps > self.max_steps:
            raise LimitExceeded(_at(f"evaluation exceeded the step limit ({self.max_steps} "
                                    "steps)", at))
        clock = time.thread_time()
        if self.deadline is None:
            self.deadline = clock + MAX_CPU_SECONDS
        elif clock > self.deadline:
            raise LimitExceeded(_at(f"evaluation exceeded the time limit "
                                    f"({MAX_CPU_SECONDS * 1000:g} ms of CPU time)", at))
        self.checkpoint = min(self.steps + CHECK_EVERY, self.max_steps + 1)


def _at(message: str, at: str) -> str:
    return f"{message} ({at})" if at else message


def weight(value: Any) -> int:
    """Steps an operation pays, beyond its one, for reading `value`."""
    kind = type(value)
    if kind is str:
        return len(value) // _CHARS_PER_STEP
    if kind is list or kind is dict or kind is tuple:
        return len(value)
    return 0


def regex_steps(regex: Any, text: str) -> int:
    """What searching `text` with `regex` costs at worst, in steps."""
    return len(text) * regex.programsize // _REGEX_UNITS_PER_STEP


def _too_large(what: str, size: str, at: str = "") -> LimitExceeded:
    return LimitExceeded(_at(f"{what} is too large: {size}, over the limit of "
                             f"{MAX_VALUE_BYTES} bytes (64 KiB) for a value", at))


def _text_bytes(text: str) -> int:
    """UTF-8 length (`isascii` is free in CPython; a text over the limit is not encoded)."""
    if len(text) > MAX_VALUE_BYTES or text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _check_number(value: int | float, at: str = "") -> None:
    if type(value) is int:
        if not INT_MIN <= value <= INT_MAX:
            raise LimitExceeded(_at("integer out of range: numbers must fit in 64 bits "
                                    "(-2**63 to 2**63 - 1)", at))
    elif not math.isfinite(value):
        raise LimitExceeded(_at(f"result is not a finite number ({value}): infinity and "
                                "NaN are not values", at))


def check_value(value: Any, at: str = "") -> Any:
    """`value` itself if an operation may produce it, else `LimitExceeded` naming the limit
    (and `at`, where the operation is). Strings and numbers are checked here; lists and
    objects only come from variables, so only `check_result` walks them."""
    kind = type(value)
    if kind is int or kind is float:
        _check_number(value, at)
    elif kind is str and len(value) * 4 > MAX_VALUE_BYTES and _text_bytes(value) > \
            MAX_VALUE_BYTES:
        raise _too_large("string", f"{len(value)} characters", at)
    return value


def check_result(value: Any) -> Any:
    """The whole result of an expression: like `check_value`, and lists and objects are
    walked (without recursion, stopping as soon as the size limit is passed). A
    container's size is that of its compact JSON text, near enough."""
    kind = type(value)
    if kind is not list and kind is not dict and kind is not tuple:
        return check_value(value)
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            total += _text_bytes(item) + 2
        elif kind is int or kind is float:
            _check_number(item)
            total += 8
        elif kind is dict:
            total += 1 + sum(_text_bytes(str(k)) + 4 for k in item)
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            total += 1 + len(item)
            stack.extend(item)
        else:
            total += 4
        if total > MAX_VALUE_BYTES:
            raise _too_large("object" if type(value) is dict else "list",
                             f"{len(value)} items")
    return value


_HINTS = {  # the part of RE2's message after ": " -> the Python feature RE2 leaves out
    "(?=": N_("lookahead is not supported"), "(?!": N_("lookahead is not supported"),
    "(?<=": N_("lookbehind is not supported"), "(?<!": N_("lookbehind is not supported"),
    "(?P": N_("named backreferences (?P=name) are not supported"),
    "(?>": N_("atomic groups are not supported"), "(?#": N_("comments are not supported"),
    "(?x": N_("verbose mode (?x) is not supported"),
    "\\Z": N_("write \\z for the end of the text"),
}


def _regex_problem(message: str) -> str:
    """RE2's reason, with what an author used to Python's `re` most likely needs to hear."""
    what, _, tail = message.rpartition(": ")
    hint = None
    if tail in _HINTS:
        hint = _HINTS[tail]
    elif what == "invalid escape sequence" and tail[1:].isdigit():
        hint = N_("backreferences are not supported")
    elif what == "bad repetition operator" and tail.endswith("+"):
        hint = N_("possessive quantifiers are not supported")
    elif what == "invalid repetition size":
        hint = N_("a count is at most 1000")
    elif message.startswith("pattern too large"):
        hint = N_("a pattern compiles to at most about 25,000 RE2 instructions (x{n} counts n"
                  " times x, and \\pL alone is over 1,000)")
    return message if hint is None else N_("%(reason)s; %(hint)s", reason=message, hint=hint)


def compile_regex(pattern: str) -> Any:
    """An RE2 pattern, or `ValueError` with a message for people."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(N_("regular expression is too long (%(length)s characters, the limit"
                            " is %(most)s)", length=len(pattern), most=MAX_PATTERN_LENGTH))
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "rejected"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(N_("invalid regular expression %(pattern)s: %(reason)s (patterns use"
                            " RE2 syntax)", pattern=repr(pattern),
                            reason=_regex_problem(reason))) from None
    except UnicodeError:
        raise ValueError(N_("invalid regular expression %(pattern)s: it contains a lone"
                            " surrogate", pattern=repr(pattern))) from None


@functools.lru_cache(maxsize=64)
def regex_cached(pattern: str) -> Any:
    """`compile_regex` for patterns that come from variables (failures are not cached)."""
    return compile_regex(pattern)
