"""POST /api/auth/token: a bearer token for a username and password, within the
process's one limit on failed sign-ins per account and client (`bpflow.auth`);
POST /api/auth/password: the caller changes their own password (the current one counted
as a sign-in), which ends every other session of theirs and answers the new token of
this one."""

from __future__ import annotations

from fastapi import APIRouter

from bpflow import accounts, auth
from bpflow.api.deps import CallerDep, ClientDep, InstallationDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import PasswordChangeIn, TokenIn, TokenOut
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


@router.post("/password", response_model=TokenOut, responses=responses(401, 422, 429))
def password(body: PasswordChangeIn, store: StoreDep, caller: CallerDep,
             client: ClientDep) -> TokenOut:
    """Change your own password: 422 `{"errors": {"current_password": ...}}` for a wrong
    current password (a failed sign-in, within the same limit: 429 when over it) or
    `{"errors": {"new_password": ...}}` for one of fewer than 8 characters. Every token
    of yours issued before is refused from now on; use the one answered."""
    user = accounts.change_password(store, caller, body.current_password,
                                    body.new_password, client)
    return TokenOut(access_token=auth.issue_token(user, store.secret),
                    expires_in=auth.LIFETIME_S)
