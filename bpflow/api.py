"""The REST API (SPEC §8): the paper's Start / Resume (with a bookmark) / Abort, templates,
history, stats, the mailbox and the guest endpoint, under `/api` with OpenAPI.

Errors are `{"detail": ...}`: 401 no valid token, 403 role or addressee violation, 404
what does not exist or is not the caller's to see, 409 state conflicts (a used or stale
bookmark, a closed approval), 422 bad input, 429 too many attempts.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

import orjson
from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi import Path as FastPath
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from bpflow.auth import LIFETIME_S, FailureLimiter, TokenCache, Unauthorized, issue_token
from bpflow.forms import FormError
from bpflow.interactions import Interactions
from bpflow.mailbox import Forbidden, Mailbox, RateLimited, Tampered
from bpflow.store import Conflict, NotFound, Store
from engine.errors import DefinitionError, TransitionError
from engine.instance import Instance
from engine.runtime import InputError

Json = Any
MAX_INT = 2**31 - 1  # what every database stores in an INTEGER column
AUTOMATIC = frozenset({"http", "mail", "approval", "timer", "flow", "compute"})


# ----------------------------------------------------------------- schemas
class ErrorOut(BaseModel):
    detail: Json = Field(description="what went wrong: a message, or structured errors")


class TokenIn(BaseModel):
    username: str = Field(min_length=1, max_length=100)
    password: str = Field(min_length=1, max_length=1000)


class TokenOut(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int


class TemplateSummary(BaseModel):
    name: str
    latest_version: int
    versions: list[int]


class TemplateUploaded(BaseModel):
    name: str
    version: int
    analysis: dict[str, Json]


class TemplateOut(BaseModel):
    name: str
    version: int
    body: dict[str, Json]
    analysis: dict[str, Json]
    locked: bool = Field(description="the version has instances and can never change")


class StatsOut(BaseModel):
    circles: dict[str, dict[str, int]]
    instances: dict[str, int]


class StartIn(BaseModel):
    template: str = Field(min_length=1, max_length=100)
    version: int | None = Field(default=None, ge=1, le=2**31 - 1)
    inputs: dict[str, Json] = Field(default_factory=dict)


class CircleOut(BaseModel):
    state: Literal["waiting", "success", "failure", "skipped"]
    ready: bool
    blocked: bool
    result: Json = None
    reason: str | None = None
    attempts: int
    next_attempt_at: str | None = None
    bookmark: str | None = None
    pending: dict[str, Json] | None = None


class InstanceSummary(BaseModel):
    id: str
    template: str
    version: int
    status: str
    reason: str | None = None
    user: dict[str, Json]
    created_at: str
    updated_at: str


class InstanceOut(InstanceSummary):
    variables: dict[str, Json]
    circles: dict[str, CircleOut]
    history_url: str


class EventOut(BaseModel):
    seq: int
    at: str
    kind: str
    actor: str | None = None
    circle: str | None = None
    before: Json = None
    after: Json = None
    data: Json = None


class CompleteIn(BaseModel):
    bookmark: str = Field(min_length=1, max_length=200)
    result: Json = None


class FailIn(BaseModel):
    bookmark: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=2000)


class ResetIn(BaseModel):
    uri: str = Field(min_length=1, max_length=400)
    scope: Literal["self", "levels", "all"] = "self"
    levels: int | None = Field(default=None, ge=0, le=1000)


class AbortIn(BaseModel):
    reason: str = Field(default="aborted", max_length=2000)


class MailOut(BaseModel):
    id: int
    kind: Literal["approval", "message", "guest"]
    sender: str
    subject: str
    body: str
    payload: Json = None
    created_at: str
    updated_at: str | None = None
    read: bool
    decision: str | None = None
    comment: str | None = None
    instance: str | None = None
    circle: str | None = None
    signature_ok: bool
    problem: str | None = None


class DecisionIn(BaseModel):
    decision: Literal["approved", "rejected"]
    comment: str = Field(default="", max_length=2000)


class GuestIn(BaseModel):
    name: str = Field(max_length=200)
    subject: str = Field(max_length=400)
    body: str = Field(max_length=10000)


class GuestOut(BaseModel):
    id: int


bearer = HTTPBearer(auto_error=False, description="a token from POST /api/auth/token")


async def _store(request: Request) -> Store:
    return request.app.state.store_factory()


async def _user(request: Request,
                credentials: Annotated[HTTPAuthorizationCredentials | None,
                                       Depends(bearer)] = None) -> dict[str, Any]:
    """The caller, from the bearer token (verified once, then served from a cache while
    it is valid). Dependencies are `async` so they run on the event loop, not on a
    thread each."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized("missing bearer token")
    return _tokens(request.app).verify(credentials.credentials)


