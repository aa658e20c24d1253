"""The schema (SPEC §6) as plain SQLModel tables; Alembic migrations mirror it.

Template versions are immutable once instantiated: the foreign key from instances
refuses deletes, and triggers (see the initial migration) refuse updates and deletes
of a version that has instances, even from raw SQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlmodel import Field, SQLModel

from bpflow.store.accounts import DEFAULT_TENANT
from bpflow.store.connection import UTCDateTime

# the characters of a failed circle's reason its indexes hold (`failed_circles`, migration
# 0023): an index entry of PostgreSQL holds at most ~2,700 bytes, a reason may be longer
REASON_KEY = 100


def _time(nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime, nullable=nullable, index=index))


def _json(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=nullable))




def _tenant(index: bool = False) -> Any:
    """The tenant a row belongs to (SPEC §12); rows that point at each other point with it
    too (composite foreign keys), so a row can never reference another tenant's."""
    return Field(default=DEFAULT_TENANT, sa_column=Column(
        String(63), ForeignKey("tenants.name", ondelete="RESTRICT"), nullable=False,
        server_default=DEFAULT_TENANT, index=index))


def _in_tenant(columns: tuple[str, ...], table: str, targets: tuple[str, ...],
               ondelete: str = "RESTRICT", name: str = "") -> ForeignKeyConstraint:
    """A foreign key that also names the tenant: (tenant, *columns) → table(tenant, ...)."""
    return ForeignKeyConstraint(["tenant", *columns],
                                [f"{table}.tenant", *(f"{table}.{t}" for t in targets)],
                                ondelete=ondelete, name=name or None)


class TenantRow(SQLModel, table=True):
    """An organisation served by this installation (SPEC §12). `default` exists from the
    start; `quotas` holds its limits (`bpflow.quotas`), null for none."""

    __tablename__ = "tenants"

    name: str = Field(sa_column=Column(String(63), primary_key=True))
    created_at: datetime = _time()
    quotas: dict[str, Any] | None = _json()


class UserRow(SQLModel, table=True):
    """A user is disabled, never deleted; ids are never reused (SQLite: AUTOINCREMENT;
    PostgreSQL: a sequence), so a token can never come to name someone else."""

    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("tenant", "id", name="uq_users_tenant_id"),
                      {"sqlite_autoincrement": True})

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = _tenant()
    username: str = Field(sa_column=Column(String(100), nullable=False, unique=True))
    password_hash: str = Field(sa_column=Column(String(255), nullable=False))
    roles: list[str] = _json(nullable=False)
    created_at: datetime = _time()
    disabled_at: datetime | None = _time(nullable=True)
    # the language the web app speaks to them (`en`, `zh-CN`); null: their browser's
    language: str | None = Field(default=None, sa_column=Column(String(16), nullable=True))
    # counts the changes of their password: a token names the one it was issued under,
    # and one of an earlier is refused (every session ends when the password changes)
    token_generation: int = Field(default=0, sa_column=Column(Integer, nullable=False,
                                                              server_default="0"))


