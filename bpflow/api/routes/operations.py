"""Operations (SPEC §18), for the admins of a tenant: the instances matching a filter,
incidents (failed circles grouped), overdue tasks, a template's durations, and bulk
operations: POST /api/operations records one (the worker applies it), GET
/api/operations/{id} tells its progress and a result per instance (`bpflow.operations`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import AwareDatetime, BaseModel, Field

from bpflow import operations
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import MAX_INT, InstanceSummary, summary_payload

router = APIRouter(prefix="/api", tags=["operations"])
STATUS = Literal["running", "completed", "failed", "suspended", "terminated"]
OPERATION_ID = "^[0-9a-f]{32}$"
OFFSET_MAX = 10_000  # how deep a list is paged (narrow the filter to see further)
InstanceId = Annotated[str, Field(min_length=1, max_length=32)]


class OperationFilter(BaseModel):
    """Which instances (every key given must hold; none: all of the tenant's)."""

    model_config = {"extra": "forbid"}

    template: str | None = Field(default=None, max_length=100)
    version: int | None = Field(default=None, ge=1, le=MAX_INT)
    status: STATUS | None = None
    starter: str | None = Field(default=None, max_length=100,
                                description="the username of who started them")
    started_after: AwareDatetime | None = Field(default=None, description="at or after")
    started_before: AwareDatetime | None = Field(default=None, description="before")
    updated_after: AwareDatetime | None = Field(default=None, description="at or after")
    updated_before: AwareDatetime | None = Field(default=None, description="before")
    waiting_hours: float | None = Field(default=None, ge=0, le=1_000_000, description=(
        "running, with a circle ready and waiting for longer than this many hours"))
    circle: str | None = Field(default=None, max_length=400,
                               description="with this circle failed")
    reason: str | None = Field(default=None, max_length=2000,
                               description="with a circle failed for this reason")


def _filter(template: Annotated[str | None, Query(max_length=100)] = None,
            version: Annotated[int | None, Query(ge=1, le=MAX_INT)] = None,
            status: STATUS | None = None,
            starter: Annotated[str | None, Query(max_length=100)] = None,
            started_after: AwareDatetime | None = None,
            started_before: AwareDatetime | None = None,
            updated_after: AwareDatetime | None = None,
            updated_before: AwareDatetime | None = None,
            waiting_hours: Annotated[float | None, Query(ge=0, le=1_000_000)] = None,
            circle: Annotated[str | None, Query(max_length=400)] = None,
            reason: Annotated[str | None, Query(max_length=2000)] = None) -> OperationFilter:
    """The filter of a list, from the query (its keys: `OperationFilter`'s)."""
    return OperationFilter(template=template, version=version, status=status,
                           starter=starter, started_after=started_after,
                           started_before=started_before, updated_after=updated_after,
                           updated_before=updated_before, waiting_hours=waiting_hours,
                           circle=circle, reason=reason)


class OperationIn(BaseModel):
    """A bulk operation on the instances listed or matching the filter (one of them)."""

    model_config = {"extra": "forbid", "populate_by_name": True}

    action: Literal["retry", "abort", "suspend", "resume", "migrate"]
    filter: OperationFilter | None = None
    instances: list[InstanceId] | None = Field(default=None, min_length=1,
                                               max_length=operations.IDS_MAX)
    circle: str | None = Field(default=None, max_length=400,
                               description="retry: the failed circle (default: each)")
    reason: str | None = Field(default=None, max_length=2000, description="abort: why")
    template: str | None = Field(default=None, max_length=100, description="migrate")
    source: int | None = Field(default=None, alias="from", ge=1, le=MAX_INT,
                               description="migrate: the version they are at")
    target: int | None = Field(default=None, alias="to", ge=1, le=MAX_INT,
                               description="migrate: the version to move to")
    map: dict[Annotated[str, Field(max_length=400)], Annotated[str, Field(max_length=400)]] = (
        Field(default_factory=dict, max_length=10_000,
              description="migrate: old circle uri -> new circle uri"))
    dry_run: bool = Field(default=False, description="migrate: only say what would happen")

    def params(self) -> dict[str, Any]:
        if self.action == "migrate":
            return {"template": self.template, "from": self.source, "to": self.target,
                    "map": self.map, "dry_run": self.dry_run}
        if self.action == "retry":
            return {"circle": self.circle}
        return {"reason": self.reason} if self.action == "abort" else {}


class OperationStarted(BaseModel):
    operation: str = Field(description="its id, to follow it at /api/operations/{id}")
    matched: int = Field(description="how many instances it is applied to")


class OperationItem(BaseModel):
    instance: str
    state: Literal["pending", "done", "refused"]
    reason: str | None = Field(description="why it was refused")
    at: str | None = Field(description="when its result was written")


class OperationOut(BaseModel):
    operation: str
    action: str
    params: dict[str, Any]
    filter: dict[str, Any] | None
    created_by: str
    created_at: str
    matched: int
    done: int
    refused: int
    pending: int
    finished: bool
    finished_at: str | None
    items: list[OperationItem] = Field(description="a page of results, by instance id")
    next: str | None = Field(description="the `after` of the next page")


class InstancesOut(BaseModel):
    items: list[InstanceSummary]
    total: int = Field(description=f"how many match, counted up to {operations.COUNT_MAX}"
                                   " + 1 (more: that many or more)")


class Incident(BaseModel):
    template: str
    circle: str
    reason: str | None
    count: int
    instances: list[str] = Field(description="the newest of its instances")


class OverdueTask(BaseModel):
    instance: str
    template: str
    circle: str
    due_at: str
    assignee: str | None


class OverdueOut(BaseModel):
    items: list[OverdueTask]
    total: int


class Durations(BaseModel):
    count: int
    p50: float | None = Field(description="seconds")
    p95: float | None = Field(description="seconds")
    max: float | None = Field(description="seconds")


class DurationsOut(BaseModel):
    circles: dict[str, Durations] = Field(description="from ready to leaving `waiting`")
    instances: Durations = Field(description="completed ones, from start to completion")


def _iso(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


@router.post("/operations", response_model=OperationStarted, status_code=202,
             responses=responses(401, 403, 404, 409, 422))
def start(body: OperationIn, store: StoreDep, caller: CallerDep) -> OperationStarted:
    """Record a bulk operation (admins only) on the `instances` listed (404 for one not
    of the tenant) or every instance matching `filter`; the worker applies it, a result
    per instance. A migration names `template`, `from` and `to` (checked now: 404, 422).
    409 when more instances match than one operation takes."""
    filter = None if body.filter is None else body.filter.model_dump(exclude_none=True)
    return OperationStarted.model_validate(operations.start(
        store, caller, body.action, filter, body.instances, body.params()))


@router.get("/operations/lists/instances", response_model=InstancesOut,
            responses=responses(401, 403, 422))
def instances(store: StoreDep, caller: CallerDep,
              f: Annotated[OperationFilter, Depends(_filter)],
              limit: Annotated[int, Query(ge=1, le=500)] = 50,
              offset: Annotated[int, Query(ge=0, le=OFFSET_MAX)] = 0
              ) -> InstancesOut:
    """The tenant's instances matching the filter, newest first, paged (admins only)."""
    rows, total = operations.instances(store, caller, f.model_dump(), limit, offset)
    return InstancesOut.model_validate({"items": [summary_payload(r) for r in rows],
                                        "total": total})


@router.get("/operations/lists/incidents", response_model=list[Incident],
            responses=responses(401, 403, 422))
def incidents(store: StoreDep, caller: CallerDep,
              shown: Annotated[int, Query(ge=0, le=500)] = 20) -> list[dict[str, Any]]:
    """Failed circles of instances not over, grouped by template, circle and reason,
    the largest first, each with its newest `shown` instances (admins only)."""
    return operations.incidents(store, caller, shown)


@router.get("/operations/lists/overdue", response_model=OverdueOut,
            responses=responses(401, 403, 422))
def overdue(store: StoreDep, caller: CallerDep,
            limit: Annotated[int, Query(ge=1, le=500)] = 50,
            offset: Annotated[int, Query(ge=0, le=OFFSET_MAX)] = 0) -> OverdueOut:
    """Open tasks past their due time, the longest overdue first (admins only)."""
    rows, total = operations.overdue(store, caller, limit, offset)
    return OverdueOut.model_validate({"items": [{**r, "due_at": _iso(r["due_at"])}
                                                for r in rows], "total": total})


@router.get("/operations/{operation}", response_model=OperationOut,
            responses=responses(401, 403, 404, 422))
def progress(operation: Annotated[str, Path(pattern=OPERATION_ID)],
             store: StoreDep, caller: CallerDep,
             after: Annotated[str | None, Query(max_length=32)] = None,
             limit: Annotated[int, Query(ge=1, le=1000)] = 100,
             state: Literal["pending", "done", "refused"] | None = None) -> OperationOut:
    """The operation's progress and a page of its per-instance results (admins of its
    tenant only; another tenant's is not found)."""
    out = operations.progress(store, caller, operation, after, limit, state)
    for key in ("created_at", "finished_at"):
        out[key] = _iso(out[key])
    for item in out["items"]:
        item["at"] = _iso(item["at"])
    return OperationOut.model_validate(out)


@router.get("/templates/{name}/durations", response_model=DurationsOut,
            responses=responses(401, 403, 404, 422))
def durations(name: str, store: StoreDep, caller: CallerDep,
              version: Annotated[int | None, Query(ge=1, le=MAX_INT)] = None,
              since: AwareDatetime | None = None) -> DurationsOut:
    """Per circle, seconds from ready to leaving `waiting` (count, p50, p95, max), and
    the same for completed instances, from the history (admins only)."""
    return DurationsOut.model_validate(operations.durations(store, caller, name, version,
                                                            since))
