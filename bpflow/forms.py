"""The form layer: typed fields validated on the server with a message per field.

`validate` turns what a browser or an API client sent into typed values (a number stays a
number, a checkbox becomes a boolean) or raises FormError with every field's problem.
Password values are returned apart, so they never reach a result, the history or a log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from typing import Any

from bpflow.limits import INT_MAX, INT_MIN
from engine.errors import BpflowError
from engine.messages import N_
from engine.model import Field

EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+\Z")
MAX_LENGTH = {"string": 1000, "text": 20000, "email": 320, "password": 1000}
TRUE, FALSE = {"true", "on", "yes", "1"}, {"false", "off", "no", "0", ""}


class FormError(BpflowError, ValueError):
    """Per-field problems: `errors` maps a field name (or `_form`) to a message."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _number(value: Any, integer: bool) -> int | float:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, str):
        value = value.strip()
        value = int(value) if re.fullmatch(r"[+-]?\d+", value) else float(value)
    if not isinstance(value, (int, float)) or value != value or value in (float("inf"),
                                                                            float("-inf")):
        raise ValueError
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        value = int(value)
    if isinstance(value, int) and not INT_MIN <= value <= INT_MAX:
        raise OverflowError  # no database column or JSON answer holds it
    return value


def convert(field: Field, value: Any) -> Any:
    """One field's typed value; raises ValueError with a message for the person."""
    kind = field.type
    if kind in ("number", "integer"):
        try:
            return _number(value, kind == "integer")
        except OverflowError:
            raise ValueError(N_("must be between %(min)s and %(max)s", min=INT_MIN,
                                max=INT_MAX)) from None
        except (ValueError, TypeError):
            raise ValueError(N_("must be a whole number") if kind == "integer"
                             else N_("must be a number")) from None
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
            return value.strip().lower() in TRUE
        raise ValueError(N_("must be yes or no"))
    if not isinstance(value, str):
        if kind == "select" and isinstance(value, (int, float)):
            value = str(value)
        else:
            raise ValueError(N_("must be text"))
    if len(value) > MAX_LENGTH.get(kind, 1000):
        raise ValueError(N_("must be at most %(n)s characters", n=MAX_LENGTH.get(kind, 1000)))
    if kind == "email":
        value = value.strip()
        if not EMAIL.match(value):
            raise ValueError(N_("must be an email address like name@example.com"))
    elif kind == "date":
        try:
            value = date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            raise ValueError(N_("must be a date like 2026-01-31")) from None
    elif kind == "select":
        options = [str(o) for o in field.options]
        if value not in options:
            raise ValueError(N_("must be one of: %(options)s", options=", ".join(options)))
        value = field.options[options.index(value)]
    return value


Accounts = Callable[[str], "tuple[str, tuple[str, ...]] | None"]  # name -> (as stored, roles)
# a `file` field's check: (field, the value sent: a file record or its id) -> the record
# of an upload the form may hold, or ValueError with the problem (`bpflow.files.holder`)
Files = Callable[[Field, Any], "dict[str, Any]"]


def _account(field: Field, name: str, accounts: Accounts | None) -> str:
    found = accounts(name.strip()) if accounts is not None else None
    if found is None:
        raise ValueError(N_("must name a user of bpflow; there is no '%(name)s'",
                            name=name.strip()[:100]))
    username, roles = found
    if field.role is not None and field.role not in roles:
        raise ValueError(N_("must name someone in %(role)s; %(name)s is not", role=field.role,
                            name=username))
    return username


def validate(fields: tuple[Field, ...], data: dict[str, Any],
             defaults: dict[str, Any] | None = None,
             accounts: Accounts | None = None,
             files: Files | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """(values, passwords) for `data`, or FormError with a message per bad field.

    A missing field takes its (already substituted) default; a missing checkbox is false.
    A `user` field must name an enabled account (`accounts(name)` gives its username as
    stored and its roles, or None), of the field's role when it names one. A `file`
    field must hold an upload `files` accepts (its record is the value); without
    `files`, none.
    """
    if not isinstance(data, dict):
        raise FormError({"_form": N_("the form data must be an object of field values")})
    defaults = defaults or {}
    values: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    errors: dict[str, str] = {}
    for field in fields:
        label = field.label or field.name
        value = data.get(field.name)
        if _empty(value) and field.name not in data and field.name in defaults:
            value = defaults[field.name]
        if field.type == "boolean" and value is None:
            value = False
        if _empty(value):
            if field.required:
                errors[field.name] = N_("%(field)s is required", field=label)
            elif field.type != "password":
                values[field.name] = None
            continue
        try:
            if field.type == "file":
                if files is None:
                    raise ValueError(N_("must be a file uploaded with POST /api/files"))
                values[field.name] = files(field, value)
                continue
            typed = convert(field, value)
            if field.type == "user":
                typed = _account(field, typed, accounts)
        except ValueError as exc:
            errors[field.name] = N_("%(field)s %(problem)s", field=label,
                                    problem=exc.args[0] if exc.args else exc)
            continue
        if field.type == "password":
            secrets[field.name] = typed
        else:
            values[field.name] = typed
    if errors:
        raise FormError(errors)
    return values, secrets
