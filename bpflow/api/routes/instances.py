"""Instances: the paper's Start (POST /api/instances), Resume (complete or fail a waiting
circle with its bookmark) and Abort, plus the list, one instance, its history, reset
(with a preview), suspend and resume.

Each change is one move of `bpflow.moves` (shared with the pages): who may is asked
there, inside the step; an instance the caller may not see is not found. The answer is the
instance as it then is (`schemas.instance_payload`, sent as is with orjson). `start` and
`complete` are also called by the short path (`bpflow.api.hot`), by keyword: `body`,
`store`, `caller` and the path's parameters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from bpflow import moves
from bpflow.access import Caller, instance_scope, seeing
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
from bpflow.moves import nudging
from bpflow.store import Store
from engine.instance import Instance, InstanceStatus

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
    inst, started = await moves.start_async(store, caller, body.template, body.inputs,
                                            body.version, idempotency_key)
    return json_answer(instance_payload(store.engine, inst, caller), 201 if started else 200)


@router.get("", response_model=list[InstanceSummary], responses=responses(401, 422))
def instances(store: StoreDep, caller: CallerDep, response: Response,
              template: Annotated[str | None, Query(max_length=100)] = None,
              status: InstanceStatus | None = None,
              limit: Annotated[int, Query(ge=1, le=500)] = 50,
              offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0) -> list[dict[str, Any]]:
    rows, total = store.list_instances(instance_scope(caller), template, status, limit,
                                       offset)
    response.headers["X-Total-Count"] = str(total)
    return [summary_payload(r) for r in rows]


@router.get("/{instance_id}", response_model=InstanceOut, responses=responses(401, 404))
def instance(instance_id: str, store: StoreDep, caller: CallerDep) -> Response:
    """One instance; whoever was copied on it has now read it (SPEC §15)."""
    inst = _seeing(store, store.get(instance_id), caller)
    nudging.read_copies(store, caller, instance_id)
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
    inst = await moves.complete_async(store, caller, instance_id, uri, body.bookmark,
                                      body.result, client)
    return json_answer(instance_payload(store.engine, inst, caller))


@router.post("/{instance_id}/circles/{uri}/fail", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
async def fail(instance_id: str, uri: str, body: FailIn, store: StoreDep,
               caller: CallerDep) -> Response:
    inst = await moves.fail_async(store, caller, instance_id, uri, body.bookmark,
                                  body.reason)
    return json_answer(instance_payload(store.engine, inst, caller))


@router.get("/{instance_id}/reset-preview", response_model=list[str],
            responses=responses(401, 404, 422))
def reset_preview(instance_id: str, store: StoreDep, caller: CallerDep,
                  uri: Annotated[str, Query(max_length=400)],
                  scope: Literal["self", "levels", "all"] = "self",
                  levels: Annotated[int | None, Query(ge=0, le=1000)] = None) -> list[str]:
    return moves.reset_preview(store, caller, instance_id, uri, scope, levels)


@router.post("/{instance_id}/reset", response_model=InstanceOut,
             responses=responses(401, 404, 409, 422))
async def reset(instance_id: str, body: ResetIn, store: StoreDep,
                caller: CallerDep) -> Response:
    return _answer(store, caller, await moves.reset_async(
        store, caller, instance_id, body.uri, body.scope, body.levels))


@router.post("/{instance_id}/abort", response_model=InstanceOut,
             responses=responses(401, 404, 409, 422))
async def abort(instance_id: str, store: StoreDep, caller: CallerDep,
                body: AbortIn | None = None) -> Response:
    return _answer(store, caller, await moves.control_async(
        store, caller, instance_id, "abort", body.reason if body else None))


@router.post("/{instance_id}/suspend", response_model=InstanceOut,
             responses=responses(401, 404, 409))
async def suspend(instance_id: str, store: StoreDep, caller: CallerDep) -> Response:
    return _answer(store, caller, await moves.control_async(store, caller, instance_id,
                                                            "suspend"))


@router.post("/{instance_id}/resume", response_model=InstanceOut,
             responses=responses(401, 404, 409))
async def resume(instance_id: str, store: StoreDep, caller: CallerDep) -> Response:
    return _answer(store, caller, await moves.control_async(store, caller, instance_id,
                                                            "resume"))


def _seeing(store: Store, inst: Instance, caller: Caller) -> Instance:
    """The instance if the caller may see it (its starter, admins, the people it asked)."""
    return seeing(caller, inst, lambda: store.mail_about(caller.id, inst.id))


def _answer(store: Store, caller: Caller, inst: Instance) -> Response:
    return json_answer(instance_payload(store.engine, inst, caller))
