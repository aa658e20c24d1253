"""What the REST API takes and gives: the pydantic models its OpenAPI description is made
of, and beside each answer model the function that builds that answer.

The instance answers (`InstanceSummary`, `InstanceOut`) are built as plain dicts and sent
as they are (validating them per request would cost more than the step itself); their
keys come from the models (`summary_payload` iterates `InstanceSummary`'s fields) and
tests/api/test_payloads.py checks every instance endpoint's answer against its model. The
other answers are made with their models' constructors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Annotated, Any, Literal

import orjson
from fastapi import Header, Response
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from bpflow import limits
from bpflow.access import SUBSTITUTE_TEMPLATES_MAX, Caller, may_fill
from bpflow.drafts import Draft, Problem
from bpflow.mailbox import GUEST_LIMITS
from bpflow.store.public import MailKind
from engine import bookmarks
from engine.changes import Changes
from engine.instance import Instance
from engine.messages import N_
from engine.model import Template
from engine.phase import public_pending
from engine.runtime import Engine

Json = Any
MAX_INT = 2**31 - 1  # what every database stores in an INTEGER column
SMALL = f"at most {limits.MAX_VALUE_BYTES // 1024} KiB as JSON"


def small(what: str) -> AfterValidator:
    """A field's value kept within `limits.MAX_VALUE_BYTES` as JSON (SPEC §13)."""
    return AfterValidator(lambda value: limits.small(value, what))


class ErrorOut(BaseModel):
    detail: Json = Field(description="what went wrong: a message, or structured errors")


# ------------------------------------------------------------------ sign-in
class TokenIn(BaseModel):
    username: str = Field(min_length=1, max_length=100)
    password: str = Field(min_length=1, max_length=1000)


