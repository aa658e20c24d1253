"""The errors the store raises, each meaning one answer to the caller (the API's error map
turns each into its HTTP status, the web app into a message). The services add theirs
(`bpflow.errors`: not signed in, not allowed, tampered with) and name these from there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import BpflowError
from engine.messages import N_

if TYPE_CHECKING:
    from engine.instance import Instance


class NotFound(BpflowError, LookupError):
    """No such instance, template, mail or user, or not the caller's to see (HTTP 404)."""


class Conflict(BpflowError):
    """The thing kept changing under us; the caller may try again (HTTP 409)."""


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


class AlreadyStarted(Conflict):
    """An idempotent start whose instance exists already (`instance`, as stored)."""

    def __init__(self, instance: Instance):
        self.instance = instance
        super().__init__(N_("instance '%(id)s' was started with this key already",
                            id=instance.id))


class BadMigration(BpflowError, ValueError):
    """A migration request that cannot be carried out as asked (the API answers 422)."""


class BadCursor(ValueError):
    """A cursor of the event feed this store did not hand out."""
