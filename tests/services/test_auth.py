"""Signed tokens (`bpflow.auth`): what verifies and what is refused, the token cache, the
failure limiter, and the one process-wide limit on failed sign-ins shared by the API's
token endpoint and the outer flow's `auth` circle (through the store, SQLite and
PostgreSQL, and the real API app)."""

from __future__ import annotations

import base64
import json
import time

import httpx
import jwt
import pytest

from bpflow import auth
from bpflow.access import Caller
from bpflow.api import create_app
from bpflow.auth import SIGN_IN_FAILURES, TokenCache, issue_token, verify_token
from bpflow.errors import RateLimited, Unauthorized
from bpflow.forms import FormError
from bpflow.security import derive
from tests.conftest import SECRET, run_async
from tests.services.helpers import ROOT, mark, users

BOB = Caller(2, "bob", ("user",))
ROOT_USER = Caller(1, "root", ("admin", "user"))


def claims(**changes) -> dict:
    now = int(time.time())
    return {"sub": "bob", "uid": 2, "roles": ["user"], "iss": auth.ISSUER,
            "aud": auth.AUDIENCE, "iat": now, "exp": now + 60, **changes}


def signed(body: dict, key: bytes | None = None) -> str:
    return jwt.encode(body, key or derive(SECRET, "jwt"), algorithm="HS256")


def b64(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


# -------------------------------------------------------- issue, verify
def test_a_token_verifies_to_the_caller_it_was_issued_for():
    assert verify_token(issue_token(BOB, SECRET), SECRET) == BOB
    assert verify_token(issue_token(ROOT_USER, SECRET), SECRET) == ROOT_USER


def test_a_token_issued_for_a_user_record_verifies_to_its_caller():
    record = {"id": 7, "username": "ann", "roles": ["approver"]}
    assert verify_token(issue_token(record, SECRET), SECRET) == Caller(7, "ann", ("approver",))


def test_a_token_built_like_the_server_would_verifies():  # the helpers below are sound
    assert verify_token(signed(claims()), SECRET) == BOB


def test_an_expired_token_is_unauthorized():
    token = issue_token(BOB, SECRET, lifetime=60, now=time.time() - 120)
    with pytest.raises(Unauthorized, match="token expired"):
        verify_token(token, SECRET)


def test_a_token_of_another_secret_is_unauthorized():
    with pytest.raises(Unauthorized, match="invalid token"):
        verify_token(issue_token(BOB, b"another-secret"), SECRET)


def test_a_token_whose_claims_were_changed_is_unauthorized():
    header, _, signature = issue_token(BOB, SECRET).split(".")
    forged = f"{header}.{b64(claims(roles=['admin']))}.{signature}"
    with pytest.raises(Unauthorized, match="invalid token"):
        verify_token(forged, SECRET)


def test_a_token_with_another_signature_is_unauthorized():
    header, payload, signature = issue_token(BOB, SECRET).split(".")
    middle = len(signature) // 2
    flipped = "A" if signature[middle] != "A" else "B"
    forged = f"{header}.{payload}.{signature[:middle]}{flipped}{signature[middle + 1:]}"
    with pytest.raises(Unauthorized, match="invalid token"):
        verify_token(forged, SECRET)


def test_an_unsigned_alg_none_token_is_unauthorized():
    forged = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims(roles=['admin']))}."
    with pytest.raises(Unauthorized, match="invalid token"):
        verify_token(forged, SECRET)


@pytest.mark.parametrize("changes", [{"aud": "another-api"}, {"iss": "someone-else"}])
def test_a_token_for_another_audience_or_issuer_is_unauthorized(changes):
    with pytest.raises(Unauthorized, match="invalid token"):
        verify_token(signed(claims(**changes)), SECRET)


@pytest.mark.parametrize("missing", ["exp", "sub", "uid"])
def test_a_token_missing_a_required_claim_is_unauthorized(missing):
    body = claims()
    del body[missing]
    with pytest.raises(Unauthorized, match="invalid token"):
        verify_token(signed(body), SECRET)


