"""Bookmarks (the paper's resume tokens): signed, bound to instance, circle, attempt.

A bookmark names the circle's current `epoch`, which moves on at every new
attempt (retry or reset). Completing a circle ends its epoch's waiting state, so
each bookmark can be used exactly once; the key is the caller's secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from engine.errors import BookmarkError


def _sign(key: bytes, instance_id: str, circle: str, epoch: int) -> str:
    message = f"{instance_id}\x1f{circle}\x1f{epoch}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()[:18]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def make(key: bytes, instance_id: str, circle: str, epoch: int) -> str:
    return f"{epoch}.{_sign(key, instance_id, circle, epoch)}"


def verify(key: bytes, instance_id: str, circle: str, epoch: int, token: object) -> None:
    """Raise BookmarkError unless `token` is the bookmark of this circle's current epoch."""
    if not isinstance(token, str) or "." not in token:
        raise BookmarkError("bookmark is missing or malformed", instance=instance_id,
                            circle=circle)
    head, _, sig = token.partition(".")
    if not head.isdigit() or len(head) > 12:
        raise BookmarkError("bookmark is malformed", instance=instance_id, circle=circle)
    claimed = int(head)
    if not hmac.compare_digest(sig, _sign(key, instance_id, circle, claimed)):
        raise BookmarkError("bookmark is not valid for this circle", instance=instance_id,
                            circle=circle)
    if claimed != epoch:
        raise BookmarkError("bookmark is stale: the circle was retried or reset since",
                            instance=instance_id, circle=circle)
