"""The caller's mailbox: GET /api/mailbox (their mail, newest first; admins also see
guest messages), POST /api/mailbox/{mail_id}/decision (the addressee decides an
approval; for anyone else the mail is not found, 404, as SPEC §13 asks: no existence
leak), and its addressee's /transfer and /delegate (SPEC §15)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query

from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import (
    MAX_INT,
    AssignIn,
    DecisionIn,
    MailOut,
    SignersIn,
    SignersOutIn,
    SignersRemovedOut,
)
from bpflow.mailbox import Mailbox
from bpflow.store.public import MailKind

router = APIRouter(prefix="/api/mailbox", tags=["mailbox"])


@router.get("", response_model=list[MailOut], responses=responses(401, 422))
def mailbox(store: StoreDep, caller: CallerDep,
            kind: MailKind | None = None,
            status: Literal["pending", "decided", "unread"] | None = None,
            limit: Annotated[int, Query(ge=1, le=500)] = 100,
            offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0) -> list[dict[str, Any]]:
    return Mailbox(store).inbox(caller, kind, status, limit, offset)


@router.post("/{mail_id}/decision", response_model=MailOut,
             responses=responses(401, 404, 409, 422))
def decide(mail_id: Annotated[int, Path(ge=1, le=MAX_INT)], body: DecisionIn,
           store: StoreDep, caller: CallerDep) -> dict[str, Any]:
    return Mailbox(store).decide(mail_id, caller, body.decision, body.comment, body.to)


@router.post("/{mail_id}/signers", response_model=MailOut,
             responses=responses(401, 404, 409, 422))
def add_signers(mail_id: Annotated[int, Path(ge=1, le=MAX_INT)], body: SignersIn,
                store: StoreDep, caller: CallerDep) -> dict[str, Any]:
    """Add signers (加签) to a pending approval: its addressee only (anyone else: 404)."""
    return Mailbox(store).add_signers(mail_id, caller, body.users, body.where, body.comment)


@router.delete("/{mail_id}/signers", response_model=SignersRemovedOut,
               responses=responses(401, 403, 404, 409, 422))
def remove_signers(mail_id: Annotated[int, Path(ge=1, le=MAX_INT)], body: SignersOutIn,
                   store: StoreDep, caller: CallerDep) -> dict[str, Any]:
    """Remove signers (减签) who have not decided: the flow's starter or an admin, naming
    any mail of the round (its addressee: 403; anyone else: 404)."""
    return Mailbox(store).remove_signers(mail_id, caller, body.users, body.comment)


@router.post("/{mail_id}/transfer", response_model=MailOut,
             responses=responses(401, 403, 404, 409, 422))
def transfer(mail_id: Annotated[int, Path(ge=1, le=MAX_INT)], body: AssignIn,
             store: StoreDep, caller: CallerDep) -> dict[str, Any]:
    """Transfer (转办): `to` decides instead of the caller; the answer is the new mail."""
    return Mailbox(store).transfer(mail_id, caller, body.to, body.comment)


@router.post("/{mail_id}/delegate", response_model=MailOut,
             responses=responses(401, 403, 404, 409, 422))
def delegate(mail_id: Annotated[int, Path(ge=1, le=MAX_INT)], body: AssignIn,
             store: StoreDep, caller: CallerDep) -> dict[str, Any]:
    """Delegate (委派): `to` answers; the caller confirms (or decides otherwise) with
    their own decision. The answer is the delegate's mail."""
    return Mailbox(store).delegate(mail_id, caller, body.to, body.comment)
