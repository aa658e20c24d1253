"""Signed tokens (JWT, HS256) for the REST API and the web app's session, and the one
limit on failed sign-ins.

The token names the user and the roles the users table gave at sign-in; issuer,
audience and expiry are always checked. The key is derived from the server secret.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from typing import Any

import jwt

from bpflow.access import Caller
from bpflow.errors import Unauthorized
from bpflow.security import derive, load_secret

ISSUER = "bpflow"
AUDIENCE = "bpflow-api"
LIFETIME_S = 3600


def _key(secret: bytes | None) -> bytes:
    return derive(secret or load_secret(), "jwt")


def issue_token(user: Caller | dict[str, Any], secret: bytes | None = None,
                lifetime: int = LIFETIME_S, now: float | None = None) -> str:
    now = int(now if now is not None else time.time())
    user = Caller.of(user)
    claims = {"sub": user.username, "uid": user.id, "roles": list(user.roles),
              "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + lifetime}
    return jwt.encode(claims, _key(secret), algorithm="HS256")


def verify_token(token: str | None, secret: bytes | None = None) -> Caller:
    """The caller a token stands for; Unauthorized otherwise."""
    if not token:
        raise Unauthorized("missing bearer token")
    try:
        claims = jwt.decode(token, _key(secret), algorithms=["HS256"], audience=AUDIENCE,
                            issuer=ISSUER, options={"require": ["exp", "iat", "sub", "uid"]})
    except jwt.ExpiredSignatureError:
        raise Unauthorized("token expired") from None
    except jwt.PyJWTError:
        raise Unauthorized("invalid token") from None
    return Caller(claims["uid"], claims["sub"], tuple(claims["roles"]))


class TokenCache:
    """Tokens verified recently, so a client sending the same token with every request
    pays for the signature check once: a hit still checks the expiry. Only tokens that
    verified are kept, keyed by their full text (a changed byte is another token)."""

    def __init__(self, secret: bytes, size: int = 10_000):
        self.secret, self.size = secret, size
        self.known: dict[str, tuple[Caller, float]] = {}

    def verify(self, token: str | None) -> Caller:
        hit = self.known.get(token) if token else None
        if hit is not None and hit[1] > time.time():
            return hit[0]
        caller = verify_token(token, self.secret)
        claims = jwt.decode(token, options={"verify_signature": False})
        if len(self.known) >= self.size:
            self.known.clear()
        self.known[token] = (caller, float(claims["exp"]))
        return caller


class FailureLimiter:
    """At most `limit` failures per `window` seconds per key (a username), in this
    process; while over the limit even a right password is refused, so guessing gains
    nothing. Guest messages are limited in the database instead, across processes."""

    MAX_KEYS = 10_000

    def __init__(self, limit: int, window: float):
        self.limit, self.window = limit, window
        self.failures: dict[str, deque[float]] = defaultdict(deque)
        self.lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        q = self.failures[key]
        while q and q[0] <= now - self.window:
            q.popleft()
        return q

    def blocked(self, key: str) -> int:
        """0 when an attempt is allowed, else the seconds to wait."""
        now = time.monotonic()
        with self.lock:
            if key not in self.failures:
                return 0
            q = self._recent(key, now)
            if not q:
                del self.failures[key]
                return 0
            return int(q[0] + self.window - now) + 1 if len(q) >= self.limit else 0

    def hit(self, key: str) -> None:
        now = time.monotonic()
        with self.lock:
            if len(self.failures) >= self.MAX_KEYS:  # forget keys with no recent failure
                for k in [k for k, q in self.failures.items() if not q or
                          q[-1] <= now - self.window]:
                    del self.failures[k]
            self._recent(key, now).append(now)

    def clear(self) -> None:
        with self.lock:
            self.failures.clear()


# Every sign-in (the API's token endpoint, the web app's form, an `auth` circle) counts
# against this one limit per username.
SIGN_IN_FAILURES = FailureLimiter(10, 300.0)


def sign_in_allowed(username: str) -> int:
    """0 when a sign-in may be tried for `username`, else the seconds to wait."""
    return SIGN_IN_FAILURES.blocked(username)


def sign_in_failed(username: str) -> None:
    SIGN_IN_FAILURES.hit(username)