class TokenOut(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int


class PasswordChangeIn(BaseModel):
    current_password: str = Field(max_length=1000)
    new_password: str = Field(max_length=1000, description="8 to 1000 characters")


class PasswordResetIn(BaseModel):
    password: str = Field(max_length=1000, description="8 to 1000 characters")


class PasswordResetOut(BaseModel):
    username: str
    sessions_ended: bool = Field(True, description="every session of theirs has ended")


# -------------------------------------------------------------- substitutes
class SubstituteIn(BaseModel):
    """A substitution (SPEC §15): `to` stands in from `from` until `until` (ISO 8601 with
    a time zone), for the listed templates only when `templates` names some."""

    model_config = ConfigDict(populate_by_name=True)

    to: str = Field(min_length=1, max_length=100)
    starts: AwareDatetime = Field(alias="from")
    until: AwareDatetime
    templates: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(
        None, max_length=SUBSTITUTE_TEMPLATES_MAX)


class SubstituteOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    user: str
    to: str
    starts: str = Field(alias="from")
    until: str
    templates: list[str] | None = None
    active: bool = Field(description="now is within [from, until)")
    set_by: str
    set_at: str


# ---------------------------------------------------------------- templates
class TemplateSummary(BaseModel):
    name: str
    latest_version: int
    versions: list[int]
    retired: bool = Field(description="retired: no new starts (running instances go on)")


def template_summaries(versions: Mapping[str, list[int]],
                       retired: Collection[str] = ()) -> list[TemplateSummary]:
    """Every template with its versions (`Store.template_versions()`), oldest first, and
    whether it is retired (`Store.retired_templates()`)."""
    return [TemplateSummary(name=name, latest_version=numbers[-1], versions=numbers,
                            retired=name in retired)
            for name, numbers in versions.items()]


class TemplateRetired(BaseModel):
    name: str
    retired: bool


def retired_payload(name: str, retired: bool) -> TemplateRetired:
    return TemplateRetired(name=name, retired=retired)


class TemplateUploaded(BaseModel):
    name: str
    version: int
    analysis: dict[str, Json]


def uploaded_payload(name: str, version: int, template: Template) -> TemplateUploaded:
    return TemplateUploaded(name=name, version=version, analysis=template.analysis)


class TemplateOut(BaseModel):
    name: str
    version: int
    body: dict[str, Json]
    analysis: dict[str, Json]
    locked: bool = Field(description="the version has instances and can never change")


def template_payload(name: str, version: int, template: Template,
                     locked: bool) -> TemplateOut:
    return TemplateOut(name=name, version=version, body=template.body,
                       analysis=template.analysis, locked=locked)


# ------------------------------------------------------------------- drafts
class DraftIn(BaseModel):
    """A draft's content (SPEC §16): `body`, a template finished or not; or, to start a
    draft, `template`: the name of one whose latest version (as last laid out) it holds."""

    model_config = ConfigDict(extra="forbid")

    body: dict[str, Json] | None = Field(None, description="the template being designed")
    template: str | None = Field(None, min_length=1, max_length=100,
                                 description="start from this template's latest version")

    @model_validator(mode="after")
    def _one(self) -> DraftIn:
        if (self.body is None) == (self.template is None):
            raise ValueError(N_("give either 'body' or 'template'"))
        return self


class ProblemOut(BaseModel):
    code: str = Field(description="the analysis' code (SPEC §3)")
    path: str = Field(description="a JSON pointer into the body")
    message: str
    warning: bool = Field(description="a warning only: publishing is not stopped by it")


class ChangesOut(BaseModel):
    """What publishing the draft changes against the latest version."""

    new: bool = Field(description="no version yet: publishing makes the first")
    added: list[str] = Field(description="uris of circles the draft adds")
    removed: list[str] = Field(description="uris of circles the draft removes")
    changed: dict[str, list[str]] = Field(description="uri -> the circle's keys that differ")
    template: list[str] = Field(description="the template's keys that differ")
    moved: list[str] = Field(description="circles whose `ui` position differs")
    positions_only: bool = Field(description="only positions differ: no new version, the"
                                             " layout is kept")


class DraftSummary(BaseModel):
    id: int
    name: str = Field(description="the body's name (empty while it has none)")
    author: str
    created: float = Field(description="seconds since the epoch")
    updated: float = Field(description="seconds since the epoch")


class DraftOut(DraftSummary):
    body: dict[str, Json]
    problems: list[ProblemOut] = Field(description="the analysis' errors, then warnings")
    changes: ChangesOut


def draft_summary(draft: Draft) -> DraftSummary:
    return DraftSummary(id=draft.id, name=draft.name, author=draft.author,
                        created=draft.created, updated=draft.updated)


def draft_payload(draft: Draft, problems: list[Problem], changes: Changes,
                  say: Callable[[str], str]) -> DraftOut:
    """A draft with its problems (each message said by `say`, in the reader's language)
    and what publishing it changes."""
    return DraftOut(**draft_summary(draft).model_dump(), body=draft.body,
                    problems=[ProblemOut(code=p.code, path=p.pointer, message=say(p.message),
                                         warning=p.warning) for p in problems],
                    changes=ChangesOut(**changes.as_dict()))


class DraftPublished(TemplateUploaded):
    created: bool = Field(description="false: identical to the latest version (positions"
                                      " aside), no version made")


# ---------------------------------------------------------- trying a draft
class TryIn(BaseModel):
    """Start the draft in its sandbox (SPEC §16), with the inputs its template asks for."""

    model_config = ConfigDict(extra="forbid")

    inputs: Annotated[dict[str, Json], small("inputs")] = Field(default_factory=dict,
                                                                 description=SMALL)


class FillIn(BaseModel):
    """A ready form's values (a confirmation: `{"accept": true|false, "reason"?}`)."""

    model_config = ConfigDict(extra="forbid")

    values: Annotated[dict[str, Json], small("values")] = Field(default_factory=dict,
                                                                 description=SMALL)


class AnswerIn(BaseModel):
    """The outside world's answer the designer gives: an HTTP action's status and JSON
    body (a 2xx is its result, anything else fails it); a signal's data (`body`); for a
    mail action nothing (nobody is mailed)."""

    model_config = ConfigDict(extra="forbid")

    status: int | None = Field(default=None, ge=100, le=599,
                               description="an HTTP action's status (default 200)")
    body: Annotated[Json, small("body")] = Field(default=None, description=SMALL)


class TryCircleOut(BaseModel):
    state: str = Field(description="waiting, success, failure or skipped")
    ready: bool
    blocked: bool
    result: Json = None
    reason: str | None = None
    attempts: int
    can: list[Literal["fill", "decide", "answer", "fire"]] = Field(
        description="what the designer may do with it now")
    fires_at: str | None = Field(description="when what it waits for the clock for happens"
                                             " (a timer, timeout, retry or reminder): `fire`"
                                             " makes it happen now")


class TryStepOut(BaseModel):
    uri: str
    state: str = Field(description="the state the circle moved to (waiting: reset or a"
                                   " retry)")
    at: str


class TryOut(BaseModel):
    """A draft's sandbox: an instance in no list, count or feed, deleted a day after it
    started (`expires_at`)."""

    draft: int
    instance: str
    status: str
    reason: str | None = None
    started_at: str
    expires_at: str
    circles: dict[str, TryCircleOut]
    path: list[TryStepOut] = Field(description="each circle's moves, in order: the path"
                                               " taken")


class MigrateIn(BaseModel):
    """Move instances of a template from one version to another (SPEC §11)."""

    model_config = {"populate_by_name": True}

    source: int = Field(alias="from", ge=1, le=MAX_INT, description="the version they are at")
    target: int = Field(alias="to", ge=1, le=MAX_INT, description="the version to move to")
    map: dict[Annotated[str, Field(max_length=400)], Annotated[str, Field(max_length=400)]] = (
        Field(default_factory=dict, max_length=10_000,
              description="old circle uri -> new circle uri (others match by uri)"))
    instances: list[Annotated[str, Field(min_length=1, max_length=32)]] | None = Field(
        default=None, max_length=10_000,
        description="the instances to move (default: every running, failed or suspended"
                    " one at `from`, the oldest 10,000)")
    dry_run: bool = Field(default=False, description="only say what would happen")


class Refusal(BaseModel):
    id: str
    reasons: list[str]


class MigrateOut(BaseModel):
    migrated: list[str]
    refused: list[Refusal]


class StatsOut(BaseModel):
    circles: dict[str, dict[str, int]]
    instances: dict[str, int]


def stats_payload(stats: Mapping[str, Any]) -> StatsOut:
    """`Store.stats(...)` as answered (what the model has no field for is left out)."""
    return StatsOut.model_validate(stats)


class BatchStatsOut(StatsOut):
    batch: str
    template: str
    version: int
    started: int = Field(description="instances the batch started")


# ---------------------------------------------------------------- instances
class StartIn(BaseModel):
    template: str = Field(min_length=1, max_length=100)
    version: int | None = Field(default=None, ge=1, le=MAX_INT)
    inputs: Annotated[dict[str, Json], small("inputs")] = Field(default_factory=dict,
                                                                 description=SMALL)


MAX_CROWD_NAMES = 100_000  # usernames one bulk start may list (a role selects any number)


class BulkIn(StartIn):
    """A crowd: one instance per user, named by `users` or by `role` (exactly one)."""

    users: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(
        default=None, max_length=MAX_CROWD_NAMES,
        description=f"usernames of the caller's tenant (each started once; at most"
                    f" {MAX_CROWD_NAMES:,})")
    role: str | None = Field(default=None, min_length=1, max_length=40,
                             description="every enabled user of the caller's tenant having"
                                         " this role")

    @model_validator(mode="after")
    def _one_crowd(self) -> BulkIn:
        if (self.users is None) == (self.role is None):
            raise ValueError(N_("name the crowd either by 'users' or by 'role', not both"))
        return self


class BatchOut(BaseModel):
    batch: str = Field(description="the batch id (GET /api/batches/{batch}/stats)")
    started: int


_PRINTABLE = r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?"  # no space at either end (HTTP)
IDEMPOTENCY_KEY = Header(
    alias="Idempotency-Key", min_length=1, max_length=200, pattern=f"^{_PRINTABLE}$",
    description="1 to 200 printable ASCII characters: the same key from the same user"
                " answers the instance it started first (200) instead of starting another")
_KEY = re.compile(_PRINTABLE)


def valid_idempotency_key(value: str) -> bool:
    """What `IDEMPOTENCY_KEY` accepts (for the short path, which reads headers itself)."""
    return len(value) <= 200 and _KEY.fullmatch(value) is not None


class Candidates(BaseModel):
    """Who may act on a person's circle: usernames and roles (SPEC §10)."""

    users: list[str]
    roles: list[str]


class Returned(BaseModel):
    """Why a task is back with its people: who sent it back and why, and what it held."""

    kind: Literal["returned", "withdrawn"]
    by: str | None = None
    comment: str = ""
    step: str = Field(description="the circle that sent it back")
    at: str
    answered_by: str | None = Field(default=None, description="who answered it last time")
    answer: dict[str, Json] | None = Field(
        default=None, description="the form's answers when it was sent back")


class CircleOut(BaseModel):
    state: Literal["waiting", "success", "failure", "skipped"]
    ready: bool
    blocked: bool
    result: Json = None
    reason: str | None = None
    attempts: int
    next_attempt_at: str | None = None
    bookmark: str | None = None
    pending: dict[str, Json] | None = None
    assignee: str | None = None
    candidates: Candidates | None = None
    due_at: str | None = None
    delegate: dict[str, Json] | None = Field(
        default=None, description="a task delegated (委派): `from` (its assignee), `to` (who"
                                  " answers), `comment`, `answer` (null until they answer)")
    returned: Returned | None = Field(
        default=None, description="a ready task sent back to its people (SPEC §15): why,"
                                  " and the answers its form held")


class InstanceSummary(BaseModel):
    id: str
    template: str
    version: int
    status: str
    reason: str | None = None
    user: dict[str, Json]
    created_at: str
    updated_at: str


_SUMMARY_FIELDS = tuple(InstanceSummary.model_fields)
_TIMES = frozenset({"created_at", "updated_at"})


def json_answer(data: Any, status: int = 200) -> Response:
    """`data` as JSON, sent as is (orjson), without the framework's response-model check:
    the answers of the routes the short path (`bpflow.api.hot`) also serves."""
    return Response(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS), status_code=status,
                    media_type="application/json")