@pytest.mark.parametrize("token", [None, "", "not-a-token"])
def test_no_token_or_garbage_is_unauthorized(token):
    with pytest.raises(Unauthorized):
        verify_token(token, SECRET)


# ------------------------------------------------------------ the cache
def test_the_cache_serves_a_hit_without_verifying_again(monkeypatch):
    calls = []
    real = auth.verify_token

    def counted(token, secret=None):
        calls.append(token)
        return real(token, secret)
    monkeypatch.setattr(auth, "verify_token", counted)
    cache, token = TokenCache(SECRET), issue_token(BOB, SECRET)
    assert cache.verify(token) == BOB
    assert cache.verify(token) == BOB
    assert cache.verify(token) == BOB
    assert calls == [token]


def test_the_cache_refuses_a_cached_token_once_it_expired():
    cache = TokenCache(SECRET)
    token = issue_token(BOB, SECRET, lifetime=2)
    assert cache.verify(token) == BOB
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]
    time.sleep(max(0.0, expires - time.time()) + 0.05)
    with pytest.raises(Unauthorized, match="token expired"):
        cache.verify(token)


def test_the_cache_never_keeps_a_bad_token():
    cache = TokenCache(SECRET)
    bad = [issue_token(BOB, b"another-secret"),
           issue_token(BOB, SECRET, lifetime=60, now=time.time() - 120),
           signed(claims(aud="another-api"))]
    for token in bad + bad:  # twice: the second time is no hit either
        with pytest.raises(Unauthorized):
            cache.verify(token)
    assert cache.known == {}


def test_the_cache_refuses_a_changed_copy_of_a_cached_token():
    cache = TokenCache(SECRET)
    token = issue_token(BOB, SECRET)
    cache.verify(token)
    header, _, signature = token.split(".")
    with pytest.raises(Unauthorized):
        cache.verify(f"{header}.{b64(claims(roles=['admin']))}.{signature}")
    assert list(cache.known) == [token]


def test_the_cache_stays_within_its_size():
    cache = TokenCache(SECRET, size=2)
    tokens = [issue_token(Caller(i, f"u{i}"), SECRET) for i in range(5)]
    for i, token in enumerate(tokens):
        assert cache.verify(token).id == i
        assert len(cache.known) <= 2


# ------------------------------------------- the one sign-in limit
def test_sign_in_failures_count_against_the_process_wide_limit():
    for _ in range(SIGN_IN_FAILURES.limit - 1):
        auth.sign_in_failed("bob")
    assert auth.sign_in_allowed("bob") == 0
    auth.sign_in_failed("bob")
    assert auth.sign_in_allowed("bob") > 0 and SIGN_IN_FAILURES.blocked("bob") > 0
    assert auth.sign_in_allowed("ann") == 0


def token_status(store, username: str, password: str) -> int:
    """The status of the API's token endpoint (the real app, in process)."""
    app = create_app(lambda: store)

    async def post() -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://bpflow.test") as client:
            answer = await client.post("/api/auth/token",
                                       json={"username": username, "password": password})
            return answer.status_code
    return run_async(post())


API_CLIENT = "127.0.0.1"  # the address httpx's ASGI transport gives the API


def failed_auth_circle(store, units, inst_id: str, username: str) -> None:
    """A failed auth-circle sign-in from the client the API tests come from."""
    with pytest.raises(FormError, match="wrong username or password"):
        units.submit(inst_id, "auth", mark(store, inst_id, "auth"),
                     {"username": username, "password": "guess"}, client=API_CLIENT)