def _tokens(app: FastAPI) -> TokenCache:
    """The app's cache of verified tokens (made on first use: the store may not exist
    when the app is built)."""
    if app.state.tokens is None:
        app.state.tokens = TokenCache(app.state.store_factory().secret)
    return app.state.tokens


Store_ = Annotated[Store, Depends(_store)]
User = Annotated[dict[str, Any], Depends(_user)]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {401: "no valid token", 403: "not allowed for this user", 404: "not found",
            409: "conflicts with the current state", 422: "invalid input",
            429: "too many requests"}
    return {c: {"model": ErrorOut, "description": text[c]} for c in codes}


# ------------------------------------------------------------------- app
def create_app(store_factory: Callable[[], Store] | None = None) -> FastAPI:
    """The API app; `store_factory` gives the Store (the process-wide one by default)."""
    if store_factory is None:
        from bpflow.backend import get_store
        store_factory = get_store
    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):  # served on its own (mounted in Reflex: services')
        from bpflow.backend import settle_memory
        settle_memory()
        yield

    app = Api(title="bpflow", version="1.0", openapi_url="/api/openapi.json",
                  docs_url="/api/docs", redoc_url=None, lifespan=lifespan,
                  # no OpenTelemetry here; its per-request check alone costs ~0.1 ms
                  telemetry={"tracing": False, "metrics": False, "logs": False},
                  description="Start, resume (with a bookmark) and abort business flows.")
    app.state.store_factory = store_factory
    app.state.tokens = None
    login_failures = FailureLimiter(10, 60.0)

    def admin_only(caller: dict[str, Any]) -> None:
        if "admin" not in caller["roles"]:
            raise Forbidden("only admins may do this")

    def may_drive(inst: Instance, node, caller: dict[str, Any]) -> bool:
        """Owners drive what waits for a person (a form, also one that feeds an action,
        until it is sent); what bpflow runs (HTTP, mail) and what an approver decides is
        completed by hand only by an admin (an intervention)."""
        box = node.circle.box
        if box.action_type not in AUTOMATIC or "admin" in caller["roles"]:
            return True
        return bool(box.form) and inst.circles[node.id].pending is None

    def drivable(inst: Instance, uri: str, caller: dict[str, Any]):
        node = inst.template.plan.nodes.get(uri)
        if node is None:
            raise NotFound(f"instance has no circle '{uri}'")
        if not may_drive(inst, node, caller):
            raise Forbidden(f"circle '{uri}' runs a {node.circle.box.action_type} action;"
                            " only an admin may complete or fail it by hand")
        return node

    def check_owner(inst: Instance, caller: dict[str, Any]) -> Instance:
        """The instance if the caller may see it; else the store's own 'not found'."""
        if "admin" not in caller["roles"] and inst.user.get("id") != caller["id"]:
            raise NotFound(f"no instance '{inst.id}'")  # not yours to see
        return inst

    def owned(s: Store, instance_id: str, caller: dict[str, Any]) -> Instance:
        """The instance as stored, if the caller may see it."""
        return check_owner(s.get(instance_id), caller)

    async def owner_checked(s: Store, instance_id: str, caller: dict[str, Any]) -> Instance:
        """The instance for its owner and template only (a cached copy will do: neither
        ever changes); what a step needs of its state it reads inside the step."""
        return check_owner(await s.peek_async(instance_id), caller)

    async def step(s: Store, instance_id: str, caller: dict[str, Any],
                   op: Callable[[Any, Instance], Any], status: int = 200) -> Response:
        """Apply `op` as one durable step (awaited on the event loop) and answer with
        the instance as it then is."""
        inst = await s.apply_async(instance_id, lambda e, i: (op(e, i), i)[1])
        return _json(out(s, inst, caller), status)

    def out(s: Store, inst: Instance, caller: dict[str, Any]) -> dict[str, Any]:
        """The InstanceOut answer (built here and sent as is: the schema check of the
        response model would cost more than the step itself)."""
        view = s.engine.view(inst)
        nodes = inst.template.plan.nodes
        for cid, circle in view.items():
            run = inst.circles[cid]
            circle["pending"] = _public_pending(run.pending) if run.state == "waiting" \
                else None
            if not may_drive(inst, nodes[cid], caller):
                circle["bookmark"] = None  # bpflow runs it (or an approver decides it)
        return {**_summary(inst.to_dict()), "variables": s.engine.variables(inst),
                "circles": view, "history_url": f"/api/instances/{inst.id}/history"}

    # --------------------------------------------------------------- errors
    def handler(status: int, headers: Callable[[Exception], dict[str, str]] | None = None,
                detail: Callable[[Exception], Any] = str):
        def handle(_request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": detail(exc)}, status_code=status,
                                headers=headers(exc) if headers else None)
        return handle

    app.add_exception_handler(Unauthorized, handler(401, lambda e: {"WWW-Authenticate":
                                                                       "Bearer"}))
    app.add_exception_handler(Forbidden, handler(403))
    app.add_exception_handler(NotFound, handler(404))
    for exc in (TransitionError, Conflict, Tampered):
        app.add_exception_handler(exc, handler(409))
    app.add_exception_handler(FormError, handler(422, detail=lambda e: {"errors": e.errors}))
    app.add_exception_handler(DefinitionError, handler(422, detail=lambda e: {
        "errors": e.errors}))
    app.add_exception_handler(InputError, handler(422))
    app.add_exception_handler(RateLimited, handler(429, lambda e: {
        "Retry-After": str(e.retry_after)}))

    @app.exception_handler(StarletteHTTPException)
    def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = 422 if exc.status_code == 400 else exc.status_code  # unparsable body
        return JSONResponse({"detail": exc.detail}, status_code=status,
                            headers=getattr(exc, "headers", None))

    # ----------------------------------------------------------------- auth
    @app.get("/api/health", tags=["health"])
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/auth/token", response_model=TokenOut, tags=["auth"],
              responses=_errors(401, 422, 429))
    def token(body: TokenIn, s: Store_) -> TokenOut:
        wait = login_failures.blocked(body.username)
        if wait:
            raise RateLimited(f"too many failed sign-ins; try again in {wait} seconds", wait)
        found = s.authenticate(body.username, body.password)
        if found is None:
            login_failures.hit(body.username)
            raise Unauthorized("wrong username or password")
        return TokenOut(access_token=issue_token(found, s.secret), expires_in=LIFETIME_S)

    # ------------------------------------------------------------ templates
    @app.get("/api/templates", response_model=list[TemplateSummary], tags=["templates"],
             responses=_errors(401))
    def templates(s: Store_, caller: User) -> list[dict[str, Any]]:
        return [{"name": n, "latest_version": v[-1], "versions": v}
                for n, v in s.template_versions().items()]

    @app.post("/api/templates", response_model=TemplateUploaded, status_code=201,
              tags=["templates"], responses={**_errors(401, 403, 422),
                                             200: {"model": TemplateUploaded,
                                                   "description": "identical to the latest"}})
    def upload(body: dict[str, Json], s: Store_, caller: User,
               response: Response) -> dict[str, Any]:
        admin_only(caller)
        version, created = s.put_template(body)
        if not created:
            response.status_code = 200
        _, template = s.template(body["name"], version)
        return {"name": body["name"], "version": version, "analysis": template.analysis}

    @app.get("/api/templates/{name}", response_model=TemplateOut, tags=["templates"],
             responses=_errors(401, 404))
    def template(name: str, s: Store_, caller: User,
                 version: Annotated[int | None, Query(ge=1, le=MAX_INT)] = None
                 ) -> dict[str, Any]:
        number, tpl = s.template(name, version)
        return {"name": name, "version": number, "body": tpl.body, "analysis": tpl.analysis,
                "locked": number in s.locked_versions(name)}

    @app.get("/api/templates/{name}/stats", response_model=StatsOut, tags=["templates"],
             responses=_errors(401, 404))
    def stats(name: str, s: Store_, caller: User) -> dict[str, Any]:
        if name not in s.template_versions():
            raise NotFound(f"no template '{name}'")
        return s.stats(name, None if "admin" in caller["roles"] else caller["id"])

    # ------------------------------------------------------------ instances
    @app.post("/api/instances", response_model=InstanceOut, status_code=201,
              tags=["instances"], responses=_errors(401, 404, 422))
    async def start(body: StartIn, s: Store_, caller: User) -> Response:
        return await start_instance(s, caller, body)

    async def start_instance(s: Store, caller: dict[str, Any], body: StartIn) -> Response:
        inst = await s.start_async(body.template, body.inputs, caller, body.version)
        return _json(out(s, inst, caller), 201)

    @app.get("/api/instances", response_model=list[InstanceSummary], tags=["instances"],
             responses=_errors(401, 422))
    def instances(s: Store_, caller: User, response: Response,
                  template: Annotated[str | None, Query(max_length=100)] = None,
                  status: Literal["running", "completed", "failed", "suspended",
                                  "terminated"] | None = None,
                  limit: Annotated[int, Query(ge=1, le=500)] = 50,
                  offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0) -> list[dict[str, Any]]:
        scope = None if "admin" in caller["roles"] else caller["id"]
        rows, total = s.list_instances(scope, template, status, limit, offset)
        response.headers["X-Total-Count"] = str(total)
        return [_summary(r) for r in rows]

    @app.get("/api/instances/{instance_id}", response_model=InstanceOut, tags=["instances"],
             responses=_errors(401, 404))
    def instance(instance_id: str, s: Store_, caller: User) -> Response:
        return _json(out(s, owned(s, instance_id, caller), caller))

    @app.get("/api/instances/{instance_id}/history", response_model=list[EventOut],
             tags=["instances"], responses=_errors(401, 404))
    def history(instance_id: str, s: Store_, caller: User) -> list[dict[str, Any]]:
        owned(s, instance_id, caller)
        return s.history(instance_id)

    @app.post("/api/instances/{instance_id}/circles/{uri}/complete",
              response_model=InstanceOut, tags=["instances"],
              responses=_errors(401, 403, 404, 409, 422))
    async def complete(instance_id: str, uri: str, body: CompleteIn, s: Store_,
                       caller: User) -> Response:
        return await complete_circle(s, caller, body, instance_id, uri)

    async def complete_circle(s: Store, caller: dict[str, Any], body: CompleteIn,
                              instance_id: str, uri: str) -> Response:
        node = drivable(await owner_checked(s, instance_id, caller), uri, caller)
        box = node.circle.box
        if box.form or box.confirm is not None:  # the form layer checks what is sent
            data = body.result if isinstance(body.result, dict) else {}
            if box.confirm is not None and body.result is not False:
                data = {"accept": True, **data}
            inst = await Interactions(s).submit_async(instance_id, uri, body.bookmark, data,
                                               caller["username"])
            return _json(out(s, inst, caller))
        return await step(s, instance_id, caller, lambda e, i: e.complete(
            i, uri, body.bookmark, body.result, caller["username"]))

    @app.post("/api/instances/{instance_id}/circles/{uri}/fail", response_model=InstanceOut,
              tags=["instances"], responses=_errors(401, 403, 404, 409, 422))
    async def fail(instance_id: str, uri: str, body: FailIn, s: Store_,
                   caller: User) -> Response:
        drivable(await owner_checked(s, instance_id, caller), uri, caller)
        return await step(s, instance_id, caller, lambda e, i: e.fail(
            i, uri, body.bookmark, body.reason, caller["username"]))

    @app.get("/api/instances/{instance_id}/reset-preview", response_model=list[str],
             tags=["instances"], responses=_errors(401, 404, 422))
    def reset_preview(instance_id: str, s: Store_, caller: User,
                      uri: Annotated[str, Query(max_length=400)],
                      scope: Literal["self", "levels", "all"] = "self",
                      levels: Annotated[int | None, Query(ge=0, le=1000)] = None) -> list[str]:
        inst = owned(s, instance_id, caller)
        if uri not in inst.circles:
            raise NotFound(f"instance has no circle '{uri}'")
        return s.engine.reset_preview(inst, uri, scope, _levels(scope, levels))

    @app.post("/api/instances/{instance_id}/reset", response_model=InstanceOut,
              tags=["instances"], responses=_errors(401, 404, 409, 422))
    async def reset(instance_id: str, body: ResetIn, s: Store_, caller: User) -> Response:
        inst = await owner_checked(s, instance_id, caller)
        if body.uri not in inst.template.plan.nodes:
            raise NotFound(f"instance has no circle '{body.uri}'")
        levels = _levels(body.scope, body.levels)
        return await step(s, instance_id, caller, lambda e, i: e.reset(
            i, body.uri, body.scope, levels, caller["username"]))

    @app.post("/api/instances/{instance_id}/abort", response_model=InstanceOut,
              tags=["instances"], responses=_errors(401, 404, 409, 422))
    async def abort(instance_id: str, s: Store_, caller: User,
                    body: AbortIn | None = None) -> Response:
        await owner_checked(s, instance_id, caller)
        reason = body.reason if body else "aborted"
        return await step(s, instance_id, caller, lambda e, i: e.abort(
            i, reason, caller["username"]))

    @app.post("/api/instances/{instance_id}/suspend", response_model=InstanceOut,
              tags=["instances"], responses=_errors(401, 404, 409))
    async def suspend(instance_id: str, s: Store_, caller: User) -> Response:
        await owner_checked(s, instance_id, caller)
        return await step(s, instance_id, caller, lambda e, i: e.suspend(
            i, caller["username"]))

    @app.post("/api/instances/{instance_id}/resume", response_model=InstanceOut,
              tags=["instances"], responses=_errors(401, 404, 409))
    async def resume(instance_id: str, s: Store_, caller: User) -> Response:
        await owner_checked(s, instance_id, caller)
        return await step(s, instance_id, caller, lambda e, i: e.resume(
            i, caller["username"]))

    # -------------------------------------------------------------- mailbox
    @app.get("/api/mailbox", response_model=list[MailOut], tags=["mailbox"],
             responses=_errors(401, 422))
    def mailbox(s: Store_, caller: User,
                kind: Literal["approval", "message", "guest"] | None = None,
                status: Literal["pending", "decided", "unread"] | None = None,
                limit: Annotated[int, Query(ge=1, le=500)] = 100,
                offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0) -> list[dict[str, Any]]:
        return Mailbox(s).inbox(caller, kind, status, limit, offset)

    @app.post("/api/mailbox/{mail_id}/decision", response_model=MailOut, tags=["mailbox"],
              responses=_errors(401, 403, 404, 409, 422))
    def decide(mail_id: Annotated[int, FastPath(ge=1, le=MAX_INT)], body: DecisionIn,
               s: Store_, caller: User) -> dict[str, Any]:
        return Mailbox(s).decide(mail_id, caller, body.decision, body.comment)

    @app.post("/api/guest/messages", response_model=GuestOut, status_code=201,
              tags=["guest"], responses=_errors(422, 429))
    def guest(body: GuestIn, request: Request, s: Store_) -> dict[str, int]:
        client = request.client.host if request.client else "unknown"
        return {"id": Mailbox(s).guest_message(body.name, body.subject, body.body, client)}

    app.hot = HotPaths(app, [
        (re.compile(r"/api/instances"), StartIn, start_instance),
        (re.compile(r"/api/instances/([^/]+)/circles/([^/]+)/complete"), CompleteIn,
         complete_circle)])
    return app


