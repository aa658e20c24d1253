"""Instances: the paper's Start (POST /api/instances), Resume (complete or fail a waiting
circle with its bookmark) and Abort, plus the list, one instance, its history, reset
(with a preview), suspend and resume.

Only an instance's user and admins see or touch it (`bpflow.access.acting`: anyone else
gets the 'not found' of what does not exist). Changes are one durable step each, and
the answer is the instance as it then is (`schemas.instance_payload`, sent as is with
orjson). `start` and `complete` are also called by the short path (`bpflow.api.hot`),
by keyword: `body`, `store`, `caller` and the path's parameters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from bpflow import work
from bpflow.access import Caller, acting, drivable, instance_scope, seeing, startable
from bpflow.api.deps import CallerDep, ClientDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import (
    IDEMPOTENCY_KEY,
    MAX_INT,
    AbortIn,
    CompleteIn,
    EventOut,
    FailIn,
    InstanceOut,
    InstanceSummary,
    ResetIn,
    StartIn,
    instance_payload,
    json_answer,
    summary_payload,
)
from bpflow.errors import Conflict, NotFound
from bpflow.interactions import Interactions, take
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.store.public import AlreadyStarted
from engine.instance import Instance
from engine.runtime import InputError

router = APIRouter(prefix="/api/instances", tags=["instances"])


@router.post("", response_model=InstanceOut, status_code=201,
             responses={**responses(401, 403, 404, 409, 422),
                        200: {"model": InstanceOut, "description": "started with this"
                              " Idempotency-Key already: the first instance"}})
async def start(body: StartIn, store: StoreDep, caller: CallerDep,
                idempotency_key: Annotated[str | None, IDEMPOTENCY_KEY] = None) -> Response:
    """Start an instance: 403 for who is not among the template's `starters`, 409 for a
    retired template. With an `Idempotency-Key`, the same key from the same user answers
    the instance it started first (200), also for requests sent at the same moment."""
    iid = None if idempotency_key is None else store.keyed_id(caller.id, idempotency_key)
    if iid is not None:
        try:
            return _first_start(store, await asyncio.to_thread(store.get, iid), caller)
        except NotFound:
            pass  # not started yet
    try:
        inst = await store.start_async(body.template, body.inputs, caller.as_user(),
                                       body.version, instance_id=iid,
                                       admit=lambda t: startable(caller, t))
    except AlreadyStarted as exc:  # the same key, at the same moment
        return _first_start(store, exc.instance, caller)
    return json_answer(instance_payload(store.engine, inst, caller), 201)


def _first_start(store: Store, inst: Instance, caller: Caller) -> Response:
    """The instance an earlier start with the caller's key made (200)."""
    if inst.user.get("id") != caller.id:
        raise Conflict("this Idempotency-Key names another instance")
    return json_answer(instance_payload(store.engine, inst, caller))


@router.get("", response_model=list[InstanceSummary], responses=responses(401, 422))
def instances(store: StoreDep, caller: CallerDep, response: Response,
              template: Annotated[str | None, Query(max_length=100)] = None,
              status: Literal["running", "completed", "failed", "suspended",
                              "terminated"] | None = None,
              limit: Annotated[int, Query(ge=1, le=500)] = 50,
              offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0) -> list[dict[str, Any]]:
    rows, total = store.list_instances(instance_scope(caller), template, status, limit,
                                       offset)
    response.headers["X-Total-Count"] = str(total)
    return [summary_payload(r) for r in rows]


@router.get("/{instance_id}", response_model=InstanceOut, responses=responses(401, 404))
def instance(instance_id: str, store: StoreDep, caller: CallerDep) -> Response:
    inst = _seeing(store, store.get(instance_id), caller)
    return json_answer(instance_payload(store.engine, inst, caller))


@router.get("/{instance_id}/history", response_model=list[EventOut],
            responses=responses(401, 404))
def history(instance_id: str, store: StoreDep, caller: CallerDep) -> list[dict[str, Any]]:
    _seeing(store, store.get(instance_id), caller)
    return store.history(instance_id)


