"""The short path: `Api`, the FastAPI app that first offers each request to `HotPaths`,
which answers the paper's two requests (POST /api/instances, POST .../complete) without
the framework's per-request machinery (middleware layers, dependency solving, matching
against every route): on this hardware that was about 40 % of the time the server held
the GIL for them.

It is the same route, only reached sooner: the route's own path pattern, the body model
its endpoint declares, the routes' reading of the bearer token (`deps.caller_from`), the
endpoint function itself and the one error map (`errors.answer`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, APIRouter

from bpflow.api.deps import caller_from, store_of
from bpflow.api.errors import answer
from bpflow.errors import Unauthorized


class Api(FastAPI):
    """The API app, with the paper's two requests (start, complete) on a short path."""

    hot: HotPaths | None = None

    async def __call__(self, scope, receive, send) -> None:
        if self.hot is None or not await self.hot(scope, receive, send):
            await super().__call__(scope, receive, send)


class HotPaths:
    """POST requests to the routes of `endpoints` in `router` (which the app includes as
    it is, with no further prefix), answered without the framework.

    Only requests whose outcome the framework would not change take it: a JSON body that
    validates against the endpoint's model, and a valid bearer token. Anything else (no
    or bad token, invalid or oversized body, another content type) is handed to the
    framework with the body replayed, so each such error keeps the exact answer the
    routes and the OpenAPI description give. Errors of the step itself are answered by
    the app's error map."""

    MAX_BODY = 1 << 20

    def __init__(self, app: FastAPI, router: APIRouter, endpoints: list[Callable[..., Any]]):
        self.app = app
        self.routes = [(route, _body_model(route.endpoint)) for route in router.routes
                       if isinstance(route, APIRoute) and route.endpoint in endpoints
                       and "POST" in route.methods]
        if len(self.routes) != len(endpoints):
            raise ValueError("every short-path endpoint needs a POST route in the router")
        self.served = 0  # requests answered here rather than by the framework

    async def __call__(self, scope, receive, send) -> bool:
        """True when the request was answered here."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return False
        found = next(((m, route, model) for route, model in self.routes
                      if (m := route.path_regex.match(scope["path"])) is not None), None)
        if found is None:
            return False
        match, route, model = found
        body, whole = await _read_body(receive, self.MAX_BODY)
        caller = None
        if whole and _is_json(scope):
            try:
                data = model.model_validate_json(body)
                caller = caller_from(self.app, _header(scope, b"authorization"))
            except (ValueError, Unauthorized):
                caller = None
        if caller is None:  # the framework answers (a 401, a 422, ...)
            await FastAPI.__call__(self.app, scope, _replay(body, whole, receive), send)
            return True
        self.served += 1
        params = {name: route.param_convertors[name].convert(value)
                  for name, value in match.groupdict().items()}
        try:
            response = await route.endpoint(body=data, store=store_of(self.app),
                                            caller=caller, **params)
        except Exception as exc:
            response = answer(exc)
            if response is None:
                raise
        await response(scope, receive, send)
        return True


def _body_model(endpoint: Callable[..., Any]) -> Any:
    """The model of the endpoint's `body` parameter."""
    return inspect.signature(endpoint, eval_str=True).parameters["body"].annotation


def _header(scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def _read_body(receive, limit: int) -> tuple[bytes, bool]:
    """The request body (at most about `limit` bytes) and whether that is all of it."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > limit:
            return b"".join(chunks), False


def _replay(body: bytes, whole: bool, receive):
    """A `receive` giving what was read first, then the rest from `receive`."""
    sent = False

    async def again():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not whole}
        return await receive()
    return again


def _is_json(scope) -> bool:
    media = (_header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")
