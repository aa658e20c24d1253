"""People's work (SPEC §10): GET /api/tasks (the ready circles the caller may act on),
and on one circle: claim, unclaim, assign (transfer), delegate and withdraw.

Each is one step of `bpflow.moves` (shared with the inbox's Tasks tab): who may do it is
`bpflow.access`'s answer, asked inside the step on the instance as it is then (two people
claiming at once: one gets it, the other a 409). An instance the caller may not see is
not found (404), as for every other route.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from bpflow import moves
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import (
    MAX_INT,
    AssignIn,
    InstanceOut,
    TaskOut,
    WithdrawIn,
    instance_payload,
    json_answer,
    task_payload,
)
from bpflow.store import Store

router = APIRouter(prefix="/api", tags=["tasks"])
CIRCLE = "/instances/{instance_id}/circles/{uri}"


@router.get("/tasks", response_model=list[TaskOut], responses=responses(401, 422))
def tasks(store: StoreDep, caller: CallerDep,
          assigned: Literal["me", "candidate", "all"] = "all",
          template: Annotated[str | None, Query(max_length=100)] = None,
          limit: Annotated[int, Query(ge=1, le=500)] = 50,
          offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0) -> Response:
    rows, total = store.tasks(caller, assigned, template, limit, offset)
    answer = json_answer([task_payload(store.engine, r, describe(store, r)) for r in rows])
    answer.headers["X-Total-Count"] = str(total)
    return answer


def describe(store: Store, row: Any) -> str:
    """The circle's description, from its template version (built once per process)."""
    return moves.circle_words(store, row.template, row.version, row.circle)[1]


@router.post(CIRCLE + "/claim", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409))
async def claim(instance_id: str, uri: str, store: StoreDep, caller: CallerDep) -> Response:
    inst = await moves.claim_async(store, caller, instance_id, uri)
    return json_answer(instance_payload(store.engine, inst, caller))


@router.post(CIRCLE + "/unclaim", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409))
async def unclaim(instance_id: str, uri: str, store: StoreDep, caller: CallerDep) -> Response:
    inst = await moves.unclaim_async(store, caller, instance_id, uri)
    return json_answer(instance_payload(store.engine, inst, caller))


@router.post(CIRCLE + "/assign", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
async def assign(instance_id: str, uri: str, body: AssignIn, store: StoreDep,
                 caller: CallerDep) -> Response:
    """Transfer (转办): the task goes to `to`, who holds it."""
    inst = await moves.transfer_async(store, caller, instance_id, uri, body.to, body.comment)
    return json_answer(instance_payload(store.engine, inst, caller))


@router.post(CIRCLE + "/delegate", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
async def delegate(instance_id: str, uri: str, body: AssignIn, store: StoreDep,
                   caller: CallerDep) -> Response:
    """Delegate (委派): `to` answers the task (its form or confirmation); the answer comes
    back to the assignee, whose sending it completes the circle."""
    inst = await moves.delegate_async(store, caller, instance_id, uri, body.to, body.comment)
    return json_answer(instance_payload(store.engine, inst, caller))


@router.post(CIRCLE + "/withdraw", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
async def withdraw(instance_id: str, uri: str, store: StoreDep, caller: CallerDep,
                   body: WithdrawIn | None = None) -> Response:
    inst = await moves.withdraw_async(store, caller, instance_id, uri,
                                     body.reason if body else None)
    return json_answer(instance_payload(store.engine, inst, caller))