@router.post("/{instance_id}/circles/{uri}/complete", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
async def complete(instance_id: str, uri: str, body: CompleteIn, store: StoreDep,
                   caller: CallerDep, client: ClientDep) -> Response:
    """The caller must be the circle's assignee, or a candidate while nobody holds it
    (then completing claims it): checked in the step, on the instance as it is then."""
    inst = await work.visible_async(store, caller, instance_id)
    drivable(caller, inst, uri)
    box = inst.template.plan.nodes[uri].circle.box
    if box.form or box.confirm is not None:  # the form layer checks what is sent
        data = body.result if isinstance(body.result, dict) else {}
        if box.confirm is not None and body.result is not False:
            data = {"accept": True, **data}
        inst = await Interactions(store).submit_async(instance_id, uri, body.bookmark, data,
                                                      caller.username, client, caller)
        return json_answer(instance_payload(store.engine, inst, caller))
    return await _step(store, instance_id, caller, lambda e, i: (
        take(e, i, uri, caller), e.complete(i, uri, body.bookmark, body.result,
                                            caller.username)))


@router.post("/{instance_id}/circles/{uri}/fail", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
async def fail(instance_id: str, uri: str, body: FailIn, store: StoreDep,
               caller: CallerDep) -> Response:
    drivable(caller, await work.visible_async(store, caller, instance_id), uri)
    return await _step(store, instance_id, caller, lambda e, i: (
        take(e, i, uri, caller), e.fail(i, uri, body.bookmark, body.reason,
                                        caller.username)))


@router.get("/{instance_id}/reset-preview", response_model=list[str],
            responses=responses(401, 404, 422))
def reset_preview(instance_id: str, store: StoreDep, caller: CallerDep,
                  uri: Annotated[str, Query(max_length=400)],
                  scope: Literal["self", "levels", "all"] = "self",
                  levels: Annotated[int | None, Query(ge=0, le=1000)] = None) -> list[str]:
    inst = acting(caller, store.get(instance_id))
    if uri not in inst.circles:
        raise NotFound(f"instance has no circle '{uri}'")
    return store.engine.reset_preview(inst, uri, scope, _levels(scope, levels))


@router.post("/{instance_id}/reset", response_model=InstanceOut,
             responses=responses(401, 404, 409, 422))
async def reset(instance_id: str, body: ResetIn, store: StoreDep,
                caller: CallerDep) -> Response:
    inst = await _acted_on(store, instance_id, caller)
    if body.uri not in inst.template.plan.nodes:
        raise NotFound(f"instance has no circle '{body.uri}'")
    levels = _levels(body.scope, body.levels)
    return await _step(store, instance_id, caller, lambda e, i: e.reset(
        i, body.uri, body.scope, levels, caller.username))


@router.post("/{instance_id}/abort", response_model=InstanceOut,
             responses=responses(401, 404, 409, 422))
async def abort(instance_id: str, store: StoreDep, caller: CallerDep,
                body: AbortIn | None = None) -> Response:
    await _acted_on(store, instance_id, caller)
    reason = body.reason if body else "aborted"
    answer = await _step(store, instance_id, caller, lambda e, i: e.abort(
        i, reason, caller.username))
    await asyncio.to_thread(Mailbox(store).close_instance, instance_id)
    return answer


@router.post("/{instance_id}/suspend", response_model=InstanceOut,
             responses=responses(401, 404, 409))
async def suspend(instance_id: str, store: StoreDep, caller: CallerDep) -> Response:
    await _acted_on(store, instance_id, caller)
    return await _step(store, instance_id, caller, lambda e, i: e.suspend(
        i, caller.username))


@router.post("/{instance_id}/resume", response_model=InstanceOut,
             responses=responses(401, 404, 409))
async def resume(instance_id: str, store: StoreDep, caller: CallerDep) -> Response:
    await _acted_on(store, instance_id, caller)
    return await _step(store, instance_id, caller, lambda e, i: e.resume(
        i, caller.username))


def _seeing(store: Store, inst: Instance, caller: Caller) -> Instance:
    """The instance if the caller may see it (its starter, admins, the people it asked)."""
    return seeing(caller, inst, lambda: store.mail_about(caller.id, inst.id))


async def _acted_on(store: Store, instance_id: str, caller: Caller) -> Instance:
    """The instance, for its user and template only (a cached copy will do: neither ever
    changes), if the caller may act on it; what a step needs of its state it reads
    inside the step."""
    return acting(caller, await store.peek_async(instance_id))


async def _step(store: Store, instance_id: str, caller: Caller,
                op: Callable[[Any, Instance], Any]) -> Response:
    """Apply `op` as one durable step (awaited on the event loop) and answer with the
    instance as it then is."""
    inst = await store.apply_async(instance_id, lambda e, i: (op(e, i), i)[1])
    return json_answer(instance_payload(store.engine, inst, caller))


def _levels(scope: str, levels: int | None) -> int | None:
    if scope == "levels" and levels is None:
        raise InputError("scope 'levels' needs levels (0 or more)")
    return levels
