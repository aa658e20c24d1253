"""The safe expression language of `when` conditions and `compute` boxes.

Template authors write these, so they must never reach `eval`: a lark LALR grammar
(`expression_parser`) parses the text once and the tree is compiled here into small Python
closures, which makes evaluation both safe and fast. Every failure surfaces as
`ExpressionError`; what keeps an evaluation short and its values small (RE2 regexes, the
step and time budget, the size and range of values) is in `expression_limits`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from lark import Token, Tree

from engine.errors import BpflowError, ExpressionError
from engine.expression_limits import (
    INT_MAX,
    INT_MIN,
    ExpressionLimitError,
    LimitExceeded,
    Run,
    check_result,
    check_value,
    compile_regex,
    regex_cached,
    regex_steps,
    weight,
)
from engine.expression_parser import literal, parse, where
from engine.placeholders import as_text

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Expression", "compile_expression", "evaluate"]

MAX_LENGTH = 2000
MAX_DEPTH = 50  # parentheses, calls and unary operators nested inside each other

Resolver = Callable[[tuple[str, ...]], Any]
Node = Callable[[Run], Any]
BinaryOp = Callable[[Any, Any], Any]

_KINDS = {type(None): "null", bool: "bool", int: "int", float: "float", str: "string",
          list: "list", tuple: "list", dict: "object"}
_RUNTIME_ERRORS = (TypeError, ValueError, ArithmeticError, AttributeError)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _Fail(Exception):
    """A runtime failure inside the closure tree; `Expression.evaluate` adds the source."""


def _kind(value: Any) -> str:
    """Name a value's type in the language's own words, for error messages."""
    return _KINDS.get(type(value), type(value).__name__)


def _is_num(value: Any) -> bool:
    """Numbers are int or float; bool deliberately is not one, to catch logic slips."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same_kind(symbol: str, fn: BinaryOp) -> BinaryOp:
    """`+` and the orderings take two numbers or two strings, never a mix."""
    def op(a: Any, b: Any) -> Any:
        if (_is_num(a) and _is_num(b)) or (isinstance(a, str) and isinstance(b, str)):
            return fn(a, b)
        raise TypeError(f"'{symbol}' needs two numbers or two strings, "
                        f"got {_kind(a)} and {_kind(b)}")
    return op


def _numeric(symbol: str, fn: BinaryOp) -> BinaryOp:
    def op(a: Any, b: Any) -> Any:
        if not (_is_num(a) and _is_num(b)):
            raise TypeError(f"'{symbol}' needs numbers, got {_kind(a)} and {_kind(b)}")
        if symbol in "/%" and b == 0:
            raise ZeroDivisionError("division by zero" if symbol == "/" else "modulo by zero")
        return fn(a, b)
    return op


def _divide(a: Any, b: Any) -> Any:
    """Integer division stays an int only when exact, so 6/3 is 2 but 7/2 is 3.5."""
    if isinstance(a, int) and isinstance(b, int) and a % b == 0:
        return a // b
    return a / b


def _equal(a: Any, b: Any) -> bool:
    """`==` accepts anything, but true is not 1 since bool is not a number here."""
    return isinstance(a, bool) == isinstance(b, bool) and bool(a == b)


def _regex(pattern: Any, cached: bool = True) -> Any:
    """An RE2 pattern: cached when it comes from a variable, kept by the expression when
    it is a literal."""
    if not isinstance(pattern, str):
        raise TypeError(f"a regex pattern must be a string, got {_kind(pattern)}")
    return regex_cached(pattern) if cached else compile_regex(pattern)


