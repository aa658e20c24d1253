"""The API's one error map: which exception is answered with which status, headers and
`{"detail": ...}` (`ERRORS`, a table), `answer` that applies it, `register` that makes it
the app's exception handlers, and `responses` that documents error statuses in OpenAPI.

An answer speaks the language the request's `Accept-Language` asks for (SPEC §17;
`deps.language_of`), else English: only its human words change, never its status, its
headers, its shape, the codes, paths and field names in it. A message the services marked
(`N_`, `engine.messages`) is said from the catalogs (`bpflow.catalogs`); so are the
framework's validation messages (by their `type`, `VALIDATION`) and its few phrases
(`FRAMEWORK`). Anything never marked stays as it was written. In English every answer is
what it was before there were languages: the catalogs are read only for another one.

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
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from bpflow.api.deps import language_of
from bpflow.api.schemas import ErrorOut
from bpflow.errors import (
    Conflict,
    Forbidden,
    NotFound,
    QuotaExceeded,
    RateLimited,
    Refused,
    StorageQuotaExceeded,
    Tampered,
    Unauthorized,
)
from bpflow.files import FileRefused, TooLarge
from bpflow.forms import FormError
from bpflow.languages import DEFAULT
from bpflow.limits import LimitError
from bpflow.moves import BadComment
from engine.errors import DefinitionError, ReturnTargetError, TransitionError
from engine.messages import N_
from engine.runtime import InputError


def say(text: Any, lang: str) -> Any:
    """A message in `lang`: a marked one from the catalogs, any other as it is."""
    if lang == DEFAULT or not isinstance(text, str):
        return text
    from bpflow import catalogs  # Babel and the catalogs: read when first needed
    return catalogs.say(lang, text)


def message(exc: BaseException, lang: str) -> str:
    """What an error says, in `lang` (its message, if it was marked)."""
    if lang == DEFAULT:
        return str(exc)
    from bpflow import catalogs
    return catalogs.explain(exc, lang)


def text_of(exc: BaseException) -> str:
    """An error's message as it was raised: marked (`N_`, so a `Text` the answer says in
    the request's language) or not. For a route's own `HTTPException(status, ...)`."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)


@dataclass(frozen=True, slots=True)
class Answer:
    """How one kind of error is answered: `detail(exc, lang)` is its `detail`."""

    status: int
    detail: Callable[[Any, str], Any] = message
    headers: Callable[[Any], dict[str, str]] | None = None


def _form_errors(exc: FormError, lang: str) -> dict[str, Any]:
    """`{"errors": {field: message}}`, each message in `lang`."""
    if lang == DEFAULT:
        return {"errors": exc.errors}
    return {"errors": {field: say(text, lang) for field, text in exc.errors.items()}}


def _analysis_errors(exc: DefinitionError, lang: str) -> dict[str, Any]:
    """`{"errors": [{"code", "path", "message"}, ...]}`, each message in `lang`."""
    if lang == DEFAULT:
        return {"errors": exc.errors}
    return {"errors": [{**e, "message": say(e.get("message"), lang)} if "message" in e
                       else e for e in exc.errors]}


ERRORS: dict[type[Exception], Answer] = {
    Unauthorized: Answer(401, headers=lambda _: {"WWW-Authenticate": "Bearer"}),
    Forbidden: Answer(403),
    NotFound: Answer(404),
    TransitionError: Answer(409),
    Conflict: Answer(409),
    Tampered: Answer(409),
    FormError: Answer(422, detail=_form_errors),
    DefinitionError: Answer(422, detail=_analysis_errors),
    InputError: Answer(422),
    ReturnTargetError: Answer(422),
    LimitError: Answer(422),
    Refused: Answer(422),
    RateLimited: Answer(429, headers=lambda e: {"Retry-After": str(e.retry_after)}),
    QuotaExceeded: Answer(429),
    StorageQuotaExceeded: Answer(413),
    FileRefused: Answer(422),
    TooLarge: Answer(413),
    BadComment: Answer(422),
}

STATUS_TEXT = {401: "no valid token", 403: "not allowed for this user", 404: "not found",
               409: "conflicts with the current state", 413: "request body too large",
               422: "invalid input", 429: "too many requests"}


