"""GET /api/audit: the audit log of the caller's tenant (SPEC §18), for its admins: what
each admin did, oldest first after a cursor, filtered by actor, kind and time
(`bpflow.audit`). Nothing here changes an entry: the log is append-only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from bpflow import audit
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import MAX_INT

router = APIRouter(prefix="/api", tags=["audit"])
KIND_PATTERN = "^(" + "|".join(audit.KINDS) + ")$"


class AuditEntry(BaseModel):
    id: int = Field(description="the entry's number, the cursor to read on after it")
    at: datetime
    actor: str | None = Field(description="the admin's username; null: the installation's"
                                          " operator (command line)")
    actor_id: int | None
    kind: str = Field(description="what was done: one of " + ", ".join(audit.KINDS))
    target: str = Field(description="to what: a username, template name, webhook id, ...")
    before: Any = Field(description="the state before (JSON), null when none")
    after: Any = Field(description="the state after (JSON), null when none")


class AuditOut(BaseModel):
    items: list[AuditEntry]
    next: int = Field(description="the cursor to read on from (`after`)")


@router.get("/audit", response_model=AuditOut, responses=responses(401, 403, 422))
def entries(store: StoreDep, caller: CallerDep,
            after: Annotated[int | None, Query(ge=0, le=MAX_INT, description=(
                "the `next` of an earlier page; absent: from the start"))] = None,
            limit: Annotated[int, Query(ge=1, le=audit.PAGE_MAX)] = 100,
            actor: Annotated[str | None, Query(max_length=100,
                                               description="an admin's username")] = None,
            kind: Annotated[str | None, Query(max_length=40, pattern=KIND_PATTERN)] = None,
            since: Annotated[datetime | None, Query(description="at or after")] = None,
            until: Annotated[datetime | None, Query(description="before")] = None
            ) -> AuditOut:
    """The tenant's audit entries after `after` matching the filters, oldest first (admins
    only: 403 otherwise)."""
    items = audit.entries(store, caller, after, limit, actor=actor, kind=kind, since=since,
                          until=until)
    return AuditOut.model_validate({"items": items,
                                    "next": items[-1]["id"] if items else after or 0})
