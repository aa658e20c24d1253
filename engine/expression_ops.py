"""The expression language's values: its operators, its functions and their types.

`expressions` compiles a tree into closures that call these. Each operator and function
checks the kinds of the values it gets and raises TypeError (or ValueError, ArithmeticError)
with a reason the compiler turns into an `ExpressionError`; none ever answers a silent
`false` for values of different types. The static side (`Static`, `RETURNS`,
`type_problem`) lets the analysis refuse a mix it can see before anything runs (SPEC §5,
§16).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from engine.expression_limits import Run
from engine.messages import N_
from engine.placeholders import as_text

BinaryOp = Callable[[Any, Any], Any]
Function = tuple[int, int | None, Callable[[list[Any], Run], Any]]
RUNTIME_ERRORS = (TypeError, ValueError, ArithmeticError, AttributeError)

# The kinds the analysis reasons about; a value of unknown kind is None.
NUMBER, STRING, BOOL, NULL, LIST, OBJECT = "number", "string", "bool", "null", "list", "object"
# The kinds named in the analysis' messages
KIND_WORDS = {NUMBER: N_("number"), STRING: N_("string"), BOOL: N_("bool"), NULL: N_("null"),
              LIST: N_("list"), OBJECT: N_("object")}
# What is known of a value before it runs: a kind, a `${...}` path whose kind the analysis
# may know (`typeof`), or None (nothing).
Static = str | tuple[str, ...] | None

_KINDS = {type(None): "null", bool: "bool", int: "int", float: "float", str: "string",
          list: "list", tuple: "list", dict: "object"}
_STATIC = {type(None): NULL, bool: BOOL, int: NUMBER, float: NUMBER, str: STRING,
           list: LIST, tuple: LIST, dict: OBJECT}
_ORDERED = frozenset({"+", "<", "<=", ">", ">="})  # two numbers or two strings
_ARITHMETIC = frozenset({"-", "*", "/", "%"})  # two numbers


def kind_of(value: Any) -> str:
    """Name a value's type in the language's own words, for error messages."""
    return _KINDS.get(type(value), type(value).__name__)


def static_kind(value: Any) -> str | None:
    """The analysis's kind of a literal value."""
    return _STATIC.get(type(value))