class TemplateVersion(SQLModel, table=True):
    __tablename__ = "templates"
    __table_args__ = (
        UniqueConstraint("tenant", "name", "version", name="uq_templates_tenant_name_version"),
        UniqueConstraint("tenant", "id", name="uq_templates_tenant_id"),
        Index("ix_templates_sandbox", "created_at", sqlite_where=text("sandbox"),
              postgresql_where=text("sandbox")),  # sandboxes a day old (migration 0020)
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = _tenant()
    name: str = Field(sa_column=Column(String(100), nullable=False, index=True))
    version: int = Field(sa_column=Column(Integer, nullable=False))
    body: dict[str, Any] = _json(nullable=False)
    digest: str = Field(sa_column=Column(String(64), nullable=False))
    created_at: datetime = _time()
    stop_at: datetime | None = _time(nullable=True)  # the body's `stop_at` (SPEC §11)
    # a draft's body a sandbox instance runs (SPEC §16 "Try it"), named outside the names
    # templates may have: never a version of a template, in no list (migration 0020)
    sandbox: bool = Field(default=False, sa_column=Column(Boolean, nullable=False,
                                                          server_default=false()))


class InstanceRow(SQLModel, table=True):
    __tablename__ = "instances"
    __table_args__ = (
        Index("ix_instances_user_template", "user_id", "template"),
        Index("ix_instances_tenant_created", "tenant", "created_at"),
        Index("ix_instances_batch", "batch", "tenant", "status", "version",  # crowds.py
              sqlite_where=text("batch IS NOT NULL"),
              postgresql_where=text("batch IS NOT NULL")),
        # the operations page's filtered lists (SPEC §18, migration 0022), newest first
        Index("ix_instances_ops_status", "tenant", "status", "created_at"),
        Index("ix_instances_ops_template", "tenant", "template", "status", "created_at"),
        Index("ix_instances_ops_updated", "tenant", "updated_at"),
        UniqueConstraint("tenant", "id", name="uq_instances_tenant_id"),
        _in_tenant(("template_id",), "templates", ("id",), name="fk_instances_template"),
        _in_tenant(("user_id",), "users", ("id",), name="fk_instances_user"),
    )

    id: str = Field(sa_column=Column(String(32), primary_key=True))
    tenant: str = _tenant()
    template_id: int = Field(sa_column=Column(
        Integer, ForeignKey("templates.id", ondelete="RESTRICT"), nullable=False, index=True))
    template: str = Field(sa_column=Column(String(100), nullable=False))
    version: int = Field(sa_column=Column(Integer, nullable=False))
    nested_versions: dict[str, int] = _json(nullable=False)
    user_id: int | None = Field(default=None, sa_column=Column(
        Integer, ForeignKey("users.id", ondelete="RESTRICT"), nullable=True))
    user: dict[str, Any] = _json(nullable=False)
    status: str = Field(sa_column=Column(String(20), nullable=False, index=True))
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    inputs: dict[str, Any] = _json(nullable=False)
    variables: dict[str, Any] = _json(nullable=False)
    seq: int = Field(sa_column=Column(Integer, nullable=False))
    lock_version: int = Field(sa_column=Column(Integer, nullable=False))
    due_at: datetime | None = _time(nullable=True, index=True)
    lease_owner: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    lease_until: datetime | None = _time(nullable=True)
    created_at: datetime = _time()
    updated_at: datetime = _time()
    batch: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))
    # a draft tried in the designer (SPEC §16): in no list, count, feed or quota, never due
    # for the worker, deleted after a day (`bpflow.sandbox`)
    sandbox: bool = Field(default=False, sa_column=Column(Boolean, nullable=False,
                                                          server_default=false()))


class InstanceTemplate(SQLModel, table=True):
    """The nested template versions an instance pinned at start: locked like its own."""

    __tablename__ = "instance_templates"
    __table_args__ = (
        _in_tenant(("instance_id",), "instances", ("id",), "CASCADE",
                   name="fk_instance_templates_instance"),
        _in_tenant(("template_id",), "templates", ("id",), name="fk_instance_templates_template"),
    )

    tenant: str = _tenant()
    instance_id: str = Field(sa_column=Column(
        String(32), ForeignKey("instances.id", ondelete="CASCADE"), primary_key=True))
    template_id: int = Field(sa_column=Column(
        Integer, ForeignKey("templates.id", ondelete="RESTRICT"), primary_key=True,
        index=True))