def _match(left: Node, right: Node, fixed: Any, negate: bool, at: str) -> Node:
    """`a ~ p` searches p in `a` as text (as placeholders render it: null is empty,
    booleans are true/false) with RE2, in time linear in the text, after paying for the
    text times the pattern's size (`regex_steps`). A literal pattern is compiled once, with
    the expression."""
    def node(run: Run) -> bool:
        a, pattern = left(run), right(run)
        try:
            regex = fixed if fixed is not None else _regex(pattern)
            text = as_text(a)
        except _RUNTIME_ERRORS as exc:
            raise _Fail(f"{exc} ({at})") from None
        run.charge(1 + weight(pattern) + regex_steps(regex, text), at)
        try:
            return (regex.search(text) is None) is negate
        except UnicodeError:
            raise _Fail(f"the text has a lone surrogate, which no pattern can match "
                        f"({at})") from None
    return node


_BINARY: dict[str, BinaryOp] = {
    "+": _same_kind("+", lambda a, b: a + b),
    "-": _numeric("-", lambda a, b: a - b),
    "*": _numeric("*", lambda a, b: a * b),
    "/": _numeric("/", _divide),
    "%": _numeric("%", lambda a, b: a % b),
    "==": _equal,
    "!=": lambda a, b: not _equal(a, b),
    ">": _same_kind(">", lambda a, b: a > b),
    ">=": _same_kind(">=", lambda a, b: a >= b),
    "<": _same_kind("<", lambda a, b: a < b),
    "<=": _same_kind("<=", lambda a, b: a <= b),
}
Function = tuple[int, int | None, Callable[[list[Any], Run], Any]]


def _unary(fn: Callable[[Any], Any], check: Callable[[Any], bool] | None = None,
           what: str = "") -> Function:
    def call(args: list[Any], run: Run) -> Any:
        if check is not None and not check(args[0]):
            raise TypeError(f"needs {what}, got {_kind(args[0])}")
        return fn(args[0])
    return (1, 1, call)


def _extreme(pick: Callable[[list[Any]], Any]) -> Function:
    """min/max take several values or one list, all numbers or all strings."""
    def call(args: list[Any], run: Run) -> Any:
        items = list(args[0]) if len(args) == 1 and isinstance(args[0], list | tuple) else args
        if not items:
            raise ValueError("needs at least one value")
        if all(_is_num(v) for v in items) or all(isinstance(v, str) for v in items):
            return pick(items)
        raise TypeError("needs all numbers or all strings")
    return (1, None, call)


def _clock(fn: Callable[[datetime], Any]) -> Function:
    return (0, 0, lambda args, run: fn(run.now))


_FUNCTIONS: dict[str, Function] = {
    "year": _clock(lambda n: n.year),
    "month": _clock(lambda n: n.month),
    "day": _clock(lambda n: n.day),
    "weekday": _clock(lambda n: n.isoweekday()),
    "week": _clock(lambda n: n.isoweekday()),
    "time": _clock(lambda n: f"{n.hour:02d}{n.minute:02d}{n.second:02d}"),  # Busybee's
    "date": _clock(lambda n: n.year * 10000 + n.month * 100 + n.day),
    "datetime": _clock(lambda n: f"{n.year:04d}-{n.month:02d}-{n.day:02d} "
                                 f"{n.hour:02d}:{n.minute:02d}:{n.second:02d}"),
    "timestamp": _clock(lambda n: int(n.timestamp())),
    "len": _unary(len, lambda v: isinstance(v, str | list | tuple | dict), "a string or list"),
    "int": _unary(int),
    "float": _unary(float),
    "str": _unary(as_text),
    "abs": _unary(abs, _is_num, "a number"),
    "lower": _unary(str.lower, lambda v: isinstance(v, str), "a string"),
    "upper": _unary(str.upper, lambda v: isinstance(v, str), "a string"),
    "min": _extreme(min),
    "max": _extreme(max),
}