def summary_payload(record: Mapping[str, Any]) -> dict[str, Any]:
    """An instance's row (`Store.list_instances`) or `Instance.to_dict()` as an
    `InstanceSummary`: the model's fields, times in ISO 8601."""
    out: dict[str, Any] = {name: record.get(name) for name in _SUMMARY_FIELDS}
    for name in _TIMES:
        if not isinstance(out[name], str):
            out[name] = out[name].isoformat()
    return out


class InstanceOut(InstanceSummary):
    variables: dict[str, Json]
    circles: dict[str, CircleOut]
    history_url: str


def instance_payload(engine: Engine, inst: Instance, caller: Caller) -> dict[str, Any]:
    """The `InstanceOut` answer for `caller`: the bookmark of a circle they may not drive
    is left out (bpflow runs it, or an approver decides it), and so is a staged form."""
    circles = engine.view(inst)  # a CircleOut's fields but `pending`
    for cid, circle in circles.items():
        circle["pending"] = public_pending(inst.circles[cid])
        if circle["bookmark"] is not None and not may_fill(caller, inst, cid):
            circle["bookmark"] = None
    return {**summary_payload(inst.to_dict()), "variables": engine.variables(inst),
            "circles": circles, "history_url": f"/api/instances/{inst.id}/history"}