class CircleStateRow(SQLModel, table=True):
    __tablename__ = "circle_states"
    __table_args__ = (
        Index("ix_circle_states_people", "instance_id",
              sqlite_where=text("people IS NOT NULL"),
              postgresql_where=text("people IS NOT NULL")),
        Index("ix_circle_states_signal", "tenant", "signal",
              sqlite_where=text("signal IS NOT NULL"),
              postgresql_where=text("signal IS NOT NULL")),
        # a crowd's counts per circle and state (`Crowds.batch_stats`): only its rows, so
        # a step of any other instance has no index entry to move
        Index("ix_circle_states_batch", "tenant", "batch", "circle", "state",
              sqlite_where=text("batch IS NOT NULL"),
              postgresql_where=text("batch IS NOT NULL")),
        # the operations page (SPEC §18, migrations 0022 and 0023; failed circles are
        # `failed_circles`'): circles waiting since (`waiting_hours`), open tasks past
        # their due time in the order they are listed; each holds only the rows it is about
        Index("ix_circle_states_waiting", "tenant", "ready_at",
              sqlite_where=text("state = 'waiting' AND ready_at IS NOT NULL"),
              postgresql_where=text("state = 'waiting' AND ready_at IS NOT NULL")),
        Index("ix_circle_states_overdue", "tenant", "due_at", "instance_id", "circle",
              sqlite_where=text("audience IS NOT NULL AND due_at IS NOT NULL"),
              postgresql_where=text("audience IS NOT NULL AND due_at IS NOT NULL")),
        _in_tenant(("instance_id",), "instances", ("id",), "CASCADE",
                   name="fk_circle_states_instance"),
    )

    tenant: str = _tenant()
    instance_id: str = Field(sa_column=Column(
        String(32), ForeignKey("instances.id", ondelete="CASCADE"), primary_key=True))
    circle: str = Field(sa_column=Column(String(400), primary_key=True))
    state: str = Field(sa_column=Column(String(10), nullable=False))
    result: Any = _json()
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    attempts: int = Field(sa_column=Column(Integer, nullable=False))
    next_attempt_at: datetime | None = _time(nullable=True)
    ready_at: datetime | None = _time(nullable=True)
    due_at: datetime | None = _time(nullable=True)
    epoch: int = Field(sa_column=Column(Integer, nullable=False))
    pending: Any = _json()
    task: Any = _json()  # a person's task (engine.tasks), with the two columns it searches by
    nudges: Any = _json()  # copies and reminders sent (engine.nudges, SPEC §15)
    audience: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    people: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # the signal a ready `signal` circle waits for ("name\x1fkey", SPEC §11), else null
    signal: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # the crowd (`instances.batch`) of its instance, written when the row is inserted
    batch: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))


class TaskAudienceRow(SQLModel, table=True):
    """Who an open task waits for, one row per token (`store.audience.audience`: "a:NAME"
    for its holder, else "u:NAME" and "r:ROLE" for its candidates), written with the
    circle's row in the same step: what a task list is read by (its index)."""

    __tablename__ = "task_audience"
    __table_args__ = (
        Index("ix_task_audience_who", "tenant", "who", "ready_at"),
        _in_tenant(("instance_id",), "instances", ("id",), "CASCADE",
                   name="fk_task_audience_instance"),
    )

    tenant: str = _tenant()
    instance_id: str = Field(sa_column=Column(
        String(32), ForeignKey("instances.id", ondelete="CASCADE"), primary_key=True))
    circle: str = Field(sa_column=Column(String(400), primary_key=True))
    who: str = Field(sa_column=Column(String(150), primary_key=True))
    ready_at: datetime | None = _time(nullable=True)


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("instance_id", "seq", name="uq_events_instance_seq"),
        # the event feed (SPEC §11) on PostgreSQL; SQLite's feed reads ids in order (one
        # writer at a time), so each step there is spared the index's page
        Index("ix_events_feed", "tenant", "tx", "id").ddl_if(dialect="postgresql"),
        _in_tenant(("instance_id",), "instances", ("id",), "CASCADE",
                   name="fk_events_instance"),
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = _tenant()
    instance_id: str = Field(sa_column=Column(
        String(32), ForeignKey("instances.id", ondelete="CASCADE"), nullable=False))
    seq: int = Field(sa_column=Column(Integer, nullable=False))
    at: datetime = _time()
    kind: str = Field(sa_column=Column(String(40), nullable=False))
    actor: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    circle: str | None = Field(default=None, sa_column=Column(String(400), nullable=True))
    before: Any = _json()
    after: Any = _json()
    data: Any = _json()
    # PostgreSQL: the writing transaction's id (a server default, migration 0009), so the
    # feed reads only what no running transaction can still precede; SQLite: null (one
    # writer at a time: ids are in commit order)
    tx: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))


