"""Signed tokens (JWT, HS256) for the REST API and the web app's session, and the one
limit on failed sign-ins (per account and client, with a growing back-off).

The token names the user (id and name), the roles the users table gave at sign-in and
the account's token generation (which every change of the password moves on); issuer,
audience and expiry are always checked. The key is derived from the server secret. A
token is only a claim: who the caller is now (their roles, whether the account is still
enabled, whether the password changed since the token was issued) is the users table's
(`current`, `TokenCache` with `accounts`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import jwt

from bpflow.access import DEFAULT_TENANT, Caller
from bpflow.errors import Unauthorized
from bpflow.security import derive, load_secret, normal_username
from engine.messages import N_

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
              "tenant": user.tenant, "gen": user.generation, "iss": ISSUER, "aud": AUDIENCE,
              "iat": now, "exp": now + lifetime}
    return jwt.encode(claims, _key(secret), algorithm="HS256")


def verify_token(token: str | None, secret: bytes | None = None) -> Caller:
    """The caller a token stands for; Unauthorized otherwise."""
    if not token:
        raise Unauthorized(N_("missing bearer token"))
    try:
        claims = jwt.decode(token, _key(secret), algorithms=["HS256"], audience=AUDIENCE,
                            issuer=ISSUER, options={"require": ["exp", "iat", "sub", "uid"]})
    except jwt.ExpiredSignatureError:
        raise Unauthorized(N_("token expired")) from None
    except jwt.PyJWTError:
        raise Unauthorized(N_("invalid token")) from None
    generation = claims.get("gen", 0)  # a token of before generations were counted: 0
    if not isinstance(generation, int) or isinstance(generation, bool):
        raise Unauthorized(N_("invalid token"))
    return Caller(claims["uid"], claims["sub"], tuple(claims["roles"]),
                  str(claims.get("tenant") or DEFAULT_TENANT), generation)


class TokenCache:
    """Tokens verified recently, so a client sending the same token with every request
    pays for the signature check once: a hit still checks the expiry. Only tokens that
    verified are kept, keyed by their full text (a changed byte is another token).

    With `accounts` (the store's `account`: a user id to the caller the users table
    has now, None for an unknown or disabled account) every verification, hit or not,
    also asks the users table (through its short cache): the caller's roles are the
    table's, and a disabled or unknown account's token is Unauthorized."""

    def __init__(self, secret: bytes, accounts: Callable[[int], Caller | None] | None = None,
                 size: int = 10_000):
        self.secret, self.accounts, self.size = secret, accounts, size
        self.known: dict[str, tuple[Caller, float]] = {}

    def verify(self, token: str | None) -> Caller:
        hit = self.known.get(token) if token else None
        if hit is not None and hit[1] > time.time():
            caller = hit[0]
        else:
            caller = verify_token(token, self.secret)
            assert token is not None  # verify_token refuses a missing token
            claims = jwt.decode(token, options={"verify_signature": False})
            if len(self.known) >= self.size:
                self.known.clear()
            self.known[token] = (caller, float(claims["exp"]))
        return caller if self.accounts is None else current(caller, self.accounts(caller.id))


class PasswordChanged(Unauthorized):
    """A token issued before its account's password changed: that session has ended."""


def current(caller: Caller, account: Caller | None) -> Caller:
    """The caller as the users table has it now (`account`, looked up by the token's user
    id): Unauthorized when the account is gone, disabled, or is not the token's user, or
    when its password changed since the token was issued (the token's generation is not
    the account's: every session ends with a change of the password)."""
    if account is None or account.username != caller.username or \
            account.tenant != caller.tenant:
        raise Unauthorized(N_("this account is disabled or no longer exists"))
    if account.generation != caller.generation:
        raise PasswordChanged(N_("this session has ended: the password was changed"))
    return account


