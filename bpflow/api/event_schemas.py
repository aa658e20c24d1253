"""The REST API's models of what goes between bpflow and the systems around it (SPEC §11):
signals in; the event feed and webhooks out. The rest of the request and answer models
are `bpflow.api.schemas`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictInt, StrictStr

from bpflow.api.schemas import SMALL, Json, small
from bpflow.store.public import FeedType
from engine.boxes import SIGNAL_NAME
from engine.signals import MAX_KEY

# -------------------------------------------------------------- signals (SPEC §11)
MAX_SIGNAL_INT = 2**63 - 1  # a larger key is sent as its digits, a string (they meet)
# the analysis's pattern of a signal's name, in the form JSON Schema (and FastAPI) read
SIGNAL_NAME_PATTERN = "^" + SIGNAL_NAME.pattern.removesuffix(r"\Z") + "$"


class SignalIn(BaseModel):
    key: (Annotated[StrictStr, Field(max_length=MAX_KEY)]
          | Annotated[StrictInt, Field(ge=-MAX_SIGNAL_INT, le=MAX_SIGNAL_INT)] | None) = Field(
        default=None, description="the key the waiting circles rendered: text, or an integer"
                                  " (42 and \"42\" meet); null or absent: the empty key")
    data: Annotated[Json, small("data")] = Field(
        default=None, description=f"the circles' result; {SMALL}")


class SignalOut(BaseModel):
    delivered: int = Field(description="how many waiting circles it completed")


# -------------------------------------------------- event feed, webhooks (SPEC §11)
# FeedType: the feed's event types, the store's (`bpflow.store.feed`)


class FeedItem(BaseModel):
    id: int = Field(description="the event's id (the same in every delivery of it)")
    cursor: str = Field(description="read on after this item with ?after=")
    type: FeedType
    instance: str
    template: str
    uri: str | None = Field(description="the circle's uri; null for instance events")
    at: str
    data: dict[str, Json]


class FeedOut(BaseModel):
    items: list[FeedItem]
    next: str = Field(description="the cursor to read on from (`after` when nothing is new)")


class WebhookIn(BaseModel):
    url: str = Field(min_length=1, max_length=2000, description="http or https")
    events: list[FeedType] = Field(min_length=1, max_length=20)
    secret: str = Field(min_length=16, max_length=200,
                        description="signs every body (X-Bpflow-Signature); never shown again")


class WebhookOut(BaseModel):
    id: int
    url: str
    events: list[FeedType]
    created_by: str | None
    created_at: str
    state: Literal["active", "failing", "disabled"]
    failures: int = Field(description="rounds of deliveries failed in a row")
    disabled_at: str | None
    disabled_reason: str | None
    deliveries: dict[str, int] = Field(description="how many are pending, delivered, failed")


def webhook_payload(hook: Mapping[str, Any]) -> WebhookOut:
    return WebhookOut(**{**hook, "created_at": _iso(hook["created_at"]),
                         "disabled_at": _iso(hook["disabled_at"])})


class DeliveryOut(BaseModel):
    id: int
    event_id: int
    type: str | None
    state: Literal["pending", "delivered", "failed"]
    attempts: int
    status_code: int | None
    error: str | None
    next_at: str | None = Field(description="when a pending delivery is tried next")
    created_at: str
    delivered_at: str | None


def delivery_payload(row: Mapping[str, Any]) -> DeliveryOut:
    return DeliveryOut(**{**row, **{k: _iso(row[k]) for k in ("next_at", "created_at",
                                                              "delivered_at")}})


def _iso(t: Any) -> str | None:
    return t.isoformat() if t is not None else None
