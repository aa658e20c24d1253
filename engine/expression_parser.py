"""The expression language's syntax: text in, a lark tree out, or one clear error.

Kept apart from `expressions`, which compiles the tree and evaluates it, so the grammar,
the decoding of literal tokens and the wording of syntax errors can be read in one place.
lark's own exceptions never escape: each becomes an `ExpressionError` that names the
position and says, as a person would, what was expected there.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedToken

from engine.errors import ExpressionError
from engine.messages import N_

# Keywords are regexes ending in \b with priority 2, so `order(...)` is a call, not `or der`.
_GRAMMAR = r"""
?start: or_test
?or_test: and_test ((_OR | "||") and_test)*
?and_test: not_test ((_AND | "&&") not_test)*
?not_test: (_NOT | "!") not_test -> not_
         | comparison
!?comparison: sum (("==" | "!=" | ">" | ">=" | "<" | "<=" | "~" | "!~") sum)?
!?sum: product (("+" | "-") product)*
!?product: unary (("*" | "/" | "%") unary)*
!?unary: "-" unary -> neg
       | atom
?atom: INT | FLOAT | STRING | TRUE | FALSE | NULL | VAR
     | NAME "(" [or_test ("," or_test)*] ")" -> call
     | "(" or_test ")" -> paren
_OR.2: /or\b/
_AND.2: /and\b/
_NOT.2: /not\b/
TRUE.2: /true\b/
FALSE.2: /false\b/
NULL.2: /null\b/
INT: /[0-9]+/
FLOAT: /[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
STRING: /"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/s
VAR: /\$\{(?:[A-Za-z_][A-Za-z0-9_-]*|[0-9]+)(?:\.(?:[A-Za-z_][A-Za-z0-9_-]*|[0-9]+))*\}/
NAME: /[A-Za-z_][A-Za-z0-9_]*/
%ignore /[ \t\r\n]+/
"""

_PARSER = Lark(_GRAMMAR, parser="lalr")
_PARSER.parse("0")  # builds the lazy lexer now, so a broken grammar fails at import
# How error messages show each terminal, and which ones to summarise as "a value" etc.
_SHOWN = {t.name: t.pattern.value.removesuffix(r"\b") for t in _PARSER.terminals}
_SHOWN.update(INT="number", FLOAT="number", STRING="string", VAR="variable", NAME="function")
_VALUE_START = {"number", "string", "variable", "function", "true", "false", "null", "(", "-",
                "not", "!"}
_COMPARISONS = {"==", "!=", ">", ">=", "<", "<=", "~", "!~"}
_OPERATORS = _COMPARISONS | {"or", "||", "and", "&&", "+", "-", "*", "/", "%"}
_LITERALS = {"TRUE": True, "FALSE": False, "NULL": None}
# Unknown escapes stay verbatim, so regex classes such as "\d" and "\b" need no doubling.
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)


def parse(source: str) -> Tree | Token:
    """The tree of `source`; raises ExpressionError naming what is wrong and where."""
    try:
        return _PARSER.parse(source)
    except LarkError as exc:
        raise _syntax_error(source, exc) from None


def literal(tok: Token) -> Any:
    """The value of a literal token: a string (escapes decoded), a number, true, false
    or null."""
    if tok.type == "STRING":
        text = _ESCAPE_RE.sub(_unescape, tok[1:-1])
        if not text.isascii():  # '\ud83d\ude00' is one emoji: join such pairs
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        return text
    if tok.type in _LITERALS:
        return _LITERALS[tok.type]
    return int(tok) if tok.type == "INT" else float(tok)


def where(source: str, line: int, column: int) -> str:
    """A position as messages give it: the line only matters in multi-line expressions."""
    return N_("line %(line)s, column %(column)s", line=line, column=column) if "\n" in source \
        else N_("column %(column)s", column=column)


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    return chr(int(code[1:], 16)) if len(code) == 5 else _ESCAPES.get(code, "\\" + code)


def _expected(names: set[str]) -> str:
    """Summarise lark's expected-terminal set the way a person would say it."""
    shown, parts = {_SHOWN.get(n, n) for n in names}, []
    if "variable" in shown:
        parts.append(N_("a value"))
        shown -= _VALUE_START
    if len(shown & _OPERATORS) > 2:
        parts.append(N_("an operator"))
        shown -= _OPERATORS
    parts += sorted(f"'{text}'" for text in shown if text != "$END")
    if "$END" in shown:
        parts.append(N_("end of expression"))
    if not parts:
        return ""
    some = parts[0]
    for one in parts[1:-1]:
        some = N_("%(some)s, %(one)s", some=some, one=one)
    return N_("%(some)s or %(last)s", some=some, last=parts[-1]) if len(parts) > 1 else some


def _syntax_error(source: str, exc: LarkError) -> ExpressionError:
    """Rephrase lark's exception as one line naming the position and what was expected."""
    if isinstance(exc, UnexpectedCharacters):
        at = where(source, exc.line, exc.column)
        if exc.char == "$":
            message = N_("malformed variable reference at %(at)s: write ${name} or ${a.b.0},"
                         " with no spaces inside the braces", at=at)
        elif exc.char in "\"'":
            message = N_("unterminated string starting at %(at)s", at=at)
        else:
            message = N_("unexpected character %(char)s at %(at)s", char=repr(exc.char), at=at)
    elif isinstance(exc, UnexpectedToken):
        tok, expected = exc.token, set(exc.accepts or exc.expected)
        if tok.type == "$END":
            message = N_("unexpected end of expression; expected %(expected)s",
                         expected=_expected(expected))
        else:
            at = where(source, tok.line, tok.column)
            message = N_("unexpected %(token)s at %(at)s; expected %(expected)s",
                         token=repr(str(tok)), at=at, expected=_expected(expected))
        before = source[:len(source) if tok.type == "$END" else tok.start_pos]
        bare = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", before)
        if expected == {"LPAR"} and bare:
            name = bare.group(1)
            message = N_("%(problem)s ('%(name)s' alone is not a value: write ${%(name)s} for a"
                         " variable)", problem=message, name=name)
        elif tok in _COMPARISONS and not {_SHOWN.get(n) for n in expected} & _COMPARISONS:
            message = N_("%(problem)s (comparisons cannot be chained; combine them with 'and')",
                         problem=message)
    else:
        message = N_("syntax error: %(error)s", error=str(exc))
    return ExpressionError(message, source)