class MailRow(SQLModel, table=True):
    __tablename__ = "mailbox"
    __table_args__ = (
        # A page of the inbox is the top of this index; the counts read only the second.
        Index("ix_mailbox_list", "recipient_id", "kind", "created_at", "id"),
        Index("ix_mailbox_counts", "recipient_id", "kind", "read_at", "decision"),
        Index("uq_mailbox_request", "instance_id", "circle", "epoch", "recipient_id",
              unique=True),  # one request mail per attempt and recipient
        # one copy (SPEC §15) per instance, circle (none: an ad hoc copy) and recipient
        Index("uq_mailbox_cc", "instance_id", text("coalesce(circle, '')"), "recipient_id",
              unique=True, sqlite_where=text("kind = 'cc'"),
              postgresql_where=text("kind = 'cc'")),
        Index("ix_mailbox_guests", "tenant", "kind", "recipient_id", "created_at"),
        _in_tenant(("sender_id",), "users", ("id",), name="fk_mailbox_sender"),
        _in_tenant(("recipient_id",), "users", ("id",), name="fk_mailbox_recipient"),
        _in_tenant(("instance_id",), "instances", ("id",), name="fk_mailbox_instance"),
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = _tenant()
    kind: str = Field(sa_column=Column(String(20), nullable=False))  # MAIL_KINDS (mail.py)
    sender_id: int | None = Field(default=None, sa_column=Column(
        Integer, ForeignKey("users.id", ondelete="RESTRICT"), nullable=True))
    sender_name: str = Field(sa_column=Column(String(100), nullable=False))
    recipient_id: int | None = Field(default=None, sa_column=Column(
        Integer, ForeignKey("users.id", ondelete="RESTRICT"), nullable=True))
    subject: str = Field(sa_column=Column(String(300), nullable=False))
    body: str = Field(sa_column=Column(Text, nullable=False))
    payload: Any = _json()
    signature: str | None = Field(default=None, sa_column=Column(String(128), nullable=True))
    decision_signature: str | None = Field(default=None, sa_column=Column(String(128),
                                                                          nullable=True))
    decision: str | None = Field(default=None, sa_column=Column(String(20), nullable=True))
    comment: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    instance_id: str | None = Field(default=None, sa_column=Column(
        String(32), ForeignKey("instances.id", ondelete="RESTRICT"), nullable=True))
    circle: str | None = Field(default=None, sa_column=Column(String(400), nullable=True))
    epoch: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    client: str | None = Field(default=None, sa_column=Column(String(64), nullable=True,
                                                              index=True))  # guests: hashed IP
    created_at: datetime = _time()
    updated_at: datetime | None = _time(nullable=True)
    read_at: datetime | None = _time(nullable=True)
    # who took the decision: the addressee, or their substitute ("ann for bob", SPEC §15);
    # null for a mail closed unanswered and for decisions stored before it was kept
    decided_by: str | None = Field(default=None, sa_column=Column(String(210), nullable=True))


class SubstituteRow(SQLModel, table=True):
    """A user's substitute (代理人, SPEC §15): from `starts_at` until `ends_at` the work
    addressed to `user_id` by name (of the listed `templates`, null for every template) is
    also offered to `to_id`. One per user; `set_by` names who set it (the user or an
    admin). A task list finds what a person stands in for by `ix_substitutes_to`."""

    __tablename__ = "substitutes"
    __table_args__ = (
        Index("ix_substitutes_to", "to_id", "ends_at"),
        _in_tenant(("user_id",), "users", ("id",), "CASCADE", name="fk_substitutes_user"),
        _in_tenant(("to_id",), "users", ("id",), "CASCADE", name="fk_substitutes_to"),
    )

    tenant: str = _tenant()
    user_id: int = Field(sa_column=Column(
        Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True,
        autoincrement=False))
    to_id: int = Field(sa_column=Column(
        Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False))
    starts_at: datetime = _time()
    ends_at: datetime = _time()
    templates: list[str] | None = _json()
    set_by: str = Field(sa_column=Column(String(100), nullable=False))
    set_at: datetime = _time()


def _table_of(model: type[SQLModel]) -> Table:
    """A model's table (SQLModel sets it; its type hints do not declare it)."""
    return model.__table__  # type: ignore[attr-defined]


users_t = _table_of(UserRow)
templates_t = _table_of(TemplateVersion)
instances_t = _table_of(InstanceRow)
pinned_t = _table_of(InstanceTemplate)
circles_t = _table_of(CircleStateRow)
events_t = _table_of(EventRow)
mail_t = _table_of(MailRow)
audience_t = _table_of(TaskAudienceRow)
substitutes_t = _table_of(SubstituteRow)


class TemplateRetirement(SQLModel, table=True):
    """A retired template (every version of the name): no new starts; restoring deletes
    the row (SPEC §10)."""

    __tablename__ = "template_retirements"

    tenant: str = Field(default=DEFAULT_TENANT, sa_column=Column(
        String(63), ForeignKey("tenants.name", ondelete="RESTRICT"), primary_key=True,
        server_default=DEFAULT_TENANT))
    name: str = Field(sa_column=Column(String(100), primary_key=True))
    retired_at: datetime = _time()
    retired_by: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))


