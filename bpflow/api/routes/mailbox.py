"""The caller's mailbox: GET /api/mailbox (their mail, newest first; admins also see
guest messages) and POST /api/mailbox/{mail_id}/decision (the addressee decides an
approval; for anyone else the mail is not found, 404, as SPEC §13 asks: no existence
leak)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query

from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import MAX_INT, DecisionIn, MailOut
from bpflow.mailbox import Mailbox

router = APIRouter(prefix="/api/mailbox", tags=["mailbox"])


@router.get("", response_model=list[MailOut], responses=responses(401, 422))
def mailbox(store: StoreDep, caller: CallerDep,
            kind: Literal["approval", "message", "guest"] | None = None,
            status: Literal["pending", "decided", "unread"] | None = None,
            limit: Annotated[int, Query(ge=1, le=500)] = 100,
            offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0) -> list[dict[str, Any]]:
    return Mailbox(store).inbox(caller, kind, status, limit, offset)


@router.post("/{mail_id}/decision", response_model=MailOut,
             responses=responses(401, 404, 409, 422))
def decide(mail_id: Annotated[int, Path(ge=1, le=MAX_INT)], body: DecisionIn,
           store: StoreDep, caller: CallerDep) -> dict[str, Any]:
    return Mailbox(store).decide(mail_id, caller, body.decision, body.comment, body.to)