class Api(FastAPI):
    """The API app, with the paper's two requests (start, complete) on a short path."""

    hot: HotPaths | None = None

    async def __call__(self, scope, receive, send) -> None:
        if self.hot is None or not await self.hot(scope, receive, send):
            await super().__call__(scope, receive, send)


class HotPaths:
    """`POST /api/instances` and `POST .../complete` without the framework's per-request
    machinery (middleware layers, dependency solving, matching against every route): on
    this hardware that was about 40 % of the time the server held the GIL for them.

    Only requests whose outcome the framework would not change take it: a JSON body that
    validates against the route's model, and a valid bearer token. Anything else (no or
    bad token, invalid or oversized body, another content type) is handed to the
    framework with the body replayed, so each such error keeps the exact answer the
    routes and the OpenAPI description give. Errors of the step itself go through the
    app's own exception handlers."""

    MAX_BODY = 1 << 20

    def __init__(self, app: FastAPI,
                 routes: list[tuple[re.Pattern[str], type[BaseModel], Callable[..., Any]]]):
        self.app, self.routes = app, routes
        self.served = 0  # requests answered here rather than by the framework

    async def __call__(self, scope, receive, send) -> bool:
        """True when the request was answered here."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return False
        found = next(((m, model, endpoint) for pattern, model, endpoint in self.routes
                      if (m := pattern.fullmatch(scope["path"])) is not None), None)
        if found is None:
            return False
        match, model, endpoint = found
        body, whole = await _read_body(receive, self.MAX_BODY)
        caller = None
        if whole and _is_json(scope):
            try:
                data = model.model_validate_json(body)
                caller = self._caller(scope)
            except (ValueError, Unauthorized):
                caller = None
        if caller is None:  # the framework answers (a 401, a 422, ...)
            await FastAPI.__call__(self.app, scope, _replay(body, whole, receive), send)
            return True
        self.served += 1
        try:
            response = await endpoint(self.app.state.store_factory(), caller, data,
                                      *match.groups())
        except Exception as exc:
            handle = self._handler(exc)
            if handle is None:
                raise
            response = handle(None, exc)
        await response(scope, receive, send)
        return True

    def _caller(self, scope) -> dict[str, Any] | None:
        tokens = _tokens(self.app)
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                return tokens.verify(token.strip()) if scheme.lower() == "bearer" else None
        return None

    def _handler(self, exc: Exception):
        for cls in type(exc).__mro__:
            if cls in self.app.exception_handlers:
                return self.app.exception_handlers[cls]
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
    for name, value in scope["headers"]:
        if name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or media.endswith(b"+json")
    return False


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS), status_code=status,
                    media_type="application/json")


def _levels(scope: str, levels: int | None) -> int | None:
    if scope == "levels" and levels is None:
        raise InputError("scope 'levels' needs levels (0 or more)")
    return levels


def _summary(data: dict[str, Any]) -> dict[str, Any]:
    def iso(v: Any) -> str:
        return v if isinstance(v, str) else v.isoformat()
    return {"id": data["id"], "template": data["template"], "version": data["version"],
            "status": data["status"], "reason": data.get("reason"), "user": data["user"],
            "created_at": iso(data["created_at"]), "updated_at": iso(data["updated_at"])}


def _public_pending(pending: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the action layer is waiting on (the staged form stays private)."""
    if not pending:
        return None
    return {k: v for k, v in pending.items() if k != "form"} or {"form_submitted": True}
