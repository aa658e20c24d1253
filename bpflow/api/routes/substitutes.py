"""Substitutes (代理人, SPEC §15): `PUT|GET|DELETE /api/me/substitute`, the caller's own, and
`/api/users/{username}/substitute`, an admin's for someone of their tenant (the caller's
own there too). Each is one call of `bpflow.substitutes`, which asks `bpflow.access`
who may."""

from __future__ import annotations

from fastapi import APIRouter, Path, Response

from bpflow import substitutes
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import SubstituteIn, SubstituteOut, json_answer
from bpflow.errors import NotFound
from bpflow.store import Store
from engine.messages import N_

router = APIRouter(prefix="/api", tags=["substitutes"])
UsernamePath = Path(max_length=100, description="the user's name")


def _put(store: Store, caller: CallerDep, username: str, body: SubstituteIn) -> Response:
    return json_answer(substitutes.put(store, caller, username, body.to, body.starts,
                                       body.until, body.templates))


def _get(store: Store, caller: CallerDep, username: str) -> Response:
    found = substitutes.get(store, caller, username)
    if found is None:
        raise NotFound(N_("%(name)s has no substitute", name=username))
    return json_answer(found)


def _delete(store: Store, caller: CallerDep, username: str) -> Response:
    if not substitutes.clear(store, caller, username):
        raise NotFound(N_("%(name)s has no substitute", name=username))
    return Response(status_code=204)


@router.put("/me/substitute", response_model=SubstituteOut,
            responses=responses(401, 422))
def put_mine(body: SubstituteIn, store: StoreDep, caller: CallerDep) -> Response:
    """Name your substitute (instead of any earlier one): while now is within
    [from, until), work addressed to you by name is also offered to them. 422 for an
    unknown or disabled substitute, yourself, a cycle, `until` not after `from` or past,
    a period over 366 days, more than 50 templates or an unknown one."""
    return _put(store, caller, caller.username, body)


@router.get("/me/substitute", response_model=SubstituteOut, responses=responses(401, 404))
def get_mine(store: StoreDep, caller: CallerDep) -> Response:
    """Your substitute (404 when you have none)."""
    return _get(store, caller, caller.username)


@router.delete("/me/substitute", status_code=204, responses=responses(401, 404))
def delete_mine(store: StoreDep, caller: CallerDep) -> Response:
    """Clear your substitute (404 when you have none)."""
    return _delete(store, caller, caller.username)


@router.put("/users/{username}/substitute", response_model=SubstituteOut,
            responses=responses(401, 403, 404, 422))
def put_theirs(body: SubstituteIn, store: StoreDep, caller: CallerDep,
               username: str = UsernamePath) -> Response:
    """An admin names a user's substitute (others: 403 unless it is their own); 404 for
    no such user of the tenant; 422 as for `PUT /api/me/substitute`."""
    return _put(store, caller, username, body)


@router.get("/users/{username}/substitute", response_model=SubstituteOut,
            responses=responses(401, 403, 404))
def get_theirs(store: StoreDep, caller: CallerDep, username: str = UsernamePath) -> Response:
    """A user's substitute (admins; 404 when there is none)."""
    return _get(store, caller, username)


@router.delete("/users/{username}/substitute", status_code=204,
               responses=responses(401, 403, 404))
def delete_theirs(store: StoreDep, caller: CallerDep,
                  username: str = UsernamePath) -> Response:
    """An admin clears a user's substitute (404 when there is none)."""
    return _delete(store, caller, username)