class SignInLimit:
    """Failed sign-ins, counted per account *and* client (the client's address), with a
    growing back-off: after `limit` failures the pair waits `first_wait` seconds, and
    each failure after a wait doubles it (up to `longest_wait`). While waiting even a
    right password is refused, so guessing gains nothing; someone failing from one
    client never locks out the owner signing in from another. A client is also held back
    after `client_limit` failures over all accounts (password spraying). A pair's count is
    forgotten after a success, or `forget_after` seconds without a failure past its wait.
    Per process; guest messages are limited in the database instead, across processes."""

    MAX_KEYS = 10_000
    TRYING_S = 30.0  # an attempt under way counts this long at most
    ANY_ACCOUNT = None  # the key of a client's failures over all accounts

    def __init__(self, limit: int = 10, first_wait: float = 30.0,
                 longest_wait: float = 3600.0, forget_after: float = 900.0,
                 client_limit: int = 100, clock: Callable[[], float] = time.monotonic):
        self.limit, self.first_wait, self.longest_wait = limit, first_wait, longest_wait
        self.forget_after, self.client_limit, self.clock = forget_after, client_limit, clock
        self.failures: dict[tuple[str | None, str | None], tuple[int, float]] = {}
        self.trying: dict[tuple[str | None, str | None], list[float]] = {}  # see `reserve`
        self.lock = threading.Lock()

    @staticmethod
    def _keys(username: str, client: str | None) -> list[tuple[str | None, str | None]]:
        pair = (normal_username(username), client)
        return [pair] if client is None else [pair, (SignInLimit.ANY_ACCOUNT, client)]

    def _wait(self, key: tuple[str | None, str | None], now: float) -> float:
        """Seconds `key` must still wait (0: it may try); forgets a quiet key."""
        entry = self.failures.get(key)
        if entry is None:
            return 0.0
        count, last = entry
        over = count - (self.limit if key[0] is not self.ANY_ACCOUNT else self.client_limit)
        wait = 0.0 if over < 0 else min(self.longest_wait, self.first_wait * 2.0 ** min(over, 30))
        if now - last >= wait + self.forget_after:
            del self.failures[key]
            return 0.0
        return max(0.0, last + wait - now)

    def blocked(self, username: str, client: str | None = None) -> int:
        """0 when a sign-in may be tried, else the seconds to wait."""
        now = self.clock()
        with self.lock:
            wait = max(self._wait(key, now) for key in self._keys(username, client))
        return math.ceil(wait) if wait > 0 else 0

    def reserve(self, username: str, client: str | None = None) -> int:
        """`blocked`, counting the attempts under way (checked, not yet failed or
        succeeded) as failures, and if it may be tried, one more attempt under way: N
        guesses sent at once when one failure is left are not all tried. An attempt that
        never ends (a crash between check and count) stops counting after `TRYING_S`."""
        now = self.clock()
        with self.lock:
            pair = self._keys(username, client)[0]
            trying = [t for t in self.trying.get(pair, ()) if now - t < self.TRYING_S]
            count, last = self.failures.get(pair, (0, now))
            if trying and count + len(trying) >= self.limit:
                over = count + len(trying) - self.limit
                wait = min(self.longest_wait, self.first_wait * 2.0 ** min(over, 30))
                self.trying[pair] = trying
                return max(1, math.ceil(last + wait - now))
            wait = max(self._wait(key, now) for key in self._keys(username, client))
            if wait > 0:
                return math.ceil(wait)
            self.trying[pair] = [*trying, now]
            if len(self.trying) > self.MAX_KEYS:
                self.trying = {k: v for k, v in self.trying.items()
                               if v and now - v[-1] < self.TRYING_S}
            return 0

    def _done_trying(self, username: str, client: str | None) -> None:
        pair = (normal_username(username), client)
        trying = self.trying.get(pair)
        if trying:
            trying.pop(0)
            if not trying:
                del self.trying[pair]

    def hit(self, username: str, client: str | None = None) -> None:
        now = self.clock()
        with self.lock:
            self._done_trying(username, client)
            if len(self.failures) >= self.MAX_KEYS:
                self._prune(now)
            for key in self._keys(username, client):
                self._wait(key, now)  # a quiet key is forgotten first
                count = self.failures.get(key, (0, now))[0]
                self.failures[key] = (count + 1, now)

    def succeeded(self, username: str, client: str | None = None) -> None:
        with self.lock:
            self._done_trying(username, client)
            self.failures.pop((normal_username(username), client), None)

    def _prune(self, now: float) -> None:
        for key in list(self.failures):
            self._wait(key, now)  # forgets the quiet ones
        if len(self.failures) >= self.MAX_KEYS:  # still full: the oldest half goes
            by_age = sorted(self.failures, key=lambda k: self.failures[k][1])
            for key in by_age[:len(by_age) // 2]:
                del self.failures[key]

    def clear(self) -> None:
        with self.lock:
            self.failures.clear()
            self.trying.clear()


# Every sign-in (the API's token endpoint, the web app's form, an `auth` circle) counts
# against this one limit, per account and client.
SIGN_IN_FAILURES = SignInLimit()


def sign_in_allowed(username: str, client: str | None = None) -> int:
    """0 when a sign-in may be tried for `username` from `client` (its address; None
    when unknown, which is a client of its own), else the seconds to wait."""
    return SIGN_IN_FAILURES.reserve(username, client)


def sign_in_failed(username: str, client: str | None = None) -> None:
    SIGN_IN_FAILURES.hit(username, client)


def sign_in_succeeded(username: str, client: str | None = None) -> None:
    """A right password: the pair's count starts again."""
    SIGN_IN_FAILURES.succeeded(username, client)
