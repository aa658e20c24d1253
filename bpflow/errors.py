"""The errors of bpflow's services, each meaning one answer to the caller (the API's
error map turns each into its HTTP status; the web app into a message). Those the store
raises too are the store's (`bpflow.store.errors`), named here as well."""

from __future__ import annotations

from bpflow.store.public import (
    Conflict,
    NotFound,
    QuotaExceeded,
    RateLimited,
    StorageQuotaExceeded,
)
from engine.errors import BpflowError

__all__ = ["BpflowError", "Conflict", "Forbidden", "NotFound", "QuotaExceeded", "RateLimited",
           "Refused", "StorageQuotaExceeded", "Tampered", "Unauthorized"]


class Unauthorized(BpflowError):
    """No valid token: missing, forged or expired (HTTP 401)."""


class Forbidden(BpflowError, PermissionError):
    """The caller may not do this (not the addressee, not an admin) (HTTP 403)."""


class Tampered(BpflowError):
    """A mail or decision whose signature does not match: refused (HTTP 409)."""


class Refused(BpflowError, ValueError):
    """A request that cannot be as asked, with the reason (a substitute who is the user,
    disabled or a cycle; dates reversed) (HTTP 422)."""
