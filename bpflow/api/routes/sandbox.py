"""Trying a draft (SPEC §16 "Try it"): `/api/drafts/{id}/try` — `POST` starts the draft in
its sandbox (replacing the one it had), `GET` reads its state, `DELETE` deletes it, and
`POST /api/drafts/{id}/try/circles/{uri}/fill|decide|answer|fire` drive one circle. Each
answers the sandbox's state; `GET …/circles/{uri}/return-targets` lists where an approval
may be sent back to. Each route is one call of `bpflow.sandbox`, which asks
`bpflow.access` who may (the draft's author and the tenant's admins)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Request, Response

from bpflow import sandbox
from bpflow.api.deps import CallerDep, StoreDep, language_of
from bpflow.api.errors import responses
from bpflow.api.schemas import (
    MAX_INT,
    AnswerIn,
    DecisionIn,
    FillIn,
    ReturnTarget,
    TryIn,
    TryOut,
)

router = APIRouter(prefix="/api/drafts/{draft_id}/try", tags=["drafts"])
DraftId = Path(ge=1, le=MAX_INT, description="the draft's id")
Uri = Path(min_length=1, max_length=400, description="the circle's uri (a path of uris)")
MOVES = responses(401, 403, 404, 409, 422)


@router.post("", response_model=TryOut, status_code=201,
             responses=responses(401, 403, 404, 422))
def start(store: StoreDep, caller: CallerDep, body: TryIn | None = None,
          draft_id: int = DraftId) -> TryOut:
    """Start the draft's body as it is now in its sandbox, as you (422 with the analysis'
    errors while it has any). Nothing it does is sent anywhere or asks anyone."""
    return TryOut(**sandbox.start(store, caller, draft_id, (body or TryIn()).inputs))


@router.get("", response_model=TryOut, responses=responses(401, 403, 404))
def state(store: StoreDep, caller: CallerDep, draft_id: int = DraftId) -> TryOut:
    """Each circle's state, what you may do with it, and the path taken."""
    return TryOut(**sandbox.state(store, caller, draft_id))


@router.delete("", status_code=204, responses=responses(401, 403, 404))
def delete(store: StoreDep, caller: CallerDep, draft_id: int = DraftId) -> Response:
    sandbox.delete(store, caller, draft_id)
    return Response(status_code=204)


@router.post("/circles/{uri}/fill", response_model=TryOut, responses=MOVES)
def fill(body: FillIn, store: StoreDep, caller: CallerDep, draft_id: int = DraftId,
         uri: str = Uri) -> TryOut:
    """Send a ready form (or confirmation) with these values."""
    return TryOut(**sandbox.fill(store, caller, draft_id, uri, body.values))


@router.post("/circles/{uri}/decide", response_model=TryOut, responses=MOVES)
def decide(body: DecisionIn, store: StoreDep, caller: CallerDep, draft_id: int = DraftId,
           uri: str = Uri) -> TryOut:
    """Approve, reject or send back a ready approval, as its approvers would."""
    return TryOut(**sandbox.decide(store, caller, draft_id, uri, body.decision, body.comment,
                                   body.to))


@router.post("/circles/{uri}/answer", response_model=TryOut, responses=MOVES)
def answer(body: AnswerIn, store: StoreDep, caller: CallerDep, draft_id: int = DraftId,
           uri: str = Uri) -> TryOut:
    """An HTTP action's answer (status, JSON body), a signal's data, a mail action done:
    nothing is sent."""
    return TryOut(**sandbox.answer(store, caller, draft_id, uri, body.status, body.body))


@router.post("/circles/{uri}/fire", response_model=TryOut, responses=MOVES)
def fire(store: StoreDep, caller: CallerDep, draft_id: int = DraftId,
         uri: str = Uri) -> TryOut:
    """What the circle waits for the clock for (timer, timeout, retry, reminder) now."""
    return TryOut(**sandbox.fire(store, caller, draft_id, uri))


@router.get("/circles/{uri}/return-targets", response_model=list[ReturnTarget],
            responses=MOVES)
def return_targets(request: Request, store: StoreDep, caller: CallerDep,
                   draft_id: int = DraftId, uri: str = Uri) -> list[dict[str, Any]]:
    """Where a ready approval may be sent back to (`decide`'s `to`), as for a real flow:
    each succeeded step upstream, then `@start`."""
    return sandbox.return_targets(store, caller, draft_id, uri, language_of(request.scope))
