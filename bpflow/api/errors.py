"""The API's one error map: which exception is answered with which status, headers and
`{"detail": ...}` (`ERRORS`, a table), `answer` that applies it, `register` that makes it
the app's exception handlers, and `responses` that documents error statuses in OpenAPI.

The short path (`bpflow.api.hot`) answers the errors of its steps with `answer` too.

401 no valid token, 403 role or addressee violation, 404 what does not exist or is not
the caller's to see, 409 state conflicts (a used or stale bookmark, a closed approval),
413 a body over the size limit (answered before routing, `hot.Api`), 422 bad input, 429 too
many attempts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from bpflow.api.schemas import ErrorOut
from bpflow.errors import (
    Conflict,
    Forbidden,
    NotFound,
    QuotaExceeded,
    RateLimited,
    StorageQuotaExceeded,
    Tampered,
    Unauthorized,
)
from bpflow.forms import FormError
from bpflow.limits import LimitError
from engine.errors import DefinitionError, TransitionError
from engine.runtime import InputError


@dataclass(frozen=True, slots=True)
class Answer:
    """How one kind of error is answered."""

    status: int
    detail: Callable[[Any], Any] = str
    headers: Callable[[Any], dict[str, str]] | None = None


def _errors(exc: FormError | DefinitionError) -> dict[str, Any]:
    return {"errors": exc.errors}


ERRORS: dict[type[Exception], Answer] = {
    Unauthorized: Answer(401, headers=lambda _: {"WWW-Authenticate": "Bearer"}),
    Forbidden: Answer(403),
    NotFound: Answer(404),
    TransitionError: Answer(409),
    Conflict: Answer(409),
    Tampered: Answer(409),
    FormError: Answer(422, detail=_errors),
    DefinitionError: Answer(422, detail=_errors),
    InputError: Answer(422),
    LimitError: Answer(422),
    RateLimited: Answer(429, headers=lambda e: {"Retry-After": str(e.retry_after)}),
    QuotaExceeded: Answer(429),
    StorageQuotaExceeded: Answer(413),
}

STATUS_TEXT = {401: "no valid token", 403: "not allowed for this user", 404: "not found",
               409: "conflicts with the current state", 413: "request body too large",
               422: "invalid input", 429: "too many requests"}


def answer(exc: Exception) -> JSONResponse | None:
    """The answer to `exc` (by its nearest class in `ERRORS`), or None if it has none."""
    for cls in type(exc).__mro__:
        found = ERRORS.get(cls)
        if found is not None:
            return JSONResponse({"detail": found.detail(exc)}, status_code=found.status,
                                headers=found.headers(exc) if found.headers else None)
    return None


async def _handle(_request: Request, exc: Exception) -> JSONResponse:
    found = answer(exc)
    if found is None:  # registered for the classes of `ERRORS` only
        raise exc
    return found


async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    status = 422 if exc.status_code == 400 else exc.status_code  # an unparsable body
    return JSONResponse({"detail": exc.detail}, status_code=status,
                        headers=getattr(exc, "headers", None))


def register(app: FastAPI) -> None:
    """Make `ERRORS` (and the framework's own HTTP errors, a 400 as 422) the app's
    exception handlers."""
    for cls in ERRORS:
        app.add_exception_handler(cls, _handle)
    # Starlette types a handler as taking any Exception, though it calls each with the
    # class it was registered for
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI description of a route's error statuses."""
    return {c: {"model": ErrorOut, "description": STATUS_TEXT[c]} for c in codes}
