"""Checking a new instance's inputs against the template's declared `inputs`.

Every problem is collected (missing, unknown, wrongly typed) and raised once, so the caller
can show them all at the start of an instance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.errors import BpflowError
from engine.messages import N_, joined
from engine.model import Template

INPUT_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str), "text": lambda v: isinstance(v, str),
    "email": lambda v: isinstance(v, str) and "@" in v, "date": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool), "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list), "any": lambda v: True,
}


class InputError(BpflowError, ValueError):
    """Workflow inputs that do not match the template's declared `inputs`."""


def check_inputs(template: Template, inputs: dict[str, Any]) -> None:
    """Raise one InputError listing every problem; a template that declares no inputs
    accepts any."""
    declared = template.inputs
    if not declared:
        return
    problems = [N_("missing input '%(name)s'", name=k) for k in declared if k not in inputs]
    problems += [N_("unknown input '%(name)s'", name=k) for k in inputs if k not in declared]
    problems += [N_("input '%(name)s' must be %(type)s", name=k, type=t)
                 for k, t in declared.items()
                 if k in inputs and not INPUT_TYPES.get(t, INPUT_TYPES["any"])(inputs[k])]
    if problems:
        raise InputError(joined(problems))
