"""Crowds (SPEC §11): POST /api/instances/bulk starts one instance per user in one request,
each user its starter (`Store.start_batch`: admitted once, written as a set, all or
nothing), and GET /api/batches/{batch}/stats counts a batch's circles per state and its
instances per status, as GET /api/templates/{name}/stats does for a template.

Admins of the tenant only (`bpflow.access.require_admin`); a batch of another tenant is
404. The route is included before the instances router, so `bulk` is never taken for an
instance id.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path

from bpflow.access import require_admin
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import BatchOut, BatchStatsOut, BulkIn

router = APIRouter(prefix="/api", tags=["crowds"])


@router.post("/instances/bulk", response_model=BatchOut, status_code=201,
             responses=responses(401, 403, 404, 409, 413, 422, 429))
async def bulk(body: BulkIn, store: StoreDep, caller: CallerDep) -> BatchOut:
    """Start the template (latest version unless `version`) once for each of `users`, or
    for every enabled user having `role`, with the same `inputs`: all of them or none
    (404 no template, 409 retired or past `stop_at`, 422 bad inputs or users, 429 the
    tenant's running-instances quota cannot take them all). Admins only (403)."""
    require_admin(caller)
    batch, started = await asyncio.to_thread(
        store.start_batch, body.template, body.users, body.role, body.inputs, body.version,
        caller.username)
    return BatchOut(batch=batch, started=started)


@router.get("/batches/{batch}/stats", response_model=BatchStatsOut,
            responses=responses(401, 403, 404))
def batch_stats(batch: Annotated[str, Path(max_length=100)], store: StoreDep,
                caller: CallerDep) -> BatchStatsOut:
    """A batch's circles per state and instances per status (404: no such batch in the
    caller's tenant). Admins only (403)."""
    require_admin(caller)
    return BatchStatsOut.model_validate(store.batch_stats(batch))
