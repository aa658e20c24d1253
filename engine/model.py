"""Immutable templates, built from a JSON body that passed analysis.

A `Template` is a value: instances point at it and never change it. Nested
flows are resolved into the tree (by name or inline), so the runtime never
needs to look a template up again. The circles, boxes and fields it is made of are
defined in `definition.py` (their names are also importable from here); the runtime's
flattened view of its flow is `plan.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from engine.boxes import ACTION_TEXTS, option_value
from engine.definition import (
    FIELD_TYPES,
    MAX_CANDIDATES,
    MAX_RETRIES,
    MAX_WAIT,
    RETRY_LOGIC,
    ROLE_NAME,
    TIMEOUT_POLICIES,
    Assign,
    Box,
    Circle,
    Field,
    Flow,
    Invalid,
    Timeout,
    is_wait,
    normalize_assign,
    normalize_cc,
    normalize_due,
    normalize_remind,
    normalize_retry,
    normalize_timeout,
    show,
)
from engine.plan import Plan
from engine.texts import make

__all__ = ["FIELD_TYPES", "MAX_CANDIDATES", "MAX_RETRIES", "MAX_WAIT", "RETRY_LOGIC",
           "ROLE_NAME", "TIMEOUT_POLICIES", "Assign", "Box", "Circle", "Field", "Flow",
           "Invalid", "Template", "Timeout", "build_flow", "is_wait", "linear_deps",
           "normalize_assign", "normalize_due", "normalize_retry", "normalize_timeout", "show"]


@dataclass(frozen=True)
class Template:
    name: str
    flow: Flow
    body: dict[str, Any] = field(compare=False, hash=False)
    analysis: dict[str, Any] = field(compare=False, hash=False)
    title: str = ""
    description: str = ""
    kind: str = "dag"
    inputs: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    stop_at: datetime | None = None  # no starts after it; running instances expire then

    @cached_property
    def plan(self) -> Plan:
        """The flow flattened for the runtime, built once per template."""
        return Plan(self.flow)


def linear_deps(circles: list[dict[str, Any]]) -> list[list[list[str]]]:
    """The deps a linear flow implies: each circle depends on the one before it."""
    return [[] if i == 0 else [[circles[i - 1]["uri"]]] for i in range(len(circles))]


def build_flow(circles: list[dict[str, Any]], kind: str, terminal: str,
               nested: dict[str, Flow], name: str | None = None) -> Flow:
    """Build a flow from valid raw circles; `nested` maps uri -> resolved nested Flow."""
    deps = linear_deps(circles) if kind == "linear" else [c.get("deps", []) for c in circles]
    built = []
    for raw, dep in zip(circles, deps, strict=True):
        box = raw.get("box") or {}
        form = tuple(_field(f) for f in box.get("form", ()))
        built.append(Circle(
            uri=raw["uri"], description=make(raw.get("description", "")),
            deps=tuple(tuple(g) for g in dep), weak=tuple(raw.get("weak", ())),
            when=raw.get("when"),
            box=Box(form=form, confirm=make(box.get("confirm")), action=_action(box.get("action"))),
            retry=normalize_retry(raw.get("retry")), timeout=normalize_timeout(raw.get("timeout")),
            flow=nested.get(raw["uri"]),
            assign=normalize_assign(raw["assign"]) if "assign" in raw else None,
            due=normalize_due(raw.get("due")),
            cc=normalize_cc(raw["cc"]) if "cc" in raw else None,
            remind=normalize_remind(raw["remind"]) if "remind" in raw else None,
            enter=raw.get("enter"), leave=raw.get("leave"),
        ))
    return Flow(circles=tuple(built), terminal=terminal, name=name)


def _field(f: dict[str, Any]) -> Field:
    options = f.get("options", ())
    return Field(name=f["name"], type=f.get("type", "string"),
                 label=make(f.get("label", f["name"])), required=bool(f.get("required", False)),
                 options=tuple(option_value(o) for o in options), default=f.get("default"),
                 role=f.get("role"), accept=tuple(f.get("accept", ())),
                 max_bytes=f.get("max_bytes"),
                 option_labels=tuple(make(o["label"]) if isinstance(o, dict) and "label" in o
                                     else str(option_value(o)) for o in options),
                 placeholder=make(f.get("placeholder")), help=make(f.get("help")))


def _action(action: dict[str, Any] | None) -> dict[str, Any] | None:
    """The action's JSON, its texts for people given in several languages as `Text`."""
    kind = action.get("type") if action else None
    keys = ACTION_TEXTS.get(kind) if isinstance(kind, str) else None
    if not action or not keys or not any(isinstance(action.get(k), dict) for k in keys):
        return action
    return {**action, **{k: make(action[k]) for k in keys if isinstance(action.get(k), dict)}}
