"""People's work (SPEC §10): GET /api/tasks (the ready circles the caller may act on),
and on one circle: claim, unclaim, assign (delegate) and withdraw.

Who may do each is `bpflow.access`'s answer, asked inside the step on the instance as it
is then (two people claiming at once: one gets it, the other a 409). An instance the
caller may not see is not found (404), as for every other route.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from bpflow import access
from bpflow.access import Caller
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.routes.instances import _json, seen
from bpflow.api.schemas import (
    MAX_INT,
    AssignIn,
    InstanceOut,
    TaskOut,
    WithdrawIn,
    instance_payload,
    task_payload,
)
from bpflow.errors import Conflict, Forbidden, NotFound
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from engine.instance import Instance
from engine.runtime import Engine
from engine.tasks import open_task

router = APIRouter(prefix="/api", tags=["tasks"])
CIRCLE = "/instances/{instance_id}/circles/{uri}"


@router.get("/tasks", response_model=list[TaskOut], responses=responses(401, 422))
def tasks(store: StoreDep, caller: CallerDep,
          assigned: Literal["me", "candidate", "all"] = "all",
          template: Annotated[str | None, Query(max_length=100)] = None,
          limit: Annotated[int, Query(ge=1, le=500)] = 50,
          offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0) -> Response:
    rows, total = store.tasks(caller, assigned, template, limit, offset)
    answer = _json([task_payload(store.engine, r, describe(store, r)) for r in rows])
    answer.headers["X-Total-Count"] = str(total)
    return answer


def describe(store: Store, row: Any) -> str:
    """The circle's description, from its template version (built once per process)."""
    try:
        _, template = store.template(row.template, row.version)
    except NotFound:
        return ""
    node = template.plan.nodes.get(row.circle)
    return node.circle.description if node else ""


@router.post(CIRCLE + "/claim", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409))
async def claim(instance_id: str, uri: str, store: StoreDep, caller: CallerDep) -> Response:
    def op(engine: Engine, inst: Instance) -> None:
        task = engine_task(engine, inst, uri)
        if task["assignee"] not in (None, caller.username):
            raise Conflict(f"circle '{uri}' is held by {task['assignee']}")
        if task["assignee"] is None and not access.may_claim(caller, task):
            raise Forbidden(f"circle '{uri}' waits for {access.describe(task)}")
        engine.claim(inst, uri, caller.username, caller.username)
    return await _step(store, instance_id, caller, op)


@router.post(CIRCLE + "/unclaim", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409))
async def unclaim(instance_id: str, uri: str, store: StoreDep, caller: CallerDep) -> Response:
    def op(engine: Engine, inst: Instance) -> None:
        task = engine_task(engine, inst, uri)
        if task["assignee"] is None:
            raise Conflict(f"nobody holds circle '{uri}'")
        if not access.may_unclaim(caller, task):
            raise Forbidden(f"circle '{uri}' is {task['assignee']}'s task")
        engine.unclaim(inst, uri, caller.username)
    return await _step(store, instance_id, caller, op)


@router.post(CIRCLE + "/assign", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
async def assign(instance_id: str, uri: str, body: AssignIn, store: StoreDep,
                 caller: CallerDep) -> Response:
    to = store.user(body.to)
    if to is None:
        raise NotFound(f"no user '{body.to}'")
    target = Caller.of(to)

    def op(engine: Engine, inst: Instance) -> None:
        task = engine_task(engine, inst, uri)
        if not access.may_delegate(caller, task, target):
            raise Forbidden("only the task's assignee may hand it on, to another candidate"
                            " (an admin to anyone)" if task["assignee"] == caller.username
                            or task["assignee"] is None else
                            f"circle '{uri}' is {task['assignee']}'s task")
        engine.delegate(inst, uri, target.username, caller.username)
    return await _step(store, instance_id, caller, op)


@router.post(CIRCLE + "/withdraw", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
async def withdraw(instance_id: str, uri: str, store: StoreDep, caller: CallerDep,
                   body: WithdrawIn | None = None) -> Response:
    epoch: list[int] = []

    def op(engine: Engine, inst: Instance) -> None:
        if uri not in inst.circles:
            raise NotFound(f"instance has no circle '{uri}'")
        if not access.may_withdraw(caller, inst):
            raise Forbidden("only the flow's starter (or an admin) may withdraw its work")
        epoch[:] = [inst.circles[uri].epoch]
        engine.send_back(inst, uri, "withdrawn", caller.username,
                         body.reason if body and body.reason else None)
    answer = await _step(store, instance_id, caller, op)
    Mailbox(store).close_attempt(instance_id, uri, epoch[0], "withdrawn")
    return answer


def engine_task(engine: Engine, inst: Instance, uri: str) -> dict[str, Any]:
    """The open task of circle `uri` (NotFound / 409 as the engine says)."""
    if uri not in inst.circles:
        raise NotFound(f"instance has no circle '{uri}'")
    return open_task(engine, inst, uri)


async def _step(store: Store, instance_id: str, caller: Caller, op) -> Response:
    await seen(store, instance_id, caller)
    inst = await store.apply_async(instance_id, lambda e, i: (op(e, i), i)[1])
    return _json(instance_payload(store.engine, inst, caller))
