"""What the API's routes depend on: the store seen from the caller's tenant (`StoreDep`:
every route with a caller reads and writes their tenant only, SPEC §12), the store of
the installation for the routes without one (`InstallationDep`: signing in, guests) and
the caller (`CallerDep`, from the bearer token). `caller_from` is the one reading of an
`Authorization` header, for the routes' dependency and the short path alike: the token's
signature and expiry, then the users table (through the store's short cache of
accounts), so the caller's roles and tenant are the table's now and a disabled or
unknown account's token is refused (401). `language_of` is the language a request's
error answers speak (its `Accept-Language`, SPEC §17).

Dependencies are `async` so they run on the event loop, not on a thread each.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.security import HTTPBearer

from bpflow import languages
from bpflow.access import Caller
from bpflow.auth import TokenCache
from bpflow.errors import Unauthorized
from bpflow.store import Store
from engine.messages import N_


def store_of(app: FastAPI) -> Store:
    return app.state.store_factory()


def tokens(app: FastAPI) -> TokenCache:
    """The app's cache of verified tokens, checked against the store's users (made on
    first use: the store may not exist when the app is built)."""
    if app.state.tokens is None:
        store = store_of(app)
        app.state.tokens = TokenCache(store.secret, store.account)
    return app.state.tokens


def caller_from(app: FastAPI, authorization: str | None) -> Caller:
    """The caller an `Authorization` header value stands for (a bearer token, verified
    once, then served from the app's cache while it is valid; its account as the users
    table has it, looked up again every few seconds); Unauthorized otherwise. Read as
    FastAPI's `HTTPBearer` reads it."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if not token or scheme.lower() != "bearer":
        raise Unauthorized(N_("missing bearer token"))
    return tokens(app).verify(token)


class BearerCaller(HTTPBearer):
    """The bearer-token security scheme of the OpenAPI description, which gives the
    caller (or raises Unauthorized) rather than the raw credentials."""

    async def __call__(self, request: Request) -> Caller:  # type: ignore[override]
        return caller_from(request.app, request.headers.get("authorization"))


bearer = BearerCaller(scheme_name="HTTPBearer", auto_error=False,
                      description="a token from POST /api/auth/token")


async def _installation(request: Request) -> Store:
    return store_of(request.app)


async def _store(request: Request, caller: Annotated[Caller, Depends(bearer)]) -> Store:
    return store_of(request.app).of(caller.tenant)


PROXY_HOPS_ENV = "REFLEX_TRUSTED_PROXY_HOPS"  # Reflex's own setting: one for app and API


def trusted_proxy_hops() -> int:
    """How many reverse proxies in front of the backend add to `X-Forwarded-For` (0: none,
    the header is the client's to write and is ignored). A value that is not a whole
    number counts as 0."""
    raw = os.environ.get(PROXY_HOPS_ENV, "").strip()
    return int(raw) if raw.isdigit() else 0


def client_of(scope: Mapping[str, Any]) -> str:
    """The client's address (what sign-in failures and guest messages are counted by):
    the connection's, or behind `trusted_proxy_hops()` proxies the address the farthest
    trusted one saw in `X-Forwarded-For`, as Reflex reads it for the pages' sign-in."""
    client = scope.get("client")
    address = client[0] if client else "unknown"
    hops = trusted_proxy_hops()
    if hops:
        forwarded = b",".join(v for k, v in scope.get("headers", ()) if k == b"x-forwarded-for")
        seen = [ip.strip() for ip in forwarded.decode("latin-1").split(",") if ip.strip()]
        if len(seen) >= hops:
            address = seen[-hops][:64]
    return address


def language_of(scope: Mapping[str, Any]) -> str:
    """The language of ours a request's `Accept-Language` asks for most, else English."""
    for key, value in scope.get("headers", ()):
        if key == b"accept-language":
            return languages.best(value.decode("latin-1"))
    return languages.DEFAULT


async def _client(request: Request) -> str:
    return client_of(request.scope)


StoreDep = Annotated[Store, Depends(_store)]
InstallationDep = Annotated[Store, Depends(_installation)]
CallerDep = Annotated[Caller, Depends(bearer)]
ClientDep = Annotated[str, Depends(_client)]