class Expression:
    """A compiled expression: immutable and cached, so share it freely."""

    __slots__ = ("source", "references", "_fn")

    def __init__(self, source: str, references: tuple[tuple[str, ...], ...], fn: Node):
        self.source = source
        self.references = references
        self._fn = fn

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"

    def evaluate(self, resolve: Resolver, now: datetime) -> Any:
        """Evaluate with `resolve` for `${...}` and `now` for the time functions, within
        the limits of `expression_limits`."""
        try:
            return check_result(self._fn(Run(resolve, now)))
        except _Fail as exc:
            raise ExpressionError(str(exc), self.source) from exc.__cause__
        except LimitExceeded as exc:
            raise ExpressionLimitError(str(exc), self.source) from None
        except BpflowError:
            raise
        except Exception as exc:  # safety net: callers must only ever see ExpressionError
            raise ExpressionError(f"cannot evaluate: {exc}", self.source) from exc


def _variable(path: tuple[str, ...], text: str) -> Node:
    def node(run: Run) -> Any:
        run.steps += 1
        if run.steps >= run.checkpoint:
            run.check(text)
        try:
            return run.resolve(path)
        except BpflowError:
            raise
        except Exception as exc:
            raise _Fail(f"cannot resolve {text}: {type(exc).__name__}: {exc}") from exc
    return node


def _logic(parts: tuple[Node, ...], is_or: bool) -> Node:
    """Short-circuit `and`/`or` over truthiness; the result is always a bool."""
    def node(run: Run) -> bool:
        for part in parts:
            if bool(part(run)) is is_or:
                return is_or
        return not is_or
    return node


def _negate(inner: Node, at: str) -> Node:
    def node(run: Run) -> Any:
        value = inner(run)
        run.charge(1, at)
        if not _is_num(value):
            raise _Fail(f"unary '-' needs a number, got {_kind(value)} ({at})")
        return check_value(-value, at)
    return node


def _chain(first: Node, steps: tuple[tuple[BinaryOp, Node, str], ...]) -> Node:
    """A flat left-to-right loop, so `1+1+...+1` never recurses once per operator. Each
    operation pays one step plus its operands' weight, and its result is checked."""
    def node(run: Run) -> Any:
        acc = first(run)
        for op, right, at in steps:
            value = right(run)
            run.steps += 1 + weight(acc) + weight(value)
            if run.steps >= run.checkpoint:
                run.check(at)
            try:
                acc = op(acc, value)
            except _RUNTIME_ERRORS as exc:
                raise _Fail(f"{exc} ({at})") from None
            acc = check_value(acc, at)
        return acc
    return node


def _call(name: str, at: str, fn: Callable[..., Any], args: tuple[Node, ...]) -> Node:
    def node(run: Run) -> Any:
        values = [arg(run) for arg in args]
        run.charge(1 + sum(map(weight, values)), at)
        try:
            result = fn(values, run)
        except _RUNTIME_ERRORS as exc:
            raise _Fail(f"{name}() at {at}: {exc}") from None
        run.charge(weight(result), at)
        return check_value(result, f"{name}() at {at}")
    return node


