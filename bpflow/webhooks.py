"""Webhook deliveries, a duty of the worker (SPEC §11).

Each round (`Deliverer.__call__`):

1. every enabled webhook that is not failing gets the feed after its cursor, of its
   event types, as pending deliveries, and its cursor advanced, in one transaction
   (`Store.hand_out`; its row locked, so two workers never hand out the same window);
2. the pending deliveries now due are claimed (held for a lease, so no other worker posts
   them meanwhile) and POSTed concurrently (at most `concurrency` at once), each with the
   same body bytes on every attempt and the headers `X-Bpflow-Event-Id` (the event id:
   what a receiver de-duplicates by) and `X-Bpflow-Signature: sha256=<hex HMAC-SHA256 of
   the body with the webhook's secret>`; every URL passes the egress guard first;
3. the answers are written in one transaction (`Store.record_deliveries`): a 2xx is
   delivered; anything else stays pending and is tried again after `backoff(attempts)`
   (1 s, 2 s, 4 s ... at most `backoff_cap`). A round in which every attempt of a webhook
   failed counts one failure of the webhook (a 2xx resets the count); a failing webhook is
   handed no new events until it answers again, and after `failure_limit` failures in a
   row it is disabled with the last error as the reason, its pending deliveries failed.

Delivery is at least once: a receiver that answered 2xx but whose answer was lost gets
the event again, with the same id.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from bpflow import egress
from bpflow.store import Store
from bpflow.store.feed import TYPES, Attempt

SECRET_LENGTH = (16, 200)
EVENT_HEADER = "X-Bpflow-Event-Id"
SIGNATURE_HEADER = "X-Bpflow-Signature"
ANSWER_BYTES = 500  # of a receiver's answer kept in the delivery's error


@dataclass(frozen=True)
class Settings:
    concurrency: int = 32  # POSTs in flight at once
    batch: int = 1000  # events handed out per webhook, deliveries claimed, per round
    timeout: float = 10.0  # seconds per POST
    backoff_base: float = 1.0  # seconds before the second attempt; doubled each time
    backoff_cap: float = 300.0
    failure_limit: int = 8  # failed rounds in a row that disable a webhook
    lease: float = 60.0  # seconds a claimed delivery is held by its worker


class WebhookInvalid(ValueError):
    """A webhook that cannot be created: `field` names what is wrong, the message why."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


def add_webhook(store: Store, url: str, events: Sequence[str], secret: str,
                created_by: str | None) -> dict[str, Any]:
    """A new webhook of `store`'s tenant after the checks of its fields (WebhookInvalid):
    an http(s) URL the egress guard allows, known event types, a secret of 16 to 200
    characters."""
    try:
        httpx.URL(url)
        egress.check(url)
    except (httpx.InvalidURL, egress.EgressRefused) as exc:
        raise WebhookInvalid("url", str(exc)) from None
    events = list(dict.fromkeys(events))
    unknown = [e for e in events if e not in TYPES]
    if not events or unknown:
        raise WebhookInvalid("events", f"unknown event types {unknown}" if unknown
                             else "choose at least one event type")
    if not SECRET_LENGTH[0] <= len(secret) <= SECRET_LENGTH[1]:
        raise WebhookInvalid("secret", f"a secret has {SECRET_LENGTH[0]} to"
                                       f" {SECRET_LENGTH[1]} characters")
    return store.add_webhook(url, events, secret, created_by)


def signature(secret: str | bytes, body: bytes) -> str:
    """The `X-Bpflow-Signature` of `body`: `sha256=` and the hex HMAC-SHA256 with the
    webhook's secret."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def body_of(item: dict[str, Any]) -> bytes:
    """The bytes POSTed for a feed item (the same on every attempt)."""
    return orjson.dumps(item)


class Deliverer:
    """The worker's webhook duty: `duty(worker)` runs one round and answers how many
    events it handed out and deliveries it attempted (0: nothing to do). It keeps its
    event loop and HTTP connections between rounds."""

    __name__ = "deliver_webhooks"

    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None

    def backoff(self, attempts: int) -> float:
        """Seconds before the next attempt after `attempts` failed ones."""
        s = self.settings
        return min(s.backoff_cap, s.backoff_base * 2 ** min(max(attempts - 1, 0), 40))

    def __call__(self, worker: Any) -> int:
        return self.run(worker.store)

    def run(self, store: Store) -> int:
        """One round over every tenant's webhooks (`store` is seen from every tenant)."""
        s = self.settings
        handed = store.hand_out(s.batch)
        due = store.claim_deliveries(s.batch, s.lease)
        if not due:
            return handed
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        attempts = self._loop.run_until_complete(self._post_all(due))
        store.record_deliveries(attempts, self.backoff, s.failure_limit)
        return handed + len(due)

    def close(self) -> None:
        if self._loop is not None:
            if self._client is not None:
                self._loop.run_until_complete(self._client.aclose())
            self._loop.close()
            self._loop = self._client = None

    async def _post_all(self, due: list[dict[str, Any]]) -> list[Attempt]:
        if self._client is None:
            n = self.settings.concurrency
            self._client = httpx.AsyncClient(
                timeout=self.settings.timeout, follow_redirects=False,
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))
        loop = asyncio.get_running_loop()
        urls = {d["url"] for d in due}  # the guard asked once per URL and round
        refused = dict(zip(urls, await asyncio.gather(
            *(loop.run_in_executor(None, egress.refusal, u) for u in urls)), strict=True))
        gate = asyncio.Semaphore(self.settings.concurrency)

        async def one(d: dict[str, Any]) -> Attempt:
            if refused[d["url"]]:
                return _attempt(d, None, f"refused: {refused[d['url']]}")
            async with gate:
                return await self._post(d)
        return list(await asyncio.gather(*(one(d) for d in due)))

    async def _post(self, d: dict[str, Any]) -> Attempt:
        body = body_of(d["body"])
        headers = {"Content-Type": "application/json", "User-Agent": "bpflow-webhooks",
                   EVENT_HEADER: str(d["event_id"]),
                   SIGNATURE_HEADER: signature(d["secret"], body)}
        assert self._client is not None
        try:
            async with self._client.stream("POST", d["url"], content=body,
                                           headers=headers) as r:
                if 200 <= r.status_code < 300:
                    return _attempt(d, r.status_code)
                answer = b""
                async for chunk in r.aiter_bytes():
                    answer += chunk
                    if len(answer) >= ANSWER_BYTES:
                        break
        except httpx.TimeoutException:
            return _attempt(d, None, f"timed out after {self.settings.timeout:g} s")
        except httpx.HTTPError as exc:
            return _attempt(d, None, f"{type(exc).__name__}: {exc}"[:ANSWER_BYTES])
        text = answer[:ANSWER_BYTES].decode(errors="replace").strip()
        return _attempt(d, r.status_code, f"HTTP {r.status_code}" + (f": {text}" if text
                                                                     else ""))


def _attempt(d: dict[str, Any], status: int | None, error: str = "") -> Attempt:
    return Attempt(d["id"], d["webhook_id"], d["attempts"], not error, status, error)
