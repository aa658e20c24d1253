"""The errors of bpflow's services, each meaning one answer to the caller (the API's
error map turns each into its HTTP status; the web app into a message)."""

from __future__ import annotations

from engine.errors import BpflowError


class Unauthorized(BpflowError):
    """No valid token: missing, forged or expired (HTTP 401)."""


class Forbidden(BpflowError, PermissionError):
    """The caller may not do this (not the addressee, not an admin) (HTTP 403)."""


class NotFound(BpflowError, LookupError):
    """No such instance, template, mail or user, or not the caller's to see (HTTP 404)."""


class Conflict(BpflowError):
    """The thing kept changing under us; the caller may try again (HTTP 409)."""


class Tampered(BpflowError):
    """A mail or decision whose signature does not match: refused (HTTP 409)."""


class RateLimited(BpflowError):
    """Too many requests; `retry_after` seconds until the next is allowed (HTTP 429)."""

    def __init__(self, message: str, retry_after: int):
        self.retry_after = retry_after
        super().__init__(message)


class QuotaExceeded(BpflowError):
    """A tenant's quota (SPEC §12) would be exceeded: its running instances or its
    templates (HTTP 429)."""


class StorageQuotaExceeded(QuotaExceeded):
    """A step would store more variables than the tenant's quota allows (HTTP 413)."""
