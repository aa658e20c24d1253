"""The HTTP action: the circle's action with `${...}` already substituted, sent with an
idempotency key for this attempt so a receiver can de-duplicate a repeated call.

It never raises for a failure of the remote side: that is an Outcome with a readable
reason, which fails the circle subject to its retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Outcome:
    ok: bool | None  # None: the action started and now waits for the outside world
    result: Any = None
    reason: str = ""
    pending: dict[str, Any] | None = None


def run_http(action: dict[str, Any], idempotency_key: str) -> Outcome:
    method = str(action.get("method", "GET")).upper()
    headers = {str(k): str(v) for k, v in (action.get("headers") or {}).items()}
    headers.setdefault("Idempotency-Key", idempotency_key)
    kwargs: dict[str, Any] = {"headers": headers}
    if "json" in action:
        kwargs["json"] = action["json"]
    elif "body" in action:
        kwargs["content"] = str(action["body"])
    try:
        with httpx.Client(timeout=float(action.get("timeout", 10))) as client:
            response = client.request(method, str(action["url"]), **kwargs)
    except httpx.TimeoutException:
        return Outcome(False, reason=f"{method} {action['url']} timed out after"
                                     f" {action.get('timeout', 10)} s")
    except httpx.HTTPError as exc:
        return Outcome(False, reason=f"{method} {action['url']} failed: {exc}"
                                     f" ({type(exc).__name__})")
    if 200 <= response.status_code < 300:
        try:
            result: Any = response.json() if response.content else None
        except ValueError:
            result = response.text
        return Outcome(True, result=result)
    snippet = response.text[:200]
    return Outcome(False, reason=f"{method} {action['url']} answered HTTP"
                                 f" {response.status_code}" + (f": {snippet}" if snippet else ""))

