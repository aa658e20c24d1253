"""What the flow page shows of an instance, as plain data: its header, every circle's
state for the drawing and the details panel, the drawing itself and the history.

Who may see or act on it is `bpflow.access`'s to say (`pages/flow_state.py` asks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bpflow_app.boxview import clock_text
from bpflow_app.drawing import Drawing, draw
from engine.instance import FAILURE, SKIPPED, SUCCESS, TERMINATED, WAITING, Instance
from engine.moves import instance_moves
from engine.runtime import ACTIVE, READY, SCHEDULED, Engine

FINISHED = (SUCCESS, FAILURE, SKIPPED)


@dataclass
class Header:
    id: str = ""
    template: str = ""
    title: str = ""
    version: int = 0
    status: str = ""
    reason: str = ""
    owner: str = ""
    created: str = ""
    updated: str = ""
    controls: list[str] = field(default_factory=list)  # the engine's moves from its status


@dataclass
class CircleInfo:
    id: str = ""
    label: str = ""
    description: str = ""
    state: str = "waiting"  # the drawing's: waiting, ready, retrying, success, failure, skipped
    result: str = ""
    reason: str = ""
    attempts: int = 0
    next_attempt: str = ""
    resettable: bool = False
    flow: bool = False


@dataclass
class HistoryRow:
    seq: int
    at: str
    kind: str
    actor: str
    circle: str
    detail: str


def header(inst: Instance) -> Header:
    t = inst.template
    return Header(id=inst.id, template=t.name, title=t.title or t.name,
                  version=inst.version or 0, status=inst.status, reason=inst.reason or "",
                  owner=str(inst.user.get("username", "")), created=clock_text(inst.created_at),
                  updated=clock_text(inst.updated_at), controls=list(instance_moves(inst.status)))


def visual_states(engine: Engine, inst: Instance) -> dict[str, str]:
    """Each circle's colour key: a waiting circle is ready, retrying or just waiting."""
    statuses = engine.statuses(inst)
    out = {}
    for cid, run in inst.circles.items():
        if run.state != WAITING:
            out[cid] = run.state
        elif statuses.get(cid) == SCHEDULED:
            out[cid] = "retrying"
        elif statuses.get(cid) == READY and run.ready_at is not None and \
                inst.status in ACTIVE:
            out[cid] = "ready"
        else:
            out[cid] = "waiting"
    return out


def _text(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, indent=1) if isinstance(
        value, (dict, list)) else str(value)


def circle_infos(inst: Instance, states: dict[str, str]) -> list[CircleInfo]:
    nodes = inst.template.plan.nodes
    return [CircleInfo(id=cid, label=cid.rsplit(".", 1)[-1],
                       description=nodes[cid].circle.description, state=states[cid],
                       result=_text(run.result), reason=run.reason or "",
                       attempts=run.attempts, next_attempt=clock_text(run.next_attempt_at),
                       resettable=run.state in FINISHED and inst.status != TERMINATED,
                       flow=bool(nodes[cid].children))
            for cid in inst.template.plan.order for run in (inst.circles[cid],)]


def default_expanded(inst: Instance) -> set[str]:
    """Nested flows that have started are open; the others stay closed."""
    nodes = inst.template.plan.nodes
    return {cid for cid, node in nodes.items()
            if node.children and inst.circles[cid].ready_at is not None}


def drawing(inst: Instance, states: dict[str, str], expanded: set[str],
            intervention: bool) -> Drawing:
    nodes = inst.template.plan.nodes
    weak = {cid: node.weak for cid, node in nodes.items() if node.weak} if intervention else None
    tips = {cid: node.circle.description for cid, node in nodes.items()}
    return draw(inst.template.analysis, states, expanded=expanded, weak=weak, tips=tips)


def _detail(event: dict[str, Any]) -> str:
    data = event.get("data") or {}
    after = event.get("after") or {}
    parts = []
    for key in ("reason", "why", "scope", "origin", "levels", "attempt", "template"):
        if data.get(key) not in (None, ""):
            parts.append(f"{key}: {data[key]}")
    if not parts and isinstance(after, dict) and after.get("reason"):
        parts.append(f"reason: {after['reason']}")
    return "; ".join(str(p) for p in parts)


def history_rows(events: list[dict[str, Any]], limit: int = 300) -> list[HistoryRow]:
    """Newest first, at most `limit`."""
    rows = [HistoryRow(seq=e["seq"], at=clock_text(e["at"]), kind=e["kind"].replace("_", " "),
                       actor=e.get("actor") or "", circle=e.get("circle") or "",
                       detail=_detail(e)) for e in reversed(events[-limit:])]
    return rows
