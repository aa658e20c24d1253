"""What other rooms may name of the store besides `Store` (`bpflow.store`): its errors, its
constants and the few functions the services, the API, the pages, the CLI and bench/ use.
Everything else in the package is its own, and the layer contracts keep it so
(`[tool.importlinter]` in pyproject.toml: only `bpflow.store` and this module are
imported from outside it)."""

from __future__ import annotations

from bpflow.store.accounts import (
    ADMIN,
    APPROVER,
    DEFAULT_TENANT,
    INTEGRATION,
    ROLES,
    USER,
    USERNAME_MAX,
    USERNAME_PUNCTUATION,
    Caller,
    Standing,
    acting_for,
    check_password,
    hash_password,
    normal_username,
    reads_guest_mail,
    standing,
    username_problem,
    valid_roles,
    valid_username,
)
from bpflow.store.audience import named_in, tokens_of
from bpflow.store.changes import (
    EVERYTHING,
    Change,
    PgHub,
    instance_key,
    mail_keys,
    task_keys,
)
from bpflow.store.connection import database_url, normalize_url
from bpflow.store.errors import (
    AlreadyStarted,
    BadCursor,
    BadMigration,
    Conflict,
    NotFound,
    QuotaExceeded,
    RateLimited,
    StorageQuotaExceeded,
)
from bpflow.store.feed import TYPES, Attempt, FeedType
from bpflow.store.files import record as file_record
from bpflow.store.keys import MIN_SECRET_BYTES, SecretError, derive, home, load_secret
from bpflow.store.mail import MAIL_KINDS, MailKind
from bpflow.store.migrate import upgrade
from bpflow.store.operations import COUNT_MAX, DONE, OPERATION_MAX, PENDING, REFUSED
from bpflow.store.tables import circles_t, instances_t, mail_t, substitutes_t, users_t
from bpflow.store.tenants import FRAME_TEMPLATE, TENANT_NAME, valid_tenant
from bpflow.store.waits import FOLD_MAX, FOLD_PRESSED

__all__ = [
    "FOLD_MAX", "FOLD_PRESSED",
    # bulk operations (SPEC §18): an item's states, the lists' and operations' sizes
    "COUNT_MAX", "DONE", "OPERATION_MAX", "PENDING", "REFUSED",
    # errors, each one answer to the caller (the API's error map, the pages' messages)
    "AlreadyStarted", "BadCursor", "BadMigration", "Conflict", "NotFound", "QuotaExceeded",
    "RateLimited", "StorageQuotaExceeded",
    # accounts: who a caller is, role names, usernames, password hashes
    "ADMIN", "APPROVER", "DEFAULT_TENANT", "INTEGRATION", "ROLES", "USER", "USERNAME_MAX",
    "USERNAME_PUNCTUATION", "Caller", "Standing", "acting_for", "standing",
    "check_password", "hash_password", "normal_username", "reads_guest_mail",
    "username_problem", "valid_roles", "valid_username",
    # the server secret and its derived keys
    "MIN_SECRET_BYTES", "SecretError", "derive", "home", "load_secret",
    # whom a task names (audience tokens), and the changes pages follow
    "named_in", "tokens_of", "EVERYTHING", "Change", "PgHub", "instance_key", "mail_keys",
    "task_keys",
    # the event feed's types and webhook deliveries
    "TYPES", "Attempt", "FeedType",
    # an upload's record as a form holds it
    "file_record",
    # the kinds of mail
    "MAIL_KINDS", "MailKind",
    # tenants
    "FRAME_TEMPLATE", "TENANT_NAME", "valid_tenant",
    # the database: its URL, its schema version, tables bench/ loads or checks in bulk
    "database_url", "normalize_url", "upgrade", "circles_t", "instances_t", "mail_t",
    "substitutes_t", "users_t",
]
