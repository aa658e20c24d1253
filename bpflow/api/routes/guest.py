"""POST /api/guest/messages: a note from someone without an account (no token; limited
per client address by the mailbox)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from bpflow.api.deps import StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import GuestIn, GuestOut
from bpflow.mailbox import Mailbox

router = APIRouter(prefix="/api/guest", tags=["guest"])


@router.post("/messages", response_model=GuestOut, status_code=201,
             responses=responses(422, 429))
def guest(body: GuestIn, request: Request, store: StoreDep) -> GuestOut:
    client = request.client.host if request.client else "unknown"
    return GuestOut(id=Mailbox(store).guest_message(body.name, body.subject, body.body,
                                                    client))