retired_t = _table_of(TemplateRetirement)
tenants_t = _table_of(TenantRow)


class WebhookRow(SQLModel, table=True):
    """An admin's subscription to the event feed (SPEC §11): every event of the listed
    types is POSTed to `url`, signed with `secret`. `cursor` is how far the feed has been
    handed out to deliveries; a webhook that keeps failing is disabled with the reason."""

    __tablename__ = "webhooks"
    __table_args__ = (UniqueConstraint("tenant", "id", name="uq_webhooks_tenant_id"),
                      {"sqlite_autoincrement": True})

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = _tenant(index=True)
    url: str = Field(sa_column=Column(Text, nullable=False))
    events: list[str] = _json(nullable=False)
    secret: str = Field(sa_column=Column(String(200), nullable=False))
    created_by: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    created_at: datetime = _time()
    cursor: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    failures: int = Field(default=0, sa_column=Column(Integer, nullable=False,
                                                      server_default="0"))
    disabled_at: datetime | None = _time(nullable=True)
    disabled_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class DeliveryRow(SQLModel, table=True):
    """One event handed to one webhook: its attempts, last answer and state
    (`pending` until a 2xx, then `delivered`; `failed` when the webhook was disabled)."""

    __tablename__ = "deliveries"
    __table_args__ = (
        UniqueConstraint("webhook_id", "event_id", name="uq_deliveries_webhook_event"),
        Index("ix_deliveries_due", "state", "next_at"),
        Index("ix_deliveries_webhook", "webhook_id", "id"),
        _in_tenant(("webhook_id",), "webhooks", ("id",), "CASCADE",
                   name="fk_deliveries_webhook"),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = _tenant()
    webhook_id: int = Field(sa_column=Column(
        Integer, ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False))
    event_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    body: Any = _json(nullable=False)  # the event as delivered (the same bytes each time)
    state: str = Field(sa_column=Column(String(10), nullable=False))
    attempts: int = Field(sa_column=Column(Integer, nullable=False))
    status_code: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    next_at: datetime | None = _time(nullable=True)
    created_at: datetime = _time()
    delivered_at: datetime | None = _time(nullable=True)


class BatchRow(SQLModel, table=True):
    """A crowd started in one request (SPEC §11): one instance per user, each with
    `instances.batch` naming the batch."""

    __tablename__ = "batches"
    __table_args__ = (UniqueConstraint("tenant", "id", name="uq_batches_tenant_id"),)

    id: str = Field(sa_column=Column(String(32), primary_key=True))
    tenant: str = _tenant()
    template: str = Field(sa_column=Column(String(100), nullable=False))
    version: int = Field(sa_column=Column(Integer, nullable=False))
    started: int = Field(sa_column=Column(Integer, nullable=False))
    created_by: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    created_at: datetime = _time()


class FileRow(SQLModel, table=True):
    """An upload (SPEC §15): its record (name, size, sha256, sniffed type) and who sent it.
    `instance_id` is null until a form of that instance holds it (then whoever sees the
    instance may download it); an upload still unused a day later is removed. The bytes
    are kept once per content hash (`file_blobs`, or a folder: `BPFLOW_FILES_DIR`)."""

    __tablename__ = "files"
    __table_args__ = (
        Index("ix_files_instance", "tenant", "instance_id"),
        Index("ix_files_unused", "created_at", sqlite_where=text("instance_id IS NULL"),
              postgresql_where=text("instance_id IS NULL")),
        Index("ix_files_owner", "tenant", "owner_id", "created_at"),
        _in_tenant(("owner_id",), "users", ("id",), name="fk_files_owner"),
        _in_tenant(("instance_id",), "instances", ("id",), "CASCADE",
                   name="fk_files_instance"),
    )

    id: str = Field(sa_column=Column(String(32), primary_key=True))
    tenant: str = _tenant()
    owner_id: int = Field(sa_column=Column(
        Integer, ForeignKey("users.id", ondelete="RESTRICT"), nullable=False))
    owner: str = Field(sa_column=Column(String(100), nullable=False))
    name: str = Field(sa_column=Column(String(255), nullable=False))
    size: int = Field(sa_column=Column(BigInteger, nullable=False))
    sha256: str = Field(sa_column=Column(String(64), nullable=False))
    type: str = Field(sa_column=Column(String(100), nullable=False))
    instance_id: str | None = Field(default=None, sa_column=Column(
        String(32), ForeignKey("instances.id", ondelete="CASCADE"), nullable=True))
    circle: str | None = Field(default=None, sa_column=Column(String(400), nullable=True))
    created_at: datetime = _time()


class FileBlobRow(SQLModel, table=True):
    """The bytes of uploads, once per tenant and content hash (when kept in the database)."""

    __tablename__ = "file_blobs"

    tenant: str = Field(default=DEFAULT_TENANT, sa_column=Column(
        String(63), ForeignKey("tenants.name", ondelete="RESTRICT"), primary_key=True,
        server_default=DEFAULT_TENANT))
    sha256: str = Field(sa_column=Column(String(64), primary_key=True))
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


files_t = _table_of(FileRow)
blobs_t = _table_of(FileBlobRow)
webhooks_t = _table_of(WebhookRow)
deliveries_t = _table_of(DeliveryRow)
batches_t = _table_of(BatchRow)


class DraftRow(SQLModel, table=True):
    """A template being designed in the browser (SPEC §16), its author's: a body kept as it
    is, finished or not (`name` is the body's, "" while it has none), until it is
    published (as a version: `templates`) or deleted. Found by its author
    (`ix_drafts_author`)."""

    __tablename__ = "drafts"
    __table_args__ = (
        Index("ix_drafts_author", "tenant", "author_id"),
        _in_tenant(("author_id",), "users", ("id",), "CASCADE", name="fk_drafts_author"),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = _tenant()
    author_id: int = Field(sa_column=Column(
        Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False))
    name: str = Field(sa_column=Column(String(100), nullable=False))
    body: Any = _json(nullable=False)
    created_at: datetime = _time()
    updated_at: datetime = _time()


class LayoutRow(SQLModel, table=True):
    """Where the designer draws a template's circles (SPEC §16): `{path: {"x", "y"}}`, the
    positions last published, whatever version they came with. Beside the versions, not in
    them: moving circles makes no new version and never changes a locked one."""

    __tablename__ = "template_layouts"

    tenant: str = Field(default=DEFAULT_TENANT, sa_column=Column(
        String(63), ForeignKey("tenants.name", ondelete="RESTRICT"), primary_key=True,
        server_default=DEFAULT_TENANT))
    name: str = Field(sa_column=Column(String(100), primary_key=True))
    positions: dict[str, Any] = _json(nullable=False)
    updated_at: datetime = _time()
    updated_by: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))