def is_num(value: Any) -> bool:
    """Numbers are int or float; bool deliberately is not one, to catch logic slips."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same_kind(symbol: str, fn: BinaryOp) -> BinaryOp:
    """`+` and the orderings take two numbers or two strings, never a mix."""
    def op(a: Any, b: Any) -> Any:
        if (is_num(a) and is_num(b)) or (isinstance(a, str) and isinstance(b, str)):
            return fn(a, b)
        raise TypeError(f"'{symbol}' needs two numbers or two strings, "
                        f"got {kind_of(a)} and {kind_of(b)}")
    return op


def _numeric(symbol: str, fn: BinaryOp) -> BinaryOp:
    def op(a: Any, b: Any) -> Any:
        if not (is_num(a) and is_num(b)):
            raise TypeError(f"'{symbol}' needs numbers, got {kind_of(a)} and {kind_of(b)}")
        if symbol in "/%" and b == 0:
            raise ZeroDivisionError("division by zero" if symbol == "/" else "modulo by zero")
        return fn(a, b)
    return op


def _divide(a: Any, b: Any) -> Any:
    """Integer division stays an int only when exact, so 6/3 is 2 but 7/2 is 3.5."""
    if isinstance(a, int) and isinstance(b, int) and a % b == 0:
        return a // b
    return a / b


def _equality(symbol: str, equal: bool) -> BinaryOp:
    """`==` and `!=` accept anything but a string against a number, which is a mistake
    (`date() == 20240305`), not a silent false; true is not 1 since bool is not a
    number here."""
    def op(a: Any, b: Any) -> bool:
        if (is_num(a) and isinstance(b, str)) or (isinstance(a, str) and is_num(b)):
            raise TypeError(f"'{symbol}' cannot compare {kind_of(a)} and {kind_of(b)}: convert"
                            " one side with str() or int()")
        same = isinstance(a, bool) == isinstance(b, bool) and bool(a == b)
        return same is equal
    return op


BINARY: dict[str, BinaryOp] = {
    "+": _same_kind("+", lambda a, b: a + b),
    "-": _numeric("-", lambda a, b: a - b),
    "*": _numeric("*", lambda a, b: a * b),
    "/": _numeric("/", _divide),
    "%": _numeric("%", lambda a, b: a % b),
    "==": _equality("==", True),
    "!=": _equality("!=", False),
    ">": _same_kind(">", lambda a, b: a > b),
    ">=": _same_kind(">=", lambda a, b: a >= b),
    "<": _same_kind("<", lambda a, b: a < b),
    "<=": _same_kind("<=", lambda a, b: a <= b),
}


def result_kind(symbol: str, left: Static, right: Static) -> Static:
    """The kind an operator gives, as far as it is known before it runs."""
    if symbol in _ARITHMETIC:
        return NUMBER
    if symbol == "+":  # two numbers or two strings: one side's known kind is the sum's
        for one, other in ((left, right), (right, left)):
            if one in (NUMBER, STRING) and (other == one or isinstance(other, tuple)):
                return one  # a `${...}` of another kind is a problem of its own
        return None
    return BOOL


def type_problem(symbol: str, left: str | None, right: str | None) -> str | None:
    """Why `left symbol right` fails whatever the values are (None: it may work)."""
    if left is None or right is None:
        return None
    if symbol in ("==", "!="):
        bad = {left, right} == {NUMBER, STRING}
    elif symbol in _ORDERED:
        bad = not (left == right and left in (NUMBER, STRING))
    elif symbol in _ARITHMETIC:
        bad = left != NUMBER or right != NUMBER
    else:
        return None
    if not bad:
        return None
    left, right = KIND_WORDS.get(left, left), KIND_WORDS.get(right, right)
    if symbol in ("==", "!="):
        return N_("'%(symbol)s' compares a %(left)s with a %(right)s, which is never equal:"
                  " convert one side with str() or int()", symbol=symbol, left=left,
                  right=right)
    if symbol in _ARITHMETIC:
        return N_("'%(symbol)s' needs numbers, here a %(left)s and a %(right)s", symbol=symbol,
                  left=left, right=right)
    return N_("'%(symbol)s' needs two numbers or two strings, here a %(left)s and a %(right)s",
              symbol=symbol, left=left, right=right)


def _unary(fn: Callable[[Any], Any], check: Callable[[Any], bool] | None = None,
           what: str = "") -> Function:
    def call(args: list[Any], run: Run) -> Any:
        if check is not None and not check(args[0]):
            raise TypeError(f"needs {what}, got {kind_of(args[0])}")
        return fn(args[0])
    return (1, 1, call)


def _extreme(pick: Callable[[list[Any]], Any]) -> Function:
    """min/max take several values or one list, all numbers or all strings."""
    def call(args: list[Any], run: Run) -> Any:
        items = list(args[0]) if len(args) == 1 and isinstance(args[0], list | tuple) else args
        if not items:
            raise ValueError("needs at least one value")
        if all(is_num(v) for v in items) or all(isinstance(v, str) for v in items):
            return pick(items)
        raise TypeError("needs all numbers or all strings")
    return (1, None, call)


def _clock(fn: Callable[[datetime], Any]) -> Function:
    return (0, 0, lambda args, run: fn(run.now))


# Busybee's clock functions: `week()` counts from Sunday (0) to Saturday (6), `weekday()`
# stays ISO (Monday 1 ... Sunday 7); `date()`, `time()` and `datetime()` are digit strings
# (yyyyMMdd, hhmmss, yyyyMMddhhmmss), so their leading zeros stay and they compare as text.
FUNCTIONS: dict[str, Function] = {
    "year": _clock(lambda n: n.year),
    "month": _clock(lambda n: n.month),
    "day": _clock(lambda n: n.day),
    "weekday": _clock(lambda n: n.isoweekday()),
    "week": _clock(lambda n: n.isoweekday() % 7),
    "time": _clock(lambda n: f"{n.hour:02d}{n.minute:02d}{n.second:02d}"),
    "date": _clock(lambda n: f"{n.year:04d}{n.month:02d}{n.day:02d}"),
    "datetime": _clock(lambda n: f"{n.year:04d}{n.month:02d}{n.day:02d}"
                                 f"{n.hour:02d}{n.minute:02d}{n.second:02d}"),
    "timestamp": _clock(lambda n: int(n.timestamp())),
    "len": _unary(len, lambda v: isinstance(v, str | list | tuple | dict), "a string or list"),
    "int": _unary(int),
    "float": _unary(float),
    "str": _unary(as_text),
    "abs": _unary(abs, is_num, "a number"),
    "lower": _unary(str.lower, lambda v: isinstance(v, str), "a string"),
    "upper": _unary(str.upper, lambda v: isinstance(v, str), "a string"),
    "min": _extreme(min),
    "max": _extreme(max),
}
# `exists(${x})` and `default(${x}, v)` read their variable themselves (an unset one is
# their answer, not a failure): the compiler builds them, with these argument counts.
LAZY = {"exists": 1, "default": 2}
RETURNS: dict[str, str] = {
    **dict.fromkeys(("year", "month", "day", "weekday", "week", "timestamp", "len", "int",
                     "float", "abs"), NUMBER),
    **dict.fromkeys(("time", "date", "datetime", "str", "lower", "upper"), STRING),
    "exists": BOOL,
}
