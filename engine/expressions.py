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

from engine.errors import BpflowError, ExpressionError, VariableError
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
from engine.expression_ops import (
    BINARY,
    BOOL,
    FUNCTIONS,
    LAZY,
    NUMBER,
    RETURNS,
    RUNTIME_ERRORS,
    BinaryOp,
    Static,
    is_num,
    kind_of,
    result_kind,
    static_kind,
    type_problem,
)
from engine.expression_parser import literal, parse, where
from engine.messages import N_, message_of
from engine.placeholders import as_text

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Expression", "compile_expression", "evaluate"]

MAX_LENGTH = 2000
MAX_DEPTH = 50  # parentheses, calls and unary operators nested inside each other

Resolver = Callable[[tuple[str, ...]], Any]
Node = Callable[[Run], Any]
# What the analysis knows of a `${...}` path's kind (None: nothing).
TypeOf = Callable[[tuple[str, ...]], str | None]
# An operation whose operands' kinds are known before it runs: (symbol, where, left, right).
Check = tuple[str, str, Static, Static]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _Fail(Exception):
    """A runtime failure inside the closure tree; `Expression.evaluate` adds the source."""


def _regex(pattern: Any, cached: bool = True) -> Any:
    """An RE2 pattern: cached when it comes from a variable, kept by the expression when
    it is a literal."""
    if not isinstance(pattern, str):
        raise TypeError(N_("a regex pattern must be a string, got %(kind)s",
                           kind=kind_of(pattern)))
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
        except RUNTIME_ERRORS as exc:
            raise _Fail(f"{exc} ({at})") from None
        run.charge(1 + weight(pattern) + regex_steps(regex, text), at)
        try:
            return (regex.search(text) is None) is negate
        except UnicodeError:
            raise _Fail(f"the text has a lone surrogate, which no pattern can match "
                        f"({at})") from None
    return node


class Expression:
    """A compiled expression: immutable and cached, so share it freely."""

    __slots__ = ("source", "references", "_fn", "_checks")

    def __init__(self, source: str, references: tuple[tuple[str, ...], ...], fn: Node,
                 checks: tuple[Check, ...] = ()):
        self.source = source
        self.references = references
        self._fn = fn
        self._checks = checks

    def type_problems(self, typeof: TypeOf) -> list[str]:
        """Operations that fail whatever the values are, given what the analysis knows of
        each `${...}` (`typeof`: form fields, declared inputs) besides literals and
        functions: `'a' < 1`, `${claim.amount} == 'x'` for a number field."""
        def known(side: Static) -> str | None:
            return typeof(side) if isinstance(side, tuple) else side
        return [N_("%(problem)s (%(at)s)", problem=problem, at=at)
                for symbol, at, left, right in self._checks
                if (problem := type_problem(symbol, known(left), known(right)))]

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