def test_auth_circle_failures_block_the_api_token_endpoint(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    people = users(store, "alice", "bob")
    inst = store.start("signin", {}, people["alice"])
    for _ in range(SIGN_IN_FAILURES.limit):
        failed_auth_circle(store, units, inst.id, "alice")
    assert SIGN_IN_FAILURES.blocked("alice", API_CLIENT) > 0
    assert token_status(store, "alice", "pw-alice") == 429  # even the right password
    assert token_status(store, "bob", "pw-bob") == 200  # per username


def test_api_token_failures_block_the_auth_circle(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    alice = users(store, "alice")["alice"]
    for _ in range(SIGN_IN_FAILURES.limit):
        assert token_status(store, "alice", "guess") == 401
    assert token_status(store, "alice", "pw-alice") == 429
    inst = store.start("signin", {}, alice)
    with pytest.raises(FormError, match="too many failed attempts"):
        units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                     {"username": "alice", "password": "pw-alice"}, client=API_CLIENT)
    assert store.get(inst.id).circles["auth"].state == "waiting"


def test_api_and_auth_circle_failures_add_up(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    alice = users(store, "alice")["alice"]
    inst = store.start("signin", {}, alice)
    half = SIGN_IN_FAILURES.limit // 2
    for _ in range(half):
        failed_auth_circle(store, units, inst.id, "alice")
    for _ in range(SIGN_IN_FAILURES.limit - half - 1):
        assert token_status(store, "alice", "guess") == 401
    assert SIGN_IN_FAILURES.blocked("alice", API_CLIENT) == 0  # one short of the limit
    failed_auth_circle(store, units, inst.id, "alice")
    assert token_status(store, "alice", "pw-alice") == 429


# -------------------------------- per account and client, growing back-off
class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failures_from_one_client_never_lock_out_another():
    limit = auth.SignInLimit(limit=10)
    for _ in range(10):
        limit.hit("alice", "10.0.0.66")  # someone guessing alice's password
    assert limit.blocked("alice", "10.0.0.66") > 0
    assert limit.blocked("alice", "10.0.0.1") == 0  # alice, from her own machine
    assert limit.blocked("bob", "10.0.0.66") == 0


def test_the_wait_grows_with_each_failure_after_the_limit():
    clock = Clock()
    limit = auth.SignInLimit(limit=3, first_wait=30.0, longest_wait=100.0, clock=clock)
    for _ in range(2):
        limit.hit("alice", "c")
    assert limit.blocked("alice", "c") == 0
    waits = []
    for _ in range(4):
        limit.hit("alice", "c")
        waits.append(limit.blocked("alice", "c"))
        clock.now += waits[-1]  # the next try comes when it is allowed, and fails
        assert limit.blocked("alice", "c") == 0
    assert waits == [30, 60, 100, 100]  # doubling, up to the longest wait


def test_a_quiet_pair_and_a_success_start_counting_again():
    clock = Clock()
    limit = auth.SignInLimit(limit=2, first_wait=30.0, forget_after=60.0, clock=clock)
    limit.hit("alice", "c")
    limit.hit("alice", "c")
    clock.now += 30 + 60
    assert limit.blocked("alice", "c") == 0 and limit.failures == {}
    limit.hit("alice", "c")
    limit.succeeded("alice", "c")
    limit.hit("alice", "c")
    assert limit.blocked("alice", "c") == 0  # one failure since the success


def test_one_client_failing_over_many_accounts_is_held_back():
    limit = auth.SignInLimit(limit=10, client_limit=5)
    for name in ("a", "b", "c", "d", "e"):
        limit.hit(name, "10.0.0.66")
    assert limit.blocked("f", "10.0.0.66") > 0  # password spraying
    assert limit.blocked("f", "10.0.0.1") == 0


def test_look_alike_usernames_count_as_the_account():
    limit = auth.SignInLimit(limit=2)
    limit.hit("alice", "c")
    limit.hit("ａｌｉｃｅ", "c")
    assert limit.blocked("alice", "c") > 0


def test_the_limit_keeps_to_its_size():
    limit = auth.SignInLimit(limit=10)
    limit.MAX_KEYS = 50
    for i in range(200):
        limit.hit(f"u{i}", f"10.0.{i}.1")
    assert len(limit.failures) <= 2 * limit.MAX_KEYS


def test_an_attacker_cannot_lock_the_owner_out_of_the_outer_flow(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    users(store, "alice")
    for _ in range(SIGN_IN_FAILURES.limit):
        assert units.sign_in("alice", "guess", client="10.0.0.66") is None
    with pytest.raises(RateLimited):
        units.sign_in("alice", "pw-alice", client="10.0.0.66")
    assert units.sign_in("alice", "pw-alice", client="10.0.0.1") is not None


def test_auth_circle_failures_count_per_client(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    alice = users(store, "alice")["alice"]
    inst = store.start("signin", {}, alice)
    for _ in range(SIGN_IN_FAILURES.limit):
        with pytest.raises(FormError, match="wrong username or password"):
            units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                         {"username": "alice", "password": "guess"}, client="10.0.0.66")
    with pytest.raises(FormError, match="too many failed attempts"):
        units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                     {"username": "alice", "password": "pw-alice"}, client="10.0.0.66")
    done = units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                        {"username": "alice", "password": "pw-alice"}, client="10.0.0.1")
    assert done.circles["auth"].state == "success"


def test_guesses_sent_at_once_are_not_all_tried():
    """At the last failure before the wait, twenty guesses sent together: one is tried,
    the others wait (each check counts the attempts still under way)."""
    import threading as _threading
    limit = auth.SignInLimit(limit=10)
    for _ in range(9):
        limit.hit("bob", "10.0.0.9")
    start = _threading.Barrier(20)
    allowed = []

    def guess():
        start.wait()
        allowed.append(limit.reserve("bob", "10.0.0.9") == 0)
    threads = [_threading.Thread(target=guess) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert allowed.count(True) == 1
    limit.hit("bob", "10.0.0.9")  # the one tried failed: now the pair waits
    assert limit.reserve("bob", "10.0.0.9") > 0
    assert limit.reserve("bob", "10.0.0.7") == 0  # the owner elsewhere is not held


def test_an_attempt_under_way_ends_with_its_outcome():
    limit = auth.SignInLimit(limit=2)
    assert limit.reserve("ann", "c") == 0
    limit.succeeded("ann", "c")
    assert limit.trying == {}
    assert limit.reserve("ann", "c") == 0
    assert limit.reserve("ann", "c") == 0  # two under way: the limit
    assert limit.reserve("ann", "c") > 0


# ------------------------------------------------ behind a reverse proxy (deploy/)
def test_behind_a_trusted_proxy_failures_count_per_forwarded_client(store, monkeypatch):
    """Behind a proxy every request comes from the proxy's address: with
    REFLEX_TRUSTED_PROXY_HOPS=1 (deploy/'s recipes) the API counts a client by the address
    the proxy forwards, so one guesser locks out only itself; without it, X-Forwarded-For
    is the client's own to write and is not believed."""
    users(store, "alice")
    app = create_app(lambda: store)

    def status(password: str, forwarded: str) -> int:
        async def post() -> int:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://bpflow.test") as client:
                answer = await client.post(
                    "/api/auth/token", headers={"X-Forwarded-For": forwarded},
                    json={"username": "alice", "password": password})
                return answer.status_code
        return run_async(post())

    monkeypatch.setenv("REFLEX_TRUSTED_PROXY_HOPS", "1")
    for _ in range(SIGN_IN_FAILURES.limit):
        assert status("guess", "10.0.0.66") == 401
    assert status("pw-alice", "10.0.0.66") == 429  # the guesser
    assert status("pw-alice", "203.0.113.7, 10.0.0.1") == 200  # alice, via the same proxy
    monkeypatch.delenv("REFLEX_TRUSTED_PROXY_HOPS")
    for i in range(SIGN_IN_FAILURES.limit):
        status("guess", f"10.9.{i}.1")  # a forged header changes nothing: one client
    assert status("pw-alice", "10.0.0.1") == 429
