"""The event feed and webhooks (SPEC §11), for the admins of a tenant:

- GET /api/events?after=CURSOR&limit=N: the feed after a cursor (`bpflow.store.feed`);
- POST /api/webhooks (201), GET /api/webhooks, GET and DELETE /api/webhooks/{id}, GET
  /api/webhooks/{id}/deliveries: subscriptions to the feed, delivered by the worker
  (`bpflow.webhooks`). A webhook's secret is never shown after it was given; its URL must
  pass the egress guard (`bpflow.egress`). Another tenant's webhook is not found (404).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from bpflow import admin
from bpflow.access import require_admin
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses, text_of
from bpflow.api.event_schemas import (
    DeliveryOut,
    FeedOut,
    WebhookIn,
    WebhookOut,
    delivery_payload,
    webhook_payload,
)
from bpflow.api.schemas import MAX_INT
from bpflow.store.public import BadCursor
from bpflow.webhooks import WebhookInvalid, add_webhook

router = APIRouter(prefix="/api", tags=["events"])
WebhookId = Annotated[int, Path(ge=1, le=MAX_INT)]


@router.get("/events", response_model=FeedOut, responses=responses(401, 403, 422))
def events(store: StoreDep, caller: CallerDep,
           after: Annotated[str | None, Query(max_length=60, description=(
               "a cursor from an earlier page (an item's `cursor` or a page's `next`); "
               "absent: from the start"))] = None,
           limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> FeedOut:
    """The tenant's events after `after`, oldest first: a projection of the instances'
    history (the same transaction wrote both, so nothing committed is skipped). A page
    may hold fewer than `limit` items while more follow: read on from `next` until it
    comes back unchanged."""
    require_admin(caller)
    try:
        items, cursor = store.feed(after, limit)
    except BadCursor as exc:
        raise HTTPException(422, text_of(exc)) from None
    return FeedOut.model_validate({"items": items, "next": cursor})


@router.post("/webhooks", response_model=WebhookOut, status_code=201,
             responses=responses(401, 403, 409, 422))
def create_webhook(body: WebhookIn, store: StoreDep, caller: CallerDep) -> WebhookOut:
    """Subscribe `url` to the events of the types in `events` committed from now on;
    each is POSTed signed with `secret` (409 when the tenant has the most webhooks it may
    have)."""
    require_admin(caller)
    try:
        hook = add_webhook(store, body.url, body.events, body.secret, caller)
    except WebhookInvalid as exc:
        raise HTTPException(422, text_of(exc)) from None
    return webhook_payload(hook)


@router.get("/webhooks", response_model=list[WebhookOut], responses=responses(401, 403))
def webhooks(store: StoreDep, caller: CallerDep) -> list[WebhookOut]:
    require_admin(caller)
    return [webhook_payload(h) for h in store.webhooks()]


@router.get("/webhooks/{webhook_id}", response_model=WebhookOut,
            responses=responses(401, 403, 404, 422))
def webhook(webhook_id: WebhookId, store: StoreDep, caller: CallerDep) -> WebhookOut:
    require_admin(caller)
    return webhook_payload(store.webhook(webhook_id))


@router.delete("/webhooks/{webhook_id}", response_model=WebhookOut,
               responses=responses(401, 403, 404, 422))
def delete_webhook(webhook_id: WebhookId, store: StoreDep, caller: CallerDep) -> WebhookOut:
    """Stop delivering to the webhook and forget it and its deliveries; answers the
    webhook as it was."""
    return webhook_payload(admin.delete_webhook(store, caller, webhook_id))


@router.get("/webhooks/{webhook_id}/deliveries", response_model=list[DeliveryOut],
            responses=responses(401, 403, 404, 422))
def deliveries(webhook_id: WebhookId, store: StoreDep, caller: CallerDep,
               limit: Annotated[int, Query(ge=1, le=500)] = 50) -> list[DeliveryOut]:
    """The webhook's deliveries, newest first: state, attempts, the last answer's status
    and error, when a pending one is tried next."""
    require_admin(caller)
    return [delivery_payload(d) for d in store.deliveries(webhook_id, limit)]
