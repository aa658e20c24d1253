"""Copies and urges (SPEC §15): `POST /api/instances/{id}/cc` (an ad hoc copy, by the
starter, an assignee or an admin), `GET /api/instances/{id}/cc` (who was copied, who read
it: anyone who sees the instance), `POST /api/instances/{id}/urge` (by the starter or an
admin; at most once an hour per circle: 429 with `Retry-After`).

Each is `bpflow.moves.nudging`'s (shared with the flow page); an instance the caller may
not see is not found (404)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter

from bpflow import moves
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import CcIn, CcOut, CopyOut, UrgeIn, UrgeOut, copies_payload
from bpflow.moves import nudging

router = APIRouter(prefix="/api/instances", tags=["instances"])


@router.post("/{instance_id}/cc", response_model=CcOut,
             responses=responses(401, 403, 404, 422))
async def copy(instance_id: str, body: CcIn, store: StoreDep,
               caller: CallerDep) -> dict[str, Any]:
    """Copy people on the instance: each gets one mail of kind `cc` (once per instance:
    copied again, nothing is sent) and may read the instance. 422 names an unknown user."""
    copied = await asyncio.to_thread(nudging.copy, store, caller, instance_id, body.users,
                                     body.comment)
    return {"copied": copied,
            "copies": copies_payload(await asyncio.to_thread(store.copies, instance_id))}


@router.get("/{instance_id}/cc", response_model=list[CopyOut], responses=responses(401, 404))
def copies(instance_id: str, store: StoreDep, caller: CallerDep) -> list[dict[str, Any]]:
    """Who was copied on the instance (by a circle's `cc` or ad hoc) and when each read it."""
    moves.visible(store, caller, instance_id)
    return copies_payload(nudging.copies(store, instance_id))


@router.post("/{instance_id}/urge", response_model=UrgeOut,
             responses=responses(401, 403, 404, 409, 422, 429))
async def urge(instance_id: str, store: StoreDep, caller: CallerDep,
               body: UrgeIn | None = None) -> dict[str, Any]:
    """Urge whoever each open circle waits for (a mail of kind `urge`); 429 with
    `Retry-After` while every open circle was urged less than an hour ago, 409 when
    nothing waits for anyone."""
    return await asyncio.to_thread(nudging.urge, store, caller, instance_id,
                                   body.comment if body else None)
