"""POST /api/users/{username}/password: an admin gives someone of their tenant a new
password (SPEC §17), which ends every session of theirs (`bpflow.accounts`)."""

from __future__ import annotations

from fastapi import APIRouter, Path

from bpflow import accounts
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import PasswordResetIn, PasswordResetOut
from bpflow.security import normal_username

router = APIRouter(prefix="/api/users", tags=["users"])
UsernamePath = Path(max_length=100, description="the user's name")


@router.post("/{username}/password", response_model=PasswordResetOut,
             responses=responses(401, 403, 404, 422))
def reset_password(body: PasswordResetIn, store: StoreDep, caller: CallerDep,
                   username: str = UsernamePath) -> PasswordResetOut:
    """Admins, for the others of their tenant (their own password they change with
    `POST /api/auth/password`: 403); 404 for no such user of the tenant; 422
    `{"errors": {"password": ...}}` for one of fewer than 8 characters."""
    accounts.reset_password(store, username, body.password, by=caller)
    return PasswordResetOut(username=normal_username(username), sessions_ended=True)
