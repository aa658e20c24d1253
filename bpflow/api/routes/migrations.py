"""Changing running flows (SPEC §11): POST /api/templates/{name}/migrate (an admin moves
instances from one version to another, or sees what a move would do with `dry_run`)
and GET /api/templates/{name}/circles/{uri}/instances (where a circle is: the caller's
instances whose circle is in a state, everyone's for admins)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response

from bpflow import admin
from bpflow.access import instance_scope
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses, text_of
from bpflow.api.schemas import MAX_INT, InstanceSummary, MigrateIn, MigrateOut, summary_payload
from bpflow.errors import NotFound
from bpflow.store import Store
from bpflow.store.public import BadMigration
from engine.messages import N_

router = APIRouter(prefix="/api", tags=["migrations"])


@router.post("/templates/{name}/migrate", response_model=MigrateOut,
             responses=responses(401, 403, 404, 422))
def migrate(name: str, body: MigrateIn, store: StoreDep, caller: CallerDep) -> MigrateOut:
    """Move instances of `name` from version `from` to `to`, each in one step of its own:
    circles match by uri or `map`, finished ones keep their results, new ones start
    waiting; an instance that cannot move is refused with its reasons, unchanged. With
    `dry_run`, the same answer and nothing changed. 404 for an unknown template, version
    or instance, 422 for a map naming circles the versions do not have."""
    try:
        outcome = admin.migrate(store, caller, name, body.source, body.target, body.map,
                                body.instances, body.dry_run)
    except BadMigration as exc:
        raise HTTPException(422, text_of(exc)) from None
    return MigrateOut.model_validate(outcome)


@router.get("/templates/{name}/circles/{uri}/instances", response_model=list[InstanceSummary],
            responses=responses(401, 404, 422))
def circle_instances(name: str, uri: str, store: StoreDep, caller: CallerDep,
                     response: Response,
                     state: Literal["ready", "waiting", "success", "failure", "skipped"],
                     version: Annotated[int | None, Query(ge=1, le=MAX_INT)] = None,
                     limit: Annotated[int, Query(ge=1, le=500)] = 50,
                     offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0
                     ) -> list[dict[str, Any]]:
    """The instances whose circle `uri` is in `state` (`ready`: waiting and ready;
    `waiting` counts the ready ones too, as the stats do), newest first, paged; the
    total in `X-Total-Count`. 404 for an unknown template or a uri none of its versions
    has."""
    if not _has_circle(store, name, uri):
        raise NotFound(N_("template '%(name)s' has no circle '%(uri)s'", name=name, uri=uri))
    rows, total = store.circle_instances(name, uri, state, version, instance_scope(caller),
                                         limit, offset)
    response.headers["X-Total-Count"] = str(total)
    return [summary_payload(r) for r in rows]


def _has_circle(store: Store, name: str, uri: str) -> bool:
    """Whether a version of `name` has the circle `uri` (a dotted id inside a nested
    flow), the latest asked first; NotFound for an unknown template. Any version counts:
    instances of an older one may stand at a circle the latest has no more."""
    versions = store.template_versions().get(name)
    if not versions:
        raise NotFound(N_("no template '%(name)s'", name=name))
    return any(uri in store.template(name, version)[1].plan.nodes
               for version in reversed(versions))
