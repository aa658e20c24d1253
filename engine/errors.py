"""One root for every error the engine raises, with context attached.

Callers catch `BpflowError`; builtin bases let generic code catch `ValueError`
or `LookupError` where that is the natural reading.
"""

from __future__ import annotations

from typing import Any


class BpflowError(Exception):
    """Root of all bpflow errors."""


class DefinitionError(BpflowError, ValueError):
    """A template that does not pass analysis; `errors` holds every problem found."""

    def __init__(self, errors: list[dict[str, Any]]):
        self.errors = errors
        lines = "; ".join(f"{e['path'] or '/'}: {e['message']}" for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        super().__init__(f"invalid template: {lines}{more}")


class ExpressionError(BpflowError, ValueError):
    """An expression that cannot be parsed or evaluated."""

    def __init__(self, message: str, source: str = ""):
        self.source = source
        super().__init__(message)


class VariableError(BpflowError, LookupError):
    """A `${...}` reference that names nothing in the variable table."""

    def __init__(self, ref: str, message: str | None = None):
        self.ref = ref
        super().__init__(message or f"variable ${{{ref}}} is not set")


class TransitionError(BpflowError):
    """An operation the instance's current state does not allow."""

    def __init__(self, message: str, *, instance: str | None = None,
                 circle: str | None = None, state: str | None = None):
        self.instance = instance
        self.circle = circle
        self.state = state
        super().__init__(message)


class BookmarkError(TransitionError):
    """A bookmark that is forged, stale or already used (the API answers 409)."""


class ReturnTargetError(BpflowError, ValueError):
    """A return (SPEC §15) to a step it may not go back to (the API answers 422)."""
