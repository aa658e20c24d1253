"""Runtime data: an instance's circles, its status and its history events.

Plain mutable records with `to_dict`/`from_dict`, so a store can persist them
as JSON; the template itself is never copied into an instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from engine.model import Template

WAITING, SUCCESS, FAILURE, SKIPPED = "waiting", "success", "failure", "skipped"
CIRCLE_STATES = (WAITING, SUCCESS, FAILURE, SKIPPED)
# An instance's statuses, the one list of them (the API's query parameter reads the Literal).
InstanceStatus = Literal["running", "completed", "failed", "suspended", "terminated"]
INSTANCE_STATUSES: tuple[str, ...] = get_args(InstanceStatus)
RUNNING, COMPLETED, FAILED, SUSPENDED, TERMINATED = INSTANCE_STATUSES
_TIMES = ("next_attempt_at", "ready_at", "due_at")


def iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def parse_time(s: str | None) -> datetime | None:
    return datetime.fromisoformat(s) if s else None


@dataclass
class CircleRun:
    """One circle's runtime state (the seed's waiting/success/failure, plus skipped)."""

    state: str = WAITING
    result: Any = None
    reason: str | None = None
    attempts: int = 0  # failed attempts so far
    next_attempt_at: datetime | None = None  # a retry waits until then
    ready_at: datetime | None = None  # when the current attempt became ready
    due_at: datetime | None = None  # when a ready timer fires
    epoch: int = 0  # moves on at every new attempt; bookmarks are bound to it
    pending: dict[str, Any] | None = None  # the action layer's progress in this attempt
    # a person's task (SPEC §10), set when the circle becomes ready: {"users", "roles",
    # "assignee", "due_at", "escalated"}; replaced, never changed in place
    task: dict[str, Any] | None = None
    # what was sent about it (SPEC §15, `engine.nudges`): {"cc": epoch, "urged_at",
    # "reminded_at"}; replaced, never changed in place
    nudges: dict[str, Any] | None = None

    @property
    def pristine(self) -> bool:
        return (self.state == WAITING and self.attempts == 0 and self.ready_at is None
                and self.next_attempt_at is None and self.pending is None)

    def copy(self) -> CircleRun:
        """A copy to change apart from this run (a move replaces a run's values, never
        changes one in place: they are shared)."""
        twin = object.__new__(CircleRun)
        twin.__dict__ = self.__dict__.copy()
        return twin

    def snapshot(self) -> dict[str, Any]:
        return {"state": self.state, "result": self.result, "reason": self.reason,
                "attempts": self.attempts}

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "result": self.result, "reason": self.reason,
                "attempts": self.attempts, "next_attempt_at": iso(self.next_attempt_at),
                "ready_at": iso(self.ready_at), "due_at": iso(self.due_at), "epoch": self.epoch,
                "pending": self.pending, "task": self.task, "nudges": self.nudges}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CircleRun:
        values = dict(data)
        for key in _TIMES:
            values[key] = parse_time(values.get(key))
        return cls(**values)


@dataclass(frozen=True)
class Event:
    """One entry of an instance's append-only history."""

    seq: int
    at: datetime
    kind: str
    actor: str | None = None
    circle: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": iso(self.at), "kind": self.kind, "actor": self.actor,
                "circle": self.circle, "before": self.before, "after": self.after,
                "data": self.data}


@dataclass
class Instance:
    id: str
    template: Template
    status: str
    inputs: dict[str, Any]
    user: dict[str, Any]
    circles: dict[str, CircleRun]
    created_at: datetime
    updated_at: datetime
    version: int | None = None  # the template version, when a store knows it
    reason: str | None = None  # why the instance failed or was terminated
    seq: int = 0  # number of the last event
    tenant: str = "default"  # whose it is (SPEC §12); the engine only carries it
    sandbox: bool = False  # a draft tried in the designer (SPEC §16); carried likewise
    events: list[Event] = field(default_factory=list)  # events not yet drained
    # statuses as computed at (seq, time, valid until): every change of a circle emits an
    # event, so the event counter tells whether they are still current
    memo: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)

    def copy(self) -> Instance:
        """A copy a move may change while this one stays as it is: its own circles (each
        run copied) and events; the template (never changed) and the values moves
        replace rather than change in place (inputs, user, results) are shared."""
        twin = object.__new__(Instance)
        twin.__dict__ = self.__dict__.copy()
        twin.circles = {cid: run.copy() for cid, run in self.circles.items()}
        twin.events = list(self.events)
        return twin

    def drain_events(self) -> list[Event]:
        """Hand the new events to a store, which appends them to the history."""
        out, self.events = self.events, []
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "template": self.template.name, "version": self.version,
                "status": self.status, "reason": self.reason, "inputs": self.inputs,
                "user": self.user, "created_at": iso(self.created_at),
                "updated_at": iso(self.updated_at), "seq": self.seq,
                "circles": {cid: run.to_dict() for cid, run in self.circles.items()}}

    @classmethod
    def from_dict(cls, template: Template, data: dict[str, Any]) -> Instance:
        return cls(id=data["id"], template=template, status=data["status"],
                   inputs=data["inputs"], user=data["user"],
                   circles={cid: CircleRun.from_dict(r) for cid, r in data["circles"].items()},
                   created_at=datetime.fromisoformat(data["created_at"]),
                   updated_at=datetime.fromisoformat(data["updated_at"]),
                   version=data.get("version"),
                   reason=data.get("reason"), seq=data.get("seq", 0))
