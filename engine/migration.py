"""Moving a running instance to another version of its template (SPEC §11, Busybee's
UpdateWorkflow), decided without a database.

Circles are matched by their id in the flattened plan (nested ones as `a.b`) or by the
map (`{"old": "new"}`; an entry for a flow circle carries the circles inside it along,
`a.x` becoming `new.x`). A matched circle keeps its run as it is: state, result, attempts
and epoch, so the bookmark of a kept ready circle stays valid. A circle only the new
version has starts waiting, untouched; a circle only the old version had disappears.

An instance is refused, with every reason found and nothing changed, when it is not
running, failed or suspended at the source version, when a removed circle holds its only
progress (work in flight, or a result no kept circle carries on) or when the mapped
circles would break the invariant of SPEC §4 (every circle after a waiting one is
waiting). A kept circle that was ready but whose new dependencies are not all met goes
back to waiting for them (a new attempt: its old bookmark is void), unless work of it is
in flight, which refuses the instance too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from engine import readiness
from engine.errors import TransitionError
from engine.instance import (
    FAILED,
    RUNNING,
    SUCCESS,
    SUSPENDED,
    WAITING,
    CircleRun,
    Instance,
)
from engine.messages import N_, joined, word
from engine.model import Template
from engine.moves import Clock, emit
from engine.phase import approval, signal_wait, staged_form, work_recorded
from engine.tasks import sole

MIGRATABLE = (RUNNING, FAILED, SUSPENDED)  # the statuses an instance may be migrated from
MIGRATED = "instance_migrated"  # the history event of a migration
MAX_MAP = 10_000  # entries of one map


class MigrationRefused(TransitionError):
    """The instance cannot move to the other version; `reasons` says why, readably."""

    def __init__(self, instance: str, reasons: list[str]):
        self.reasons = reasons
        super().__init__(N_("instance '%(id)s' cannot be migrated: %(reasons)s", id=instance,
                            reasons=joined(reasons)), instance=instance)


@dataclass(frozen=True)
class Matching:
    """How the circles of two versions correspond."""

    sources: dict[str, str]  # new circle id -> the old circle id it continues
    added: list[str]  # new circles without a source, in flow order
    removed: list[str]  # old circles without a successor, in flow order


def map_problems(old: Template, new: Template, mapping: Mapping[str, str]) -> list[str]:
    """What is wrong with a map between two versions (every problem; empty: fine)."""
    problems = []
    if len(mapping) > MAX_MAP:
        return [N_("the map has %(count)s entries; at most %(most)s are allowed",
                   count=len(mapping), most=MAX_MAP)]
    seen: dict[str, str] = {}
    for source, target in mapping.items():
        if not isinstance(source, str) or not isinstance(target, str):
            problems.append(N_("map entries must name circles by their uri (strings)"))
            continue
        if source not in old.plan.nodes:
            problems.append(N_("map: '%(uri)s' is no circle of the old version", uri=source))
        if target not in new.plan.nodes:
            problems.append(N_("map: '%(uri)s' is no circle of the new version", uri=target))
        if target in seen:
            problems.append(N_("map: '%(one)s' and '%(other)s' both map to '%(uri)s'",
                               one=seen[target], other=source, uri=target))
        seen.setdefault(target, source)
    return problems


def _renamed(oid: str, mapping: Mapping[str, str]) -> str | None:
    """The id `oid` takes through the map (an entry for an enclosing flow circle carries
    it along), None when no entry names it or a flow circle around it."""
    if oid in mapping:
        return mapping[oid]
    cut = oid.rfind(".")
    while cut > 0:
        head = oid[:cut]
        if head in mapping:
            return mapping[head] + oid[cut:]
        cut = oid.rfind(".", 0, cut)
    return None


def match(old: Template, new: Template, mapping: Mapping[str, str]) -> Matching:
    """Which new circle continues which old one: through the map first, then by the same
    id (a circle whose id the map gave to another one is not matched by name)."""
    sources: dict[str, str] = {}
    unmapped = []
    for oid in old.plan.order:
        target = _renamed(oid, mapping)
        if target is None:
            unmapped.append(oid)
        elif target in new.plan.nodes and target not in sources:
            sources[target] = oid
    for oid in unmapped:
        if oid in new.plan.nodes and oid not in sources:
            sources[oid] = oid
    kept = set(sources.values())
    return Matching(sources, [n for n in new.plan.order if n not in sources],
                    [o for o in old.plan.order if o not in kept])


def in_flight(run: CircleRun) -> str | None:
    """The work a waiting circle has out in the world, described (None: none)."""
    if run.state != WAITING:
        return None
    task = run.task or {}
    held = task.get("assignee")
    if held is not None and held == sole(task.get("users", []), task.get("roles", [])):
        held = None  # the task's only candidate holds it from the start: nobody took it
    signal = signal_wait(run)
    if approval(run) is not None:
        return N_("an approval is out")
    if signal is not None:
        return N_("it waits for the signal '%(name)s'", name=signal.get("name"))
    if staged_form(run) is not None:
        return N_("a form was sent for its action")
    if work_recorded(run):
        return N_("its action has started")
    if held:
        return N_("its task is claimed by %(user)s", user=held)
    return None


@dataclass(frozen=True)
class Prepared:
    """A migration worked out for one instance: the circles it would have, what changes,
    and why it cannot happen (empty: it can)."""

    circles: dict[str, CircleRun]
    matching: Matching
    reasons: list[str]
    unready: list[str]  # kept circles that were ready and now wait for new dependencies


def prepare(inst: Instance, new: Template, mapping: Mapping[str, str], source: int,
            now: datetime) -> Prepared:
    """The instance's circles on `new`, and every reason it may not move there (from
    version `source`). Changes nothing."""
    old = inst.template
    matching = match(old, new, mapping)
    reasons = []
    if old.name != new.name:
        reasons.append(N_("it is an instance of '%(old)s', not of '%(new)s'", old=old.name,
                          new=new.name))
    if inst.version != source:
        reasons.append(N_("it is at version %(version)s, not %(source)s", version=inst.version,
                          source=source))
    if inst.status not in MIGRATABLE:
        reasons.append(N_("it is %(status)s: only running, failed or suspended instances are"
                          " migrated", status=word(inst.status)))
    if reasons:
        return Prepared({}, matching, reasons, [])
    kept = set(matching.sources.values())
    for oid in matching.removed:
        run = inst.circles[oid]
        work = in_flight(run)
        if work is not None:
            reasons.append(N_("circle '%(uri)s' is removed but has work in flight (%(work)s)",
                              uri=oid, work=work))
        elif run.state == SUCCESS and not any(
                d in kept and inst.circles[d].state != WAITING
                for d in old.plan.downstream([oid]) if d != oid):
            reasons.append(N_("circle '%(uri)s' is removed and its result is progress no kept"
                              " circle carries on", uri=oid))
    circles = {nid: inst.circles[matching.sources[nid]] if nid in matching.sources
               else CircleRun() for nid in new.plan.order}
    for nid in new.plan.order:
        if circles[nid].state != WAITING:
            continue
        for after in new.plan.nodes[nid].succ:
            if circles[after].state != WAITING:
                reasons.append(N_("circle '%(uri)s' is %(state)s but would come after"
                                  " '%(before)s', which is waiting (every circle after a"
                                  " waiting one must be waiting)", uri=after,
                                  state=word(circles[after].state), before=nid))
    for nid, oid in matching.sources.items():
        run = circles[nid]
        if run.state == WAITING and in_flight(run) and (
                old.plan.nodes[oid].circle.box != new.plan.nodes[nid].circle.box):
            reasons.append(N_("circle '%(uri)s' has work in flight (%(work)s) and its box"
                              " changed", uri=nid, work=in_flight(run)))
    unready = []
    if not reasons:
        trial = dataclasses.replace(inst, template=new, circles=circles, events=[], memo=None)
        statuses = readiness.statuses(trial, now)
        for nid in matching.sources:
            run = circles[nid]
            if run.state != WAITING or run.ready_at is None or \
                    statuses.get(nid) in (readiness.READY, readiness.SCHEDULED):
                continue
            work = in_flight(run)
            if work is not None:
                reasons.append(N_("circle '%(uri)s' is ready with work in flight (%(work)s) but"
                                  " would wait for circles before it in the new version",
                                  uri=nid, work=work))
            else:
                unready.append(nid)
    return Prepared(circles, matching, reasons, unready)


def migrate(inst: Instance, new: Template, version: int, mapping: Mapping[str, str],
            source: int, clock: Clock, actor: str | None = None) -> Matching:
    """Move `inst` to `new` (version `version`) from version `source`, recording it
    (`instance_migrated`); MigrationRefused, changing nothing, when it may not move. The
    caller settles the instance afterwards (new circles may be ready)."""
    prepared = prepare(inst, new, mapping, source, clock())
    if prepared.reasons:
        raise MigrationRefused(inst.id, prepared.reasons)
    circles = prepared.circles
    for nid in prepared.unready:  # a new attempt once its new dependencies are met
        run = circles[nid]
        circles[nid] = CircleRun(attempts=run.attempts, epoch=run.epoch + 1)
    before = inst.version
    inst.template, inst.version, inst.circles, inst.memo = new, version, circles, None
    m = prepared.matching
    emit(inst, clock, MIGRATED, actor, before={"version": before},
         after={"version": version},
         data={"from": source, "to": version, "map": dict(mapping), "added": m.added,
               "removed": m.removed})
    return m
