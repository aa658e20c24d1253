"""POST /api/auth/token: a bearer token for a username and password, within the
process's one limit on failed sign-ins per account and client (`bpflow.auth`)."""

from __future__ import annotations

from fastapi import APIRouter

from bpflow import auth
from bpflow.api.deps import ClientDep, InstallationDep
from bpflow.api.errors import responses
from bpflow.api.schemas import TokenIn, TokenOut
from bpflow.errors import RateLimited, Unauthorized
from engine.messages import N_

router = APIRouter(prefix="/api/auth", tags=["auth"])


@router.post("/token", response_model=TokenOut, responses=responses(401, 422, 429))
def token(body: TokenIn, store: InstallationDep, client: ClientDep) -> TokenOut:
    wait = auth.sign_in_allowed(body.username, client)
    if wait:
        raise RateLimited(N_("too many failed sign-ins; try again in %(n)s seconds", n=wait),
                          wait)
    found = store.authenticate(body.username, body.password)
    if found is None:
        auth.sign_in_failed(body.username, client)
        raise Unauthorized(N_("wrong username or password"))
    auth.sign_in_succeeded(body.username, client)
    return TokenOut(access_token=auth.issue_token(found, store.secret),
                    expires_in=auth.LIFETIME_S)
