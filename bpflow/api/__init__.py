"""The REST API (SPEC §8): the paper's Start / Resume (with a bookmark) / Abort,
templates, history, stats, the mailbox and the guest endpoint, under `/api` with OpenAPI.

- `create_app` (here) builds the app: the routers, the error map, the short path.
- `schemas`: the request and answer models, and the functions that build the answers.
- `errors`: the one error map (exception → status, headers, detail).
- `deps`: the store and the caller (from the bearer token) the routes depend on.
- `routes/`: one router per resource (auth, users, templates, instances, mailbox, guest,
  health, ...).
- `hot`: the app class (which guards every request: security headers, the body-size limit,
  one strict parse of a JSON body held to `bpflow.limits`) and the short path for start,
  complete and signals.
- `docs`: the Swagger UI at `/api/docs`, with its assets served here (works offline).

Errors are `{"detail": ...}`: 401 no valid token, 403 role or addressee violation, 404
what does not exist or is not the caller's to see, 409 state conflicts (a used or stale
bookmark, a closed approval), 413 a body over the size limit, 422 bad input, 429 too many
attempts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from fastapi import FastAPI

from bpflow import files, limits, metrics
from bpflow.api import errors
from bpflow.api.docs import add_docs
from bpflow.api.hot import Api, HotPaths
from bpflow.api.routes import ROUTERS, instances, signals
from bpflow.store import Store

UPLOAD_FORM = 64 << 10  # bytes an upload's request may have besides the file

__all__ = ["Api", "create_app"]


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI):  # served on its own (mounted in Reflex: the backend's)
    from bpflow import logs
    from bpflow.backend import check_secret
    from bpflow.memory import settle_memory
    if app.state.own_store:  # the process's app (`uvicorn --factory`), not one of a host's
        logs.setup("backend")
    check_secret()
    settle_memory()
    yield


def create_app(store_factory: Callable[[], Store] | None = None) -> Api:
    """The API app; `store_factory` gives the Store (the process-wide one by default).
    Request bodies may have `limits.max_body()` bytes (`BPFLOW_MAX_BODY`)."""
    own_store = store_factory is None
    if store_factory is None:
        from bpflow.backend import get_store
        store_factory = get_store
    app = Api(title="bpflow", version="1.0", openapi_url="/api/openapi.json",
              docs_url=None, redoc_url=None, lifespan=_lifespan,
              # no OpenTelemetry here; its per-request check alone costs ~0.1 ms
              telemetry={"tracing": False, "metrics": False, "logs": False},
              description="Start, resume (with a bookmark) and abort business flows.")
    app.state.own_store = own_store  # the process's: its lifespan sets up the log lines
    app.state.store_factory = store_factory
    app.state.tokens = None  # deps.tokens: made on first use
    app.max_body = limits.max_body()
    app.counted = metrics.enabled()
    if app.counted:
        metrics.start()
    app.max_upload = files.max_file_bytes() + UPLOAD_FORM  # the file and its form's fields
    for router in ROUTERS:  # any request may be refused by the guard (Api.__call__)
        app.include_router(router, responses=errors.responses(413, 422))
    add_docs(app)
    errors.register(app)
    app.hot = HotPaths(app, [instances.router, signals.router],
                       [instances.start, instances.complete, signals.signal])
    return app
