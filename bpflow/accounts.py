"""Account basics (SPEC §17): a person changes their own password (the current one
required), an admin gives someone a new one (the web app's users page, the API, `bpflow
user password`), and either ends every other session of that account.

- What a password must be (`password_problem`): the same rule wherever one is set.
- Changing one's own password checks the current one as a sign-in does, and counts a
  wrong one against the same limit on failed sign-ins per account and client
  (`bpflow.auth.SIGN_IN_FAILURES`): the form cannot be used to guess a password that
  signing in would refuse to try.
- A change moves the account's token generation on (`Store.set_password`): every token
  issued before is refused (by the API and the web app alike, within the users-table
  cache's seconds). The session that changed its own password goes on with a new token,
  issued from the record `change_password` returns.
- Who may reset whose password is `bpflow.access`'s (`password_resettable`).
"""

from __future__ import annotations

from typing import Any

from bpflow import audit, auth
from bpflow.access import Caller, password_resettable
from bpflow.errors import RateLimited
from bpflow.forms import FormError
from bpflow.security import normal_username
from bpflow.store import Store
from engine.messages import N_

MIN_PASSWORD = 8
MAX_PASSWORD = 1000  # what a sign-in accepts (the API's `TokenIn`)


def password_problem(password: str) -> str | None:
    """Why `password` cannot be a password, or None."""
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        return N_("a password has %(min)s to %(max)s characters", min=MIN_PASSWORD,
                  max=MAX_PASSWORD)
    return None


def change_password(store: Store, caller: Caller, current: str, new: str,
                    client: str | None = None) -> dict[str, Any]:
    """The caller's own password changed from `current` to `new` (`store` seen from their
    tenant), every session of theirs ended: their user record under the new token
    generation, for the token of the session that goes on. FormError names the field
    (`new_password` breaking the rule, checked first and counting nothing;
    `current_password` wrong, a failed sign-in); RateLimited while that account and
    `client` are over the sign-in limit, right password or not."""
    problem = password_problem(new)
    if problem:
        raise FormError({"new_password": problem})
    wait = auth.sign_in_allowed(caller.username, client)
    if wait:
        raise RateLimited(N_("too many failed sign-ins; try again in %(n)s seconds", n=wait),
                          wait)
    user = store.authenticate(caller.username, current)
    if user is None or user["id"] != caller.id:
        auth.sign_in_failed(caller.username, client)
        raise FormError({"current_password": N_("wrong password")})
    auth.sign_in_succeeded(caller.username, client)
    generation = store.set_password(caller.username, new)
    return {**user, "generation": generation}


def reset_password(store: Store, username: str, new: str, by: Caller | None = None) -> None:
    """An administrator (`by`; None: the installation's operator, `bpflow user password`)
    gives `username` of `store`'s tenant a new password, ending every session of theirs.
    Forbidden unless `by` may (`access.password_resettable`); FormError (`password`) for a
    password breaking the rule; NotFound for no such user."""
    if by is not None:
        password_resettable(by, username)
    problem = password_problem(new)
    if problem:
        raise FormError({"password": problem})
    store.set_password(username, new)
    audit.record(store, by, "password_reset", normal_username(username))