class EventOut(BaseModel):
    seq: int
    at: str
    kind: str
    actor: str | None = None
    circle: str | None = None
    before: Json = None
    after: Json = None
    data: Json = None


class CompleteIn(BaseModel):
    bookmark: str = Field(min_length=1, max_length=200)
    result: Annotated[Json, small("result")] = Field(default=None, description=SMALL)


class FailIn(BaseModel):
    bookmark: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=2000)


class ResetIn(BaseModel):
    uri: str = Field(min_length=1, max_length=400)
    scope: Literal["self", "levels", "all"] = "self"
    levels: int | None = Field(default=None, ge=0, le=1000)


class AbortIn(BaseModel):
    reason: str = Field(default="aborted", max_length=2000)


# ------------------------------------------------------------ mailbox, guest
class MailOut(BaseModel):
    id: int
    kind: MailKind
    sender: str
    subject: str
    body: str
    payload: Json = None
    created_at: str
    updated_at: str | None = None
    read: bool
    decision: str | None = None
    comment: str | None = None
    instance: str | None = None
    circle: str | None = None
    signature_ok: bool
    problem: str | None = None
    answer: dict[str, Json] | None = Field(
        default=None, description="for an approval its addressee delegated: the delegate"
                                  " (`by`) and their answer (`decision` null until they"
                                  " answer), `comment`, `note`, `at`")
    decided_by: str | None = Field(None, description="who took the decision: the addressee,"
                                   " or their substitute as \"ann for bob\"")


RETURN_TO = Field(default=None, min_length=1, max_length=400,
                  description="with \"returned\": the step to return to, a succeeded circle"
                              " upstream (its uri) or \"@start\" (the flow's first circles);"
                              " default: the circle that asked (SPEC §15)")