def _unset(var: Node, present: Callable[[Any], Any], absent: Callable[[Run], Any]) -> Node:
    """`exists` and `default`: a variable that is not set (its circle has no result, the
    key is missing) or is null answers `absent`, else `present` of its value."""
    def node(run: Run) -> Any:
        try:
            value = var(run)
        except VariableError:
            value = None
        return absent(run) if value is None else present(value)
    return node


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
        if not is_num(value):
            raise _Fail(f"unary '-' needs a number, got {kind_of(value)} ({at})")
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
            except RUNTIME_ERRORS as exc:
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
        except RUNTIME_ERRORS as exc:
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
        self.kinds: dict[Node, Static] = {}  # what is known of a node's value
        self.checks: list[Check] = []

    def at(self, tok: Tree | Token) -> str:
        if not isinstance(tok, Token):  # the grammar puts a token here: never the case
            raise ExpressionError("malformed expression tree", self.source)
        return where(self.source, tok.line or 1, tok.column or 1)

    def const(self, value: Any) -> Node:
        def node(run: Run) -> Any:
            return value
        self.consts[node] = value
        return self.typed(node, static_kind(value))

    def typed(self, node: Node, static: Static) -> Node:
        if static is not None:
            self.kinds[node] = static
        return node

    def compile(self, tree: Tree | Token, depth: int = 0) -> Node:
        if isinstance(tree, Token):
            return self.token(tree)
        kind, kids = str(tree.data), tree.children
        if kind in ("paren", "neg", "not_", "call"):
            depth += 1
            if depth > MAX_DEPTH:
                raise ExpressionError(N_("expression nests too deeply (more than %(most)s"
                                         " levels)", most=MAX_DEPTH), self.source)
        if kind == "paren":
            return self.compile(kids[0], depth)
        if kind in ("or_test", "and_test"):
            return _logic(tuple(self.compile(k, depth) for k in kids), kind == "or_test")
        if kind == "not_":
            inner = self.compile(kids[0], depth)
            return self.typed(lambda run: not inner(run), BOOL)
        if kind == "neg":
            return self.typed(_negate(self.compile(kids[1], depth), self.at(kids[0])), NUMBER)
        if kind == "call":
            args = [k for k in kids[1:] if k is not None]
            name = str(kids[0])
            if name in LAZY:
                return self.lazy(name, kids[0], args, depth)
            return self.call(kids[0], [self.compile(k, depth) for k in args])
        first, steps = self.compile(kids[0], depth), []
        if len(kids) == 3 and kids[1] in ("~", "!~"):  # comparisons never chain
            return self.typed(self.match(first, kids[1], self.compile(kids[2], depth)), BOOL)
        static = self.kinds.get(first)
        for op, right_tree in zip(kids[1::2], kids[2::2], strict=True):
            right, symbol = self.compile(right_tree, depth), str(op)
            other = self.kinds.get(right)
            if static is not None and other is not None:
                self.checks.append((symbol, self.at(op), static, other))
            static = result_kind(symbol, static, other)
            steps.append((BINARY[symbol], right, self.at(op)))
        return self.typed(_chain(first, tuple(steps)), static)

    def lazy(self, name: str, at: Tree | Token, args: list[Tree | Token], depth: int) -> Node:
        """`exists(${x})`: whether `${x}` is set and not null; `default(${x}, v)`: its value
        when it is, else `v` (evaluated only then)."""
        if len(args) != LAZY[name] or not (isinstance(args[0], Token)
                                           and args[0].type == "VAR"):
            want = N_("one ${...} variable") if name == "exists" else \
                N_("a ${...} variable and the value to use when it is not set")
            raise ExpressionError(N_("function '%(name)s' takes %(want)s (%(at)s)", name=name,
                                     want=want, at=self.at(at)), self.source)
        var = self.compile(args[0], depth)
        if name == "exists":
            return self.typed(_unset(var, lambda value: True, lambda run: False), BOOL)
        fallback = self.compile(args[1], depth)
        return _unset(var, lambda value: value, fallback)

    def match(self, left: Node, op: Tree | Token, right: Node) -> Node:
        fixed = None
        if right in self.consts:  # a literal pattern is checked now, not at run time
            try:
                fixed = _regex(self.consts[right], cached=False)
            except (TypeError, ValueError) as exc:
                raise ExpressionError(N_("%(problem)s (%(at)s)", problem=message_of(exc),
                                         at=self.at(op)), self.source) from None
        return _match(left, right, fixed, op == "!~", self.at(op))

    def call(self, name: Tree | Token, args: list[Node]) -> Node:
        if name not in FUNCTIONS:
            raise ExpressionError(N_("unknown function '%(name)s' at %(at)s (known: %(known)s)",
                                     name=str(name), at=self.at(name),
                                     known=", ".join(sorted([*FUNCTIONS, *LAZY]))),
                                  self.source)
        low, high, fn = FUNCTIONS[str(name)]
        if len(args) < low or (high is not None and len(args) > high):
            if low == high:
                message = N_("function '%(name)s' takes %(low)s argument, got %(count)s"
                             " (%(at)s)", name=str(name), low=low, count=len(args),
                             at=self.at(name)) if low == 1 else \
                    N_("function '%(name)s' takes %(low)s arguments, got %(count)s (%(at)s)",
                       name=str(name), low=low, count=len(args), at=self.at(name))
            else:
                message = N_("function '%(name)s' takes at least %(low)s argument, got"
                             " %(count)s (%(at)s)", name=str(name), low=low, count=len(args),
                             at=self.at(name)) if low == 1 else \
                    N_("function '%(name)s' takes at least %(low)s arguments, got %(count)s"
                       " (%(at)s)", name=str(name), low=low, count=len(args),
                       at=self.at(name))
            raise ExpressionError(message, self.source)
        return self.typed(_call(str(name), self.at(name), fn, tuple(args)),
                          RETURNS.get(str(name)))

    def token(self, tok: Token) -> Node:
        if tok.type == "VAR":
            path = tuple(tok[2:-1].split("."))
            self.refs.setdefault(path, None)
            return self.typed(_variable(path, str(tok)), path)
        value = literal(tok)
        if isinstance(value, int) and not INT_MIN <= value <= INT_MAX:
            raise ExpressionError(N_("integer %(value)s at %(at)s is out of range: numbers must"
                                     " fit in 64 bits (-2**63 to 2**63 - 1)", value=str(tok),
                                     at=self.at(tok)), self.source)
        if isinstance(value, float) and not math.isfinite(value):
            raise ExpressionError(N_("number %(value)s at %(at)s is too large to be a finite"
                                     " float", value=str(tok), at=self.at(tok)), self.source)
        if isinstance(value, str) and not value.isascii() and _LONE_SURROGATE.search(value):
            raise ExpressionError(N_("string at %(at)s has a lone surrogate (a \\ud800-\\udfff"
                                     " escape without its pair)", at=self.at(tok)), self.source)
        return self.const(value)


@functools.lru_cache(maxsize=1024)
def _compile_cached(source: str) -> Expression:
    compiler = _Compiler(source)
    fn = compiler.compile(parse(source))
    return Expression(source, tuple(compiler.refs), fn, tuple(compiler.checks))


def compile_expression(source: str) -> Expression:
    """Parse and compile once (cached); raises ExpressionError naming what is wrong and where."""
    if not isinstance(source, str):
        raise ExpressionError(N_("an expression must be a string, got %(kind)s",
                                 kind=kind_of(source)))
    if len(source) > MAX_LENGTH:
        raise ExpressionError(N_("expression is too long (%(length)s characters, the limit is"
                                 " %(most)s)", length=len(source), most=MAX_LENGTH), source[:100])
    if not source.strip():
        raise ExpressionError(N_("empty expression"), source)
    try:
        return _compile_cached(source)
    except RecursionError:  # only if the caller is itself already deep in its stack
        raise ExpressionError(N_("expression nests too deeply"), source) from None


def evaluate(source: str, resolve: Resolver, now: datetime) -> Any:
    """Compile (cached) and evaluate in one step, for callers that hold only text."""
    return compile_expression(source).evaluate(resolve, now)