class _Compiler:
    """Turns a lark tree into closures, collecting references and checking calls."""

    def __init__(self, source: str):
        self.source = source
        self.refs: dict[tuple[str, ...], None] = {}  # an ordered set
        self.consts: dict[Node, Any] = {}

    def at(self, tok: Token) -> str:
        return where(self.source, tok.line, tok.column)

    def const(self, value: Any) -> Node:
        def node(run: Run) -> Any:
            return value
        self.consts[node] = value
        return node

    def compile(self, tree: Tree | Token, depth: int = 0) -> Node:
        if isinstance(tree, Token):
            return self.token(tree)
        kind, kids = str(tree.data), tree.children
        if kind in ("paren", "neg", "not_", "call"):
            depth += 1
            if depth > MAX_DEPTH:
                raise ExpressionError(f"expression nests too deeply (more than {MAX_DEPTH} "
                                      "levels)", self.source)
        if kind == "paren":
            return self.compile(kids[0], depth)
        if kind in ("or_test", "and_test"):
            return _logic(tuple(self.compile(k, depth) for k in kids), kind == "or_test")
        if kind == "not_":
            inner = self.compile(kids[0], depth)
            return lambda run: not inner(run)
        if kind == "neg":
            return _negate(self.compile(kids[1], depth), self.at(kids[0]))
        if kind == "call":
            return self.call(kids[0], [self.compile(k, depth) for k in kids[1:] if k is not None])
        first, steps = self.compile(kids[0], depth), []
        if len(kids) == 3 and kids[1] in ("~", "!~"):  # comparisons never chain
            return self.match(first, kids[1], self.compile(kids[2], depth))
        for op, right_tree in zip(kids[1::2], kids[2::2], strict=True):
            steps.append((_BINARY[op], self.compile(right_tree, depth), self.at(op)))
        return _chain(first, tuple(steps))

    def match(self, left: Node, op: Token, right: Node) -> Node:
        fixed = None
        if right in self.consts:  # a literal pattern is checked now, not at run time
            try:
                fixed = _regex(self.consts[right], cached=False)
            except (TypeError, ValueError) as exc:
                raise ExpressionError(f"{exc} ({self.at(op)})", self.source) from None
        return _match(left, right, fixed, op == "!~", self.at(op))

    def call(self, name: Token, args: list[Node]) -> Node:
        if name not in _FUNCTIONS:
            raise ExpressionError(f"unknown function '{name}' at {self.at(name)} "
                                  f"(known: {', '.join(sorted(_FUNCTIONS))})", self.source)
        low, high, fn = _FUNCTIONS[name]
        if len(args) < low or (high is not None and len(args) > high):
            want = f"{low}" if low == high else f"at least {low}"
            noun = "argument" if low == 1 else "arguments"
            raise ExpressionError(f"function '{name}' takes {want} {noun}, got {len(args)} "
                                  f"({self.at(name)})", self.source)
        return _call(str(name), self.at(name), fn, tuple(args))

    def token(self, tok: Token) -> Node:
        if tok.type == "VAR":
            path = tuple(tok[2:-1].split("."))
            self.refs.setdefault(path, None)
            return _variable(path, str(tok))
        value = literal(tok)
        if isinstance(value, int) and not INT_MIN <= value <= INT_MAX:
            raise ExpressionError(f"integer {tok} at {self.at(tok)} is out of range: numbers "
                                  "must fit in 64 bits (-2**63 to 2**63 - 1)", self.source)
        if isinstance(value, float) and not math.isfinite(value):
            raise ExpressionError(f"number {tok} at {self.at(tok)} is too large to be a "
                                  "finite float", self.source)
        if isinstance(value, str) and not value.isascii() and _LONE_SURROGATE.search(value):
            raise ExpressionError(f"string at {self.at(tok)} has a lone surrogate (a "
                                  "\\ud800-\\udfff escape without its pair)", self.source)
        return self.const(value)


@functools.lru_cache(maxsize=1024)
def _compile_cached(source: str) -> Expression:
    compiler = _Compiler(source)
    fn = compiler.compile(parse(source))
    return Expression(source, tuple(compiler.refs), fn)


def compile_expression(source: str) -> Expression:
    """Parse and compile once (cached); raises ExpressionError naming what is wrong and where."""
    if not isinstance(source, str):
        raise ExpressionError(f"an expression must be a string, got {_kind(source)}")
    if len(source) > MAX_LENGTH:
        raise ExpressionError(f"expression is too long ({len(source)} characters, the limit "
                              f"is {MAX_LENGTH})", source[:100])
    if not source.strip():
        raise ExpressionError("empty expression", source)
    try:
        return _compile_cached(source)
    except RecursionError:  # only if the caller is itself already deep in its stack
        raise ExpressionError("expression nests too deeply", source) from None


def evaluate(source: str, resolve: Resolver, now: datetime) -> Any:
    """Compile (cached) and evaluate in one step, for callers that hold only text."""
    return compile_expression(source).evaluate(resolve, now)