# The framework's validation messages (422 `{"detail": [{"type", "loc", "msg", ...}]}`)
# by their `type`, with the values of their `ctx`; in English the framework's own `msg`
# stays (its words are a little richer: "at least 1 character"); a type not listed here
# keeps it in every language.
VALIDATION = {
    "missing": N_("Field required"),
    "extra_forbidden": N_("Extra inputs are not permitted"),
    "string_type": N_("Input should be a valid string"),
    "string_too_short": N_("String should have at least %(min_length)s characters"),
    "string_too_long": N_("String should have at most %(max_length)s characters"),
    "string_pattern_mismatch": N_("String should match pattern '%(pattern)s'"),
    "int_type": N_("Input should be a valid integer"),
    "int_parsing": N_("Input should be a valid integer, unable to parse string as an "
                      "integer"),
    "int_from_float": N_("Input should be a valid integer, got a number with a fractional "
                         "part"),
    "float_type": N_("Input should be a valid number"),
    "float_parsing": N_("Input should be a valid number, unable to parse string as a "
                        "number"),
    "bool_type": N_("Input should be a valid boolean"),
    "bool_parsing": N_("Input should be a valid boolean, unable to interpret input"),
    "dict_type": N_("Input should be a valid dictionary"),
    "model_attributes_type": N_("Input should be a valid dictionary or object to extract "
                                "fields from"),
    "list_type": N_("Input should be a valid list"),
    "literal_error": N_("Input should be %(expected)s"),
    "enum": N_("Input should be %(expected)s"),
    "greater_than": N_("Input should be greater than %(gt)s"),
    "greater_than_equal": N_("Input should be greater than or equal to %(ge)s"),
    "less_than": N_("Input should be less than %(lt)s"),
    "less_than_equal": N_("Input should be less than or equal to %(le)s"),
    "too_short": N_("List should have at least %(min_length)s items"),
    "too_long": N_("List should have at most %(max_length)s items"),
    "json_invalid": N_("JSON decode error"),
    "value_error": N_("Value error, %(error)s"),
}
# The framework's phrases for what no route answers (Starlette's `HTTPException`s)
FRAMEWORK = (N_("Not Found"), N_("Method Not Allowed"),
             N_("There was an error parsing the body"))


def _validation_message(error: dict[str, Any], lang: str) -> str:
    """A validation error's `msg` in `lang` (the `error` of a `value_error` is the
    validator's exception: its own message, said in `lang` if it was marked)."""
    text = VALIDATION.get(error.get("type", ""))
    if text is None:
        return error.get("msg", "")
    ctx = dict(error.get("ctx") or {})
    if isinstance(ctx.get("error"), BaseException):
        ctx["error"] = message(ctx["error"], lang)
    from bpflow import catalogs
    return catalogs.translate(lang, text, **ctx)


def answer(exc: Exception, lang: str = DEFAULT) -> JSONResponse | None:
    """The answer to `exc` (by its nearest class in `ERRORS`) in `lang`, or None if it has
    none."""
    for cls in type(exc).__mro__:
        found = ERRORS.get(cls)
        if found is not None:
            return JSONResponse({"detail": found.detail(exc, lang)}, status_code=found.status,
                                headers=found.headers(exc) if found.headers else None)
    return None


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    found = answer(exc, language_of(request.scope))
    if found is None:  # registered for the classes of `ERRORS` only
        raise exc
    return found


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    status = 422 if exc.status_code == 400 else exc.status_code  # an unparsable body
    lang = language_of(request.scope)
    detail = exc.detail
    if lang != DEFAULT and isinstance(detail, str):
        from bpflow import catalogs
        detail = catalogs.say(lang, detail) if isinstance(detail, catalogs.Text) else \
            catalogs.translate(lang, detail) if detail in FRAMEWORK else detail
    return JSONResponse({"detail": detail}, status_code=status,
                        headers=getattr(exc, "headers", None))


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """The framework's answer to a request its models refuse (422, every error with its
    `type` and `loc`), each `msg` in the request's language."""
    lang = language_of(request.scope)
    errors = exc.errors()
    if lang != DEFAULT:
        errors = [{**e, "msg": _validation_message(e, lang)} for e in errors]
    return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


def register(app: FastAPI) -> None:
    """Make `ERRORS` (and the framework's own HTTP errors, a 400 as 422, and its
    validation errors) the app's exception handlers."""
    for cls in ERRORS:
        app.add_exception_handler(cls, _handle)
    # Starlette types a handler as taking any Exception, though it calls each with the
    # class it was registered for
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI description of a route's error statuses."""
    return {c: {"model": ErrorOut, "description": STATUS_TEXT[c]} for c in codes}
