"""POST /api/guest/messages and /api/guest/{tenant}/messages: a note from someone without
an account to the admins of a tenant (`default` for the first; SPEC §12), limited per
tenant and client address by the mailbox."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request

from bpflow.api.deps import InstallationDep, client_of
from bpflow.api.errors import responses
from bpflow.api.schemas import GuestIn, GuestOut
from bpflow.errors import NotFound
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.store.public import DEFAULT_TENANT, TENANT_NAME
from engine.messages import N_

router = APIRouter(prefix="/api/guest", tags=["guest"])
TenantPath = Path(max_length=63, pattern=f"^{TENANT_NAME.pattern}$",
                  description="the tenant whose admins read the message")


def _leave(store: Store, body: GuestIn, request: Request) -> GuestOut:
    return GuestOut(id=Mailbox(store).guest_message(body.name, body.subject, body.body,
                                                    client_of(request.scope)))


@router.post("/messages", response_model=GuestOut, status_code=201,
             responses=responses(422, 429))
def guest(body: GuestIn, request: Request, store: InstallationDep) -> GuestOut:
    return _leave(store.of(DEFAULT_TENANT), body, request)


@router.post("/{tenant}/messages", response_model=GuestOut, status_code=201,
             responses=responses(404, 422, 429))
def guest_of(body: GuestIn, request: Request, store: InstallationDep,
             tenant: str = TenantPath) -> GuestOut:
    if not store.has_tenant(tenant):
        raise NotFound(N_("no tenant '%(name)s'", name=tenant))
    return _leave(store.of(tenant), body, request)
