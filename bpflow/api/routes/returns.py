"""Returning work to an earlier step (SPEC §15, 驳回/退回):
GET /api/instances/{id}/circles/{uri}/return-targets (where it may go back to, for the
person returning it) and POST /api/instances/{id}/circles/{uri}/return `{"to", "comment"}`.

Both are `bpflow.moves.returns`: who may is `access.may_return` (a pending approver of the
circle's approval, whoever may act on its task, an admin: else 403); an instance the
caller may not see is not found (404); a circle no longer pending answers 409, a target
that is not allowed 422 with a message.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from bpflow.api.deps import CallerDep, StoreDep, language_of
from bpflow.api.errors import responses
from bpflow.api.schemas import InstanceOut, ReturnIn, ReturnTarget, instance_payload, json_answer
from bpflow.moves import returns

router = APIRouter(prefix="/api", tags=["tasks"])
CIRCLE = "/instances/{instance_id}/circles/{uri}"
Id = Annotated[str, Path(max_length=32)]
Uri = Annotated[str, Path(max_length=400)]


@router.get(CIRCLE + "/return-targets", response_model=list[ReturnTarget],
            responses=responses(401, 403, 404, 409))
def return_targets(instance_id: Id, uri: Uri, request: Request, store: StoreDep,
                   caller: CallerDep) -> list[dict[str, Any]]:
    return returns.return_targets(store, caller, instance_id, uri,
                                  language_of(request.scope))


@router.post(CIRCLE + "/return", response_model=InstanceOut,
             responses=responses(401, 403, 404, 409, 422))
def return_work(instance_id: Id, uri: Uri, store: StoreDep, caller: CallerDep,
                body: ReturnIn | None = None) -> Response:
    body = body or ReturnIn()
    inst = returns.return_work(store, caller, instance_id, uri, body.to, body.comment)
    return json_answer(instance_payload(store.engine, inst, caller))
