"""`Api`, the FastAPI app, which guards every request under `/api` before routing, and
`HotPaths`, the short path it first offers the paper's two requests and signals to.

The guard (`Api.__call__`, SPEC §13): every answer carries the security headers
(`SECURITY_HEADERS`: no content sniffing, no framing) and names the backend process that
served it (`X-Bpflow-Backend`, SPEC §14a: `bpflow.logs.backend_name`); a body over
`max_body` bytes (`max_upload` for an upload) is answered 413 (announced by
Content-Length, or counted while it is read); a JSON body is parsed once, strictly
(`bpflow.limits.parse`), and one that breaks a limit is answered 422 `{"detail":
"..."}`; the body is then replayed to the framework.
Paths outside `/api` (the Reflex backend mounted inside this app) pass untouched.

The short path (`HotPaths`) answers POST /api/instances, POST .../complete and POST
/api/signals/{name} without the framework's per-request machinery (middleware layers,
dependency solving, matching against every route): on this hardware that was about 40 % of
the time the server held the GIL for them. It is the same route, only reached sooner: the
route's own path pattern, the body model its endpoint declares (validating the value the
guard parsed), the route's path parameters validated by their own declarations (a name's
pattern), the routes' reading of the bearer token (`deps.caller_from`), the endpoint's
header (`Idempotency-Key`, checked as its model checks it:
`schemas.valid_idempotency_key`), the endpoint function itself and the one error map
(`errors.answer`).
"""

from __future__ import annotations

import asyncio
import email.message
import inspect
import os
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute, APIRouter

from bpflow import limits, logs, metrics, tracing
from bpflow.api.deps import caller_from, client_of, language_of, store_of
from bpflow.api.errors import answer, message, say
from bpflow.api.schemas import valid_idempotency_key
from bpflow.errors import Unauthorized
from engine.messages import N_

