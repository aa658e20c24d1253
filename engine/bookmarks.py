"""Bookmarks (the paper's resume tokens): signed, bound to instance, circle, attempt.

A bookmark names the circle's current `epoch`, which moves on at every new
attempt (retry or reset). Completing a circle ends its epoch's waiting state, so
each bookmark can be used exactly once; the key is the caller's secret.

A bookmark is ASCII: `<epoch>.<signature>`, the epoch in the digits 0-9 (at most 12, no
leading zero), the signature in URL-safe base64. Anything else, Unicode digits such as
`²` or `①` included, is refused as malformed before it is read.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

from engine.errors import BookmarkError
from engine.messages import N_

_SHAPE = re.compile(r"(0|[1-9][0-9]{0,11})\.([A-Za-z0-9_-]{1,64})")


def _sign(key: bytes, instance_id: str, circle: str, epoch: int) -> str:
    message = f"{instance_id}\x1f{circle}\x1f{epoch}".encode()
    digest = hmac.digest(key, message, hashlib.sha256)[:18]  # one call into C
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def make(key: bytes, instance_id: str, circle: str, epoch: int) -> str:
    return f"{epoch}.{_sign(key, instance_id, circle, epoch)}"


def verify(key: bytes, instance_id: str, circle: str, epoch: int, token: object) -> None:
    """Raise BookmarkError unless `token` is the bookmark of this circle's current epoch."""
    if not isinstance(token, str) or "." not in token:
        raise BookmarkError(N_("bookmark is missing or malformed"), instance=instance_id,
                            circle=circle)
    shape = _SHAPE.fullmatch(token)
    if shape is None:
        raise BookmarkError(N_("bookmark is malformed"), instance=instance_id, circle=circle)
    claimed, sig = int(shape[1]), shape[2]
    if not hmac.compare_digest(sig, _sign(key, instance_id, circle, claimed)):
        raise BookmarkError(N_("bookmark is not valid for this circle"), instance=instance_id,
                            circle=circle)
    if claimed != epoch:
        raise BookmarkError(N_("bookmark is stale: the circle was retried or reset since"),
                            instance=instance_id, circle=circle)
