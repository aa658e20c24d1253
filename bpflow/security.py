"""The server secret (HMAC for bookmarks and approvals, JWT signing), the keys derived from
it, password hashes and usernames, as the services use them. They are defined in the store,
which needs them below the services (it signs bookmarks, opens with the configured secret,
hashes and checks passwords): `bpflow.store.keys` and `bpflow.store.accounts`, named here
through `bpflow.store.public`.

The secret comes from `BPFLOW_SECRET`, else from a file generated once with owner-only
permissions (`$BPFLOW_HOME/secret`); one shorter than 32 bytes, or a file others may read
or replace, is refused (`SecretError`). Usernames are NFKC-normalised, without spaces,
control or invisible characters.
"""

from __future__ import annotations

from bpflow.store.public import (
    MIN_SECRET_BYTES,
    SecretError,
    check_password,
    derive,
    hash_password,
    home,
    load_secret,
    normal_username,
    username_problem,
    valid_username,
)

__all__ = ["MIN_SECRET_BYTES", "SecretError", "check_password", "derive", "hash_password",
           "home", "load_secret", "normal_username", "username_problem", "valid_username"]