class AuditRow(SQLModel, table=True):
    """What an admin did (SPEC §18's audit log): who (`actor_id`, `actor` as named then;
    both null for the installation's operator, on the command line), when, what (`kind`,
    one of `bpflow.audit.KINDS`), to what (`target`), the state `before` and `after`
    (JSON). Append-only: nothing in the code updates or deletes a row, and triggers
    refuse both (migration 0021). Read by tenant newest last (`ix_audit_tenant`)."""

    __tablename__ = "audit"
    __table_args__ = (
        Index("ix_audit_tenant", "tenant", "id"),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = _tenant()
    at: datetime = _time()
    actor_id: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    actor: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    kind: str = Field(sa_column=Column(String(40), nullable=False))
    target: str = Field(sa_column=Column(String(200), nullable=False))
    before: Any = _json()
    after: Any = _json()


class OperationRow(SQLModel, table=True):
    """A bulk operation (SPEC §18): `action` (retry, abort, suspend, resume, migrate) with
    its `params`, on the instances matched when it was asked for (`operation_items`), by
    an admin of the tenant; applied by a worker holding its lease (`lease_owner`,
    `lease_until`), counted as it goes (`done`, `refused`), `finished_at` once every item
    has its result. Claimed by the unfinished ones' index (`ix_operations_open`)."""

    __tablename__ = "operations"
    __table_args__ = (
        Index("ix_operations_tenant", "tenant", "created_at"),
        Index("ix_operations_open", "lease_until", sqlite_where=text("finished_at IS NULL"),
              postgresql_where=text("finished_at IS NULL")),
    )

    id: str = Field(sa_column=Column(String(32), primary_key=True))
    tenant: str = _tenant()
    action: str = Field(sa_column=Column(String(20), nullable=False))
    params: dict[str, Any] = _json(nullable=False)
    filter: Any = _json()  # what the instances were matched by; null: listed by id
    created_by_id: int = Field(sa_column=Column(Integer, nullable=False))
    created_by: str = Field(sa_column=Column(String(100), nullable=False))
    created_at: datetime = _time()
    matched: int = Field(sa_column=Column(Integer, nullable=False))
    done: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    refused: int = Field(default=0, sa_column=Column(Integer, nullable=False,
                                                     server_default="0"))
    finished_at: datetime | None = _time(nullable=True)
    lease_owner: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    lease_until: datetime | None = _time(nullable=True)


class OperationItemRow(SQLModel, table=True):
    """One instance of a bulk operation: `pending`, then `done` or `refused` (with the
    `reason`), written once. Pending ones are read in id order (`ix_operation_items_state`)."""

    __tablename__ = "operation_items"
    __table_args__ = (
        Index("ix_operation_items_state", "operation_id", "state", "instance_id"),
    )

    operation_id: str = Field(sa_column=Column(
        String(32), ForeignKey("operations.id", ondelete="CASCADE"), primary_key=True))
    instance_id: str = Field(sa_column=Column(String(32), primary_key=True))
    state: str = Field(sa_column=Column(String(10), nullable=False))
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    at: datetime | None = _time(nullable=True)


class WaitCursorRow(SQLModel, table=True):
    """How far the history is folded into the durations (`bpflow.store.waits`): one row,
    a feed position."""

    __tablename__ = "wait_cursor"

    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    position: str = Field(sa_column=Column(String(60), nullable=False))


class WaitRoundRow(SQLModel, table=True):
    """A circle's round not yet ended: since when it is ready (`bpflow.store.waits`)."""

    __tablename__ = "wait_rounds"

    tenant: str = _tenant()
    instance_id: str = Field(sa_column=Column(String(32), primary_key=True))
    circle: str = Field(sa_column=Column(String(400), primary_key=True))
    ready_at: datetime = _time()


class WaitBucketRow(SQLModel, table=True):
    """How many rounds of a circle ("" for whole instances) of a template version ended
    on a UTC `day` (YYYY-MM-DD; "*": any day) with a duration in `bucket`, and the
    longest (seconds)."""

    __tablename__ = "wait_buckets"

    tenant: str = Field(default=DEFAULT_TENANT, sa_column=Column(
        String(63), ForeignKey("tenants.name", ondelete="RESTRICT"), primary_key=True,
        server_default=DEFAULT_TENANT))
    template: str = Field(sa_column=Column(String(100), primary_key=True))
    version: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    circle: str = Field(sa_column=Column(String(400), primary_key=True))
    day: str = Field(sa_column=Column(String(10), primary_key=True))
    bucket: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    count: int = Field(sa_column=Column(Integer, nullable=False))
    max: float = Field(sa_column=Column(Float, nullable=False))


class FailedCircleRow(SQLModel, table=True):
    """A failed circle (never a sandbox's), with what the operations page groups, filters
    and orders failed circles by (SPEC §18): its instance's `template` and `created_at`,
    its `reason` and the reason's first REASON_KEY characters (`reason_key`: an index
    entry holds it however long the reason is), and `active`: its instance is running,
    failed or suspended (an incident). Written by triggers only (migration 0023), in the
    transaction that writes the circle's or the instance's row, from both rows as they
    are then; gone with the circle's row (the foreign key). An incident group is a range
    of `ix_failed_circles_incidents` (after `active`), its newest instances its top; the
    instances with a failed circle (and reason) are the top of `ix_failed_circles_list`."""

    __tablename__ = "failed_circles"
    __table_args__ = (
        Index("ix_failed_circles_incidents", "tenant", "active", "template", "circle",
              "reason_key", "created_at", "instance_id"),
        Index("ix_failed_circles_list", "tenant", "circle", "reason_key", "created_at",
              "instance_id"),
        ForeignKeyConstraint(["instance_id", "circle"],
                             ["circle_states.instance_id", "circle_states.circle"],
                             ondelete="CASCADE", name="fk_failed_circles_circle"),
    )

    tenant: str = Field(sa_column=Column(String(63), nullable=False))
    instance_id: str = Field(sa_column=Column(String(32), primary_key=True))
    circle: str = Field(sa_column=Column(String(400), primary_key=True))
    template: str = Field(sa_column=Column(String(100), nullable=False))
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    reason_key: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    created_at: datetime = _time()
    active: bool = Field(sa_column=Column(Boolean, nullable=False))


drafts_t = _table_of(DraftRow)
failed_circles_t = _table_of(FailedCircleRow)
audit_t = _table_of(AuditRow)
wait_cursor_t = _table_of(WaitCursorRow)
wait_rounds_t = _table_of(WaitRoundRow)
wait_buckets_t = _table_of(WaitBucketRow)
operations_t = _table_of(OperationRow)
operation_items_t = _table_of(OperationItemRow)
layouts_t = _table_of(LayoutRow)


def _implied(key: ForeignKeyConstraint) -> bool:
    """Whether a one-column foreign key is implied by a composite one of its table: `x →
    t.id` by `(tenant, x) → t(tenant, id)`; `tenant → tenants` by a composite key whose
    columns are never null (the row it points at has the same tenant, itself checked)."""
    if len(key.columns) != 1:
        return False
    (column,) = key.columns
    composites = [k for k in key.table.foreign_key_constraints if len(k.columns) > 1]
    if column.name == "tenant":
        return any(not any(c.nullable for c in k.columns) for k in composites)
    return any([c.name for c in k.columns] == ["tenant", column.name]
               and k.referred_table is key.referred_table for k in composites)


# PostgreSQL checks a foreign key with a query locking the row pointed at (`FOR KEY
# SHARE`): the keys composite ones imply doubled and tripled that work for every event,
# circle and audience row a step or a start writes, and locked the one `tenants` row from
# every transaction. They are kept on SQLite only, where a check is a lookup and dropping
# them means rebuilding the tables (migration 0011).
for _table in SQLModel.metadata.sorted_tables:
    for _key in _table.foreign_key_constraints:
        if _implied(_key):
            _key.ddl_if(dialect="sqlite")