class DecisionIn(BaseModel):
    decision: Literal["approved", "rejected", "returned"]
    comment: str = Field(default="", max_length=2000)
    to: str | None = RETURN_TO


class ReturnIn(BaseModel):
    """Return the work waiting at a circle to an earlier step, saying why."""

    to: str | None = RETURN_TO
    comment: str = Field(default="", max_length=2000)


class ReturnTarget(BaseModel):
    to: str = Field(description="a circle's uri, or \"@start\"")
    description: str = Field(description="the step as its people know it")


Username = Annotated[str, Field(min_length=1, max_length=100)]


class SignersIn(BaseModel):
    """Add signers (加签): who, where (before, after or with the addressee), why."""
    users: list[Username] = Field(min_length=1, max_length=20)
    where: Literal["before", "after", "with"]
    comment: str = Field(default="", max_length=2000)


class SignersOutIn(BaseModel):
    """Remove signers (减签): addressees who have not decided."""
    users: list[Username] = Field(min_length=1, max_length=20)
    comment: str = Field(default="", max_length=2000)


class RoundOut(BaseModel):
    """Where an approval's round stands."""
    quorum: Json = None
    seats: list[list[str]]
    approvers: list[str]
    decisions: list[dict[str, Any]]
    waiting: list[str]
    later: list[str]
    needed: int
    approved: int
    seats_count: int
    verdict: str | None = None
    mails: dict[str, int]


class SignersRemovedOut(BaseModel):
    removed: list[str]
    round: RoundOut | None = None


def _guest_text(field: str) -> Any:
    """A guest field, held to the mailbox's limit there (`GUEST_LIMITS`): one over it is
    refused with 422 naming the field and the limit, never shortened."""
    most = GUEST_LIMITS[field]
    return Field(description=f"at most {most:,} characters; a longer one is refused (422)",
                 json_schema_extra={"maxLength": most})


class GuestIn(BaseModel):
    name: str = _guest_text("name")
    subject: str = _guest_text("subject")
    body: str = _guest_text("body")


class GuestOut(BaseModel):
    id: int


# ---------------------------------------------------------------- tasks (SPEC §10)
class TaskOut(BaseModel):
    instance: str
    template: str
    uri: str
    description: str
    assignee: str | None = None
    candidates: Candidates
    ready_at: str | None = None
    due_at: str | None = None
    bookmark: str


class AssignIn(BaseModel):
    """Whom work is handed to (transfer: `/assign`, `/transfer`; delegate: `/delegate`)."""

    to: str = Field(min_length=1, max_length=100)
    comment: str = Field(default="", max_length=2000)


class WithdrawIn(BaseModel):
    reason: str = Field(default="", max_length=2000)


def task_payload(engine: Engine, row: Any, description: str) -> dict[str, Any]:
    """A `TaskOut` of a row of `Store.tasks` (the caller may act on every one of them)."""
    task = row.task
    return {"instance": row.instance_id, "template": row.template, "uri": row.circle,
            "description": description, "assignee": task["assignee"],
            "candidates": {"users": task["users"], "roles": task["roles"]},
            "ready_at": row.ready_at.isoformat() if row.ready_at else None,
            "due_at": task.get("due_at"),
            "bookmark": bookmarks.make(engine.key, row.instance_id, row.circle, row.epoch)}


# ------------------------------------------------------- copies and urges (SPEC §15)
class CcIn(BaseModel):
    users: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        min_length=1, max_length=50)
    comment: str | None = Field(default=None, max_length=2000)


class CopyOut(BaseModel):
    user: str
    circle: str | None = Field(description="the circle whose `cc` sent it; null: ad hoc")
    sent_at: str
    read_at: str | None = Field(description="when they opened the instance or the mail")


class CcOut(BaseModel):
    copied: list[str] = Field(description="the people newly copied (the others had a copy)")
    copies: list[CopyOut]


class UrgeIn(BaseModel):
    comment: str | None = Field(default=None, max_length=2000)


class UrgeOut(BaseModel):
    circles: dict[str, list[str]] = Field(description="each circle urged: whom it was sent to")


def copies_payload(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`CopyOut`s of `Store.copies`."""
    return [{"user": r["user"], "circle": r["circle"], "sent_at": r["sent_at"].isoformat(),
             "read_at": r["read_at"].isoformat() if r["read_at"] else None} for r in rows]