SECURITY_HEADERS = ((b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                    (b"content-security-policy", b"frame-ancestors 'none'"))
BACKEND_HEADER = b"x-bpflow-backend"
METRICS_PATH = "/metrics"  # Prometheus' scrape (SPEC §18), outside /api
UPLOADS = "/api/files"  # the one path whose bodies are files (`max_upload`)
NO_JSON = object()  # no body, a body that is not JSON, or one not sent as JSON


class Api(FastAPI):
    """The API app (and, mounted in Reflex, the frame of the whole backend): security
    headers on every HTTP answer; the guard of every `/api` request, then the short path
    for the paper's two requests (start, complete), then the framework."""

    hot: HotPaths | None = None
    counted: bool = True  # requests counted in the metrics (`BPFLOW_METRICS=0`: not)
    max_body: int = limits.MAX_BODY
    max_upload: int = limits.MAX_BODY  # of POST /api/files: a file and its form's fields
    _headers: tuple[int, tuple[tuple[bytes, bytes], ...]] | None = None  # (pid, headers)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        status = [500]  # the answer's, as `_secured` passes it on (the metrics)
        send = _secured(send, self._answer_headers(), status)  # the API's and the pages'
        path = scope.get("path", "")
        if path == METRICS_PATH:
            await self._metrics(scope, receive, send)
            return
        if not (path.startswith("/api/") or path == "/api"):
            await super().__call__(scope, receive, send)
            return
        traced = tracing.active()
        if not (self.counted or traced):
            await self._api(scope, receive, send)
            return
        began = time.perf_counter()
        if not traced:  # counted only: no span to open (the usual case)
            try:
                await self._api(scope, receive, send)
            finally:
                metrics.request(getattr(scope.get("route"), "path", None)
                                or metrics.UNMATCHED, scope["method"], status[0],
                                time.perf_counter() - began)
            return
        with tracing.span("HTTP " + scope["method"]) as current:
            try:
                await self._api(scope, receive, send)
            finally:
                route = getattr(scope.get("route"), "path", None) or metrics.UNMATCHED
                if self.counted:
                    metrics.request(route, scope["method"], status[0],
                                    time.perf_counter() - began)
                if current is not None:
                    current.update_name(f"HTTP {scope['method']} {route}")
                    current.set_attribute("http.route", route)
                    current.set_attribute("http.response.status_code", status[0])

    async def _metrics(self, scope, receive, send) -> None:
        """GET /metrics (SPEC §18): the metrics token, or a client on loopback."""
        client = (scope.get("client") or (None,))[0]
        if not metrics.allowed(_header(scope, b"authorization"), client):
            await _refuse(scope, receive, send, 403, "metrics: a metrics token is needed")
            return
        store = self.state.store_factory()
        text, media = await asyncio.to_thread(metrics.exposition, store)
        await Response(text, media_type=media)(scope, receive, send)

    async def _api(self, scope, receive, send) -> None:
        """The guard, then the short path, then the framework."""
        value = NO_JSON
        length, media = _body_headers(scope)
        if length != 0:  # a body, or perhaps one (chunked; HTTP/2 needs no Content-Length)
            limit = self.max_upload if scope.get("path") == UPLOADS else self.max_body
            if length is not None and length > limit:
                await _refuse(scope, receive, send, 413, self._too_large(scope, limit))
                return
            body = await _read_body(receive, limit)
            if body is None:
                await _refuse(scope, receive, send, 413, self._too_large(scope, limit))
                return
            if body and _is_json(media):
                try:
                    value = limits.parse(body)
                except limits.NotJson:
                    pass  # the framework's answer (422 json_invalid)
                except limits.LimitError as exc:
                    await _refuse(scope, receive, send, 422,
                                  message(exc, language_of(scope)))
                    return
            receive = _replay(body, receive)
        if self.hot is None or not await self.hot(scope, receive, send, value):
            await super().__call__(scope, receive, send)

    def _answer_headers(self) -> tuple[tuple[bytes, bytes], ...]:
        """The headers every answer gets: the security headers and this process's name
        (worked out once per process: a server's workers may be forked from one)."""
        pid = os.getpid()
        if self._headers is None or self._headers[0] != pid:
            name = logs.backend_name().encode("ascii", "replace")
            self._headers = (pid, (*SECURITY_HEADERS, (BACKEND_HEADER, name)))
        return self._headers[1]

    def _too_large(self, scope, limit: int) -> str:
        return say(N_("the request body is larger than %(limit)s bytes", limit=limit),
                   language_of(scope))


class HotPaths:
    """POST requests to the routes of `endpoints` in `routers` (which the app includes as
    they are, with no further prefix), answered without the framework.

    Only requests whose outcome the framework would not change take it: a JSON body that
    validates against the endpoint's model, and a valid bearer token. Anything else (no
    or bad token, an invalid body, another content type) is left to the framework, so
    each such error keeps the exact answer the routes and the OpenAPI description give.
    Errors of the step itself are answered by the app's error map."""

    def __init__(self, app: FastAPI, routers: list[APIRouter],
                 endpoints: list[Callable[..., Any]]):
        self.app = app
        self.routes = [(route, _body_model(route.endpoint)) for router in routers
                       for route in router.routes
                       if isinstance(route, APIRoute) and route.endpoint in endpoints
                       and "POST" in (route.methods or set())]
        if len(self.routes) != len(endpoints):
            raise ValueError("every short-path endpoint needs a POST route in the router")
        self.served = 0  # requests answered here rather than by the framework
        self.wants_client = {route.path: "client" in inspect.signature(route.endpoint).parameters
                             for route, _ in self.routes}
        self.wants_key = {route.path: "idempotency_key" in
                          inspect.signature(route.endpoint).parameters
                          for route, _ in self.routes}

    async def __call__(self, scope, receive, send, parsed: Any) -> bool:
        """True when the request was answered here; `parsed` is its body as the guard
        parsed it (`NO_JSON` if it has none that is JSON), and `receive` replays it."""
        if parsed is NO_JSON or scope["method"] != "POST":
            return False
        found = next(((m, route, model) for route, model in self.routes
                      if (m := route.path_regex.match(scope["path"])) is not None), None)
        if found is None:
            return False
        match, route, model = found
        scope["route"] = route  # the route's template, for the metrics (as routing sets it)
        extra: dict[str, Any] = {}
        if self.wants_key[route.path]:
            key = extra["idempotency_key"] = _header(scope, b"idempotency-key")
            if key is not None and not valid_idempotency_key(key):
                return False  # the framework answers its 422
        try:
            data = model.model_validate(parsed)
            caller = caller_from(self.app, _header(scope, b"authorization"))
        except (ValueError, Unauthorized):
            return False  # the framework answers (a 401, a 422, ...)
        params = _path_params(route, match.groupdict())
        if params is None:
            return False  # the framework answers its 422
        self.served += 1
        try:
            if self.wants_client[route.path]:
                extra["client"] = client_of(scope)
            store = store_of(self.app).of(caller.tenant)  # as deps.StoreDep gives it
            response = await route.endpoint(body=data, store=store, caller=caller, **extra,
                                            **params)
        except Exception as exc:
            response = answer(exc, language_of(scope))
            if response is None:
                raise
        await response(scope, receive, send)
        return True


def _path_params(route: APIRoute, values: dict[str, str]) -> dict[str, Any] | None:
    """The route's path parameters as its endpoint declares them (type, pattern), or None
    when one breaks its declaration."""
    params = {}
    for field in route.dependant.path_params:
        value, errors = field.validate(values[field.alias], {}, loc=("path", field.alias))
        if errors:
            return None
        params[field.name] = value
    return params


def _body_model(endpoint: Callable[..., Any]) -> Any:
    """The model of the endpoint's `body` parameter."""
    return inspect.signature(endpoint, eval_str=True).parameters["body"].annotation


def _header(scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _body_headers(scope) -> tuple[int | None, str | None]:
    """The request's Content-Length (None if absent or unreadable) and Content-Type."""
    length, media = None, None
    for key, value in scope["headers"]:
        if key == b"content-length":
            length = int(value) if value.isdigit() else None
        elif key == b"content-type":
            media = value.decode("latin-1")
    return length, media


async def _read_body(receive, limit: int) -> bytes | None:
    """The whole request body, or None once it is over `limit` bytes (counted as it
    arrives, whatever Content-Length said)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)  # the client left; the framework will notice
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay(body: bytes, receive):
    """A `receive` giving the whole body first, then what `receive` gives (a
    disconnect)."""
    sent = False

    async def again():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return again


def _secured(send, headers: tuple[tuple[bytes, bytes], ...], status: list[int]):
    """`send` with `headers` added to the start of the answer, whose status it puts in
    `status[0]`."""
    async def secured(message):
        if message["type"] == "http.response.start":
            status[0] = message["status"]
            message = {**message, "headers": [*message.get("headers", ()), *headers]}
        await send(message)
    return secured


async def _refuse(scope, receive, send, status: int, detail: str) -> None:
    await JSONResponse({"detail": detail}, status_code=status)(scope, receive, send)


def _is_json(media: str | None) -> bool:
    """Whether the framework reads a body of this Content-Type as JSON (as FastAPI
    decides it: application/json or application/*+json)."""
    if media is None:
        return False
    if media.split(";", 1)[0].strip().lower() == "application/json":
        return True
    message = email.message.Message()
    message["content-type"] = media
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")
