"""Templates: GET /api/templates (every name with its versions and whether it is
retired), POST /api/templates (an admin uploads one: 201 for a new version, 200 if
identical to the latest), GET /api/templates/{name} (a version with its analysis),
GET .../stats (the caller's instances of it counted, everyone's for admins) and, for
admins, POST .../retire and .../restore (a retired template is started no more)."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from bpflow import admin
from bpflow.access import Caller, instance_scope, require_admin
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import (
    MAX_INT,
    Json,
    StatsOut,
    TemplateOut,
    TemplateRetired,
    TemplateSummary,
    TemplateUploaded,
    retired_payload,
    stats_payload,
    template_payload,
    template_summaries,
    uploaded_payload,
)
from bpflow.errors import NotFound
from bpflow.store import Store
from engine.messages import N_

router = APIRouter(prefix="/api/templates", tags=["templates"])
DISCONNECT_POLL_S = 0.2  # how often an upload under analysis looks for its client


@router.get("", response_model=list[TemplateSummary], responses=responses(401))
def templates(store: StoreDep, caller: CallerDep) -> list[TemplateSummary]:
    return template_summaries(store.template_versions(), store.retired_templates())


@router.post("", response_model=TemplateUploaded, status_code=201,
             responses={**responses(401, 403, 422),
                        200: {"model": TemplateUploaded,
                              "description": "identical to the latest"}})
async def upload(body: dict[str, Json], store: StoreDep, caller: CallerDep,
                 response: Response, request: Request) -> TemplateUploaded:
    require_admin(caller)  # before the analysis, which takes seconds
    version, created = await _analysed(store, caller, body, request)
    if not created:
        response.status_code = 200
    _, template = await asyncio.to_thread(store.template, body["name"], version)
    return uploaded_payload(body["name"], version, template)


async def _analysed(store: Store, caller: Caller, body: dict[str, Json], request: Request
                    ) -> tuple[int, bool]:
    """`admin.upload_template` on a thread (a large analysis takes seconds, never on the event
    loop); when the client goes away meanwhile, the analysis is stopped."""
    gone = threading.Event()
    work = asyncio.ensure_future(asyncio.to_thread(admin.upload_template, store, caller, body,
                                                  gone.is_set))
    while not work.done():
        await asyncio.wait({work}, timeout=DISCONNECT_POLL_S)
        if not work.done() and await request.is_disconnected():
            gone.set()
    return work.result()


@router.get("/{name}", response_model=TemplateOut, responses=responses(401, 404))
def template(name: str, store: StoreDep, caller: CallerDep,
             version: Annotated[int | None, Query(ge=1, le=MAX_INT)] = None) -> TemplateOut:
    number, found = store.template(name, version)
    return template_payload(name, number, found, number in store.locked_versions(name))


@router.get("/{name}/stats", response_model=StatsOut, responses=responses(401, 404))
def stats(name: str, store: StoreDep, caller: CallerDep) -> StatsOut:
    if name not in store.template_versions():
        raise NotFound(N_("no template '%(name)s'", name=name))
    return stats_payload(store.stats(name, instance_scope(caller)))


@router.post("/{name}/retire", response_model=TemplateRetired,
             responses=responses(401, 403, 404, 409))
def retire(name: str, store: StoreDep, caller: CallerDep) -> TemplateRetired:
    """No new starts of any version of `name`; its running instances go on. The outer
    flow that signing in starts cannot be retired (409)."""
    admin.retire_template(store, caller, name)
    return retired_payload(name, True)


@router.post("/{name}/restore", response_model=TemplateRetired,
             responses=responses(401, 403, 404))
def restore(name: str, store: StoreDep, caller: CallerDep) -> TemplateRetired:
    """`name` can be started again."""
    admin.restore_template(store, caller, name)
    return retired_payload(name, False)
