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

import hashlib
import hmac
import logging
import socket
import ssl
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import orjson

from bpflow import audit, egress, metrics, tracing
from bpflow.access import Caller, require_admin
from bpflow.store import Store
from bpflow.store.public import TYPES, Attempt
from engine.messages import N_, message_of

SECRET_LENGTH = (16, 200)
log = logging.getLogger("bpflow.webhooks")
EVENT_HEADER = "X-Bpflow-Event-Id"
SIGNATURE_HEADER = "X-Bpflow-Signature"
ANSWER_BYTES = 500  # of a receiver's answer kept in the delivery's error
MAX_ANSWER = 64 * 1024  # a longer answer's body is not read: its connection is closed


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
        super().__init__(N_("%(field)s: %(problem)s", field=field, problem=message))


def add_webhook(store: Store, url: str, events: Sequence[str], secret: str,
                by: Caller | None) -> dict[str, Any]:
    """A new webhook of `store`'s tenant after the checks of its fields (WebhookInvalid):
    an http(s) URL the egress guard allows, known event types, a secret of 16 to 200
    characters. Recorded in the audit log (`by`: the admin)."""
    if any(c <= " " or c == "\x7f" for c in url):
        raise WebhookInvalid("url", N_("a URL has no spaces or control characters"))
    try:
        httpx.URL(url)
        egress.check(url)
    except (httpx.InvalidURL, egress.EgressRefused) as exc:
        raise WebhookInvalid("url", message_of(exc)) from None
    events = list(dict.fromkeys(events))
    unknown = [e for e in events if e not in TYPES]
    if not events or unknown:
        raise WebhookInvalid("events", N_("unknown event types %(types)s", types=unknown)
                             if unknown else N_("choose at least one event type"))
    if not SECRET_LENGTH[0] <= len(secret) <= SECRET_LENGTH[1]:
        raise WebhookInvalid("secret", N_("a secret has %(min)s to %(max)s characters",
                                          min=SECRET_LENGTH[0], max=SECRET_LENGTH[1]))
    if by is not None:
        require_admin(by)
    hook = store.add_webhook(url, events, secret, by.username if by else None)
    audit.record(store, by, "webhook_added", hook["id"], None,
                 {"url": hook["url"], "events": hook["events"]})
    return hook


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
    threads and their keep-alive connections between rounds."""

    __name__ = "deliver_webhooks"

    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()  # each thread's connections

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
        attempts = self._post_all(due)
        for a in attempts:
            metrics.delivery("delivered" if a.ok else "failed")
        store.record_deliveries(attempts, self.backoff, s.failure_limit)
        return handed + len(due)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _post_all(self, due: list[dict[str, Any]]) -> list[Attempt]:
        """POST every delivery, at most `concurrency` at once. The egress guard is asked
        once per URL and round, and the connection goes to the address it checked (a
        name is not resolved again behind its back)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.settings.concurrency,
                                            thread_name_prefix="bpflow-webhooks")
        targets: dict[str, Target | str] = {}
        for url in {d["url"] for d in due}:
            try:
                targets[url] = Target.of(url, egress.check(url)[0])
            except egress.EgressRefused as exc:
                targets[url] = f"refused: {exc}"
        return list(self._pool.map(lambda d: self._guarded(d, targets[d["url"]]), due))

    def _guarded(self, d: dict[str, Any], target: Target | str) -> Attempt:
        try:
            with tracing.span("webhook delivery", **{"bpflow.webhook": d["webhook_id"],
                                                      "bpflow.event": d["event_id"]}):
                return self._post(d, target)
        except Exception as exc:  # a bug here fails this attempt, not the round
            log.exception("webhook delivery %s", d["id"])
            return _attempt(d, None, f"internal error: {type(exc).__name__}")

    def _post(self, d: dict[str, Any], target: Target | str) -> Attempt:
        if isinstance(target, str):
            return _attempt(d, None, target)
        body = body_of(d["body"])
        request = (target.head + f"{EVENT_HEADER}: {d['event_id']}\r\n"
                   f"{SIGNATURE_HEADER}: {signature(d['secret'], body)}\r\n"
                   + "".join(f"{k}: {v}\r\n" for k, v in tracing.traceparent().items()) +
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        pool = self._local.__dict__.setdefault("connections", {})
        for retry in (True, False):
            conn = pool.pop(target.key, None)
            reused = conn is not None
            try:
                conn = conn or Connection(target, self.settings.timeout)
                status, answer, keep = conn.post(request)
            except TimeoutError:
                if conn:
                    conn.close()
                return _attempt(d, None, f"timed out after {self.settings.timeout:g} s")
            except (OSError, ValueError) as exc:
                if conn:
                    conn.close()
                if retry and reused:  # the receiver closed an idle connection: once more
                    continue
                return _attempt(d, None, f"{type(exc).__name__}: {exc}"[:ANSWER_BYTES])
            if keep:
                pool[target.key] = conn
            else:
                conn.close()
            break
        if 200 <= status < 300:
            return _attempt(d, status)
        text = answer.decode(errors="replace").strip()
        return _attempt(d, status, f"HTTP {status}" + (f": {text}" if text else ""))


@dataclass(frozen=True)
class Target:
    """Where a URL's POSTs go: its host name (the Host header, TLS's server name) and the
    address the egress guard allowed."""

    https: bool
    host: str
    port: int
    path: str
    address: str

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.https, self.host, self.port, self.address)

    @property
    def head(self) -> str:
        """The request's first lines, the same for every POST to this target."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port != (443 if self.https else 80):
            host += f":{self.port}"
        return (f"POST {self.path} HTTP/1.1\r\nHost: {host}\r\n"
                "Content-Type: application/json\r\nUser-Agent: bpflow-webhooks\r\n")

    @classmethod
    def of(cls, url: str, address: Any) -> Target:
        parts = urlsplit(url)
        https = parts.scheme.lower() == "https"
        path = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                     safe="!#$%&'()*+,/:;=?@[]~")
        return cls(https, parts.hostname or "", parts.port or (443 if https else 80), path,
                   str(address))


class Connection:
    """One keep-alive HTTP/1.1 connection to a target's checked address (TLS with the
    host's name), speaking just what a webhook POST needs: the answer's status, the
    start of its body, and whether the connection can carry the next one."""

    def __init__(self, target: Target, timeout: float):
        sock = socket.create_connection((target.address, target.port), timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if target.https:
            sock = ssl.create_default_context().wrap_socket(sock,
                                                            server_hostname=target.host)
        self.sock, self.file = sock, sock.makefile("rb")

    def post(self, request: bytes) -> tuple[int, bytes, bool]:
        self.sock.sendall(request)
        while True:  # an informational answer (100 Continue) comes before the real one
            line = self.file.readline(1000)
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or \
                    not parts[1].isdigit():
                raise ValueError(f"not an HTTP answer: {line[:80]!r}")
            status, headers = int(parts[1]), self._headers()
            if status >= 200:
                break
        length = headers.get(b"content-length", b"")
        keep = (parts[0] == b"HTTP/1.1" and headers.get(b"connection", b"").lower() != b"close"
                and length.isdigit() and int(length) <= MAX_ANSWER)
        if keep:
            answer = self.file.read(int(length))
        else:  # chunked, unknown or too long: the start is enough, then the line goes
            answer = self.file.read1(ANSWER_BYTES) if status >= 300 else b""
        return status, answer[:ANSWER_BYTES], keep

    def _headers(self) -> dict[bytes, bytes]:
        headers: dict[bytes, bytes] = {}
        for _ in range(200):
            line = self.file.readline(8000)
            if line in (b"\r\n", b"\n", b""):
                return headers
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        raise ValueError("an answer with more than 200 header lines")

    def close(self) -> None:
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass


def _attempt(d: dict[str, Any], status: int | None, error: str = "") -> Attempt:
    return Attempt(d["id"], d["webhook_id"], d["attempts"], not error, status, error)
