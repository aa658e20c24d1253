"""What My flows shows, as plain data: the templates the user may start with their start
forms, and the user's flows as lines (last step in words, who started it), read a page at
a time or searched; the start form's inputs parsed.

`pages/flows_state.py` asks for these; who may start what is `bpflow.access`'s to say.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bpflow.access import Caller, may_start
from bpflow.backend import store_for
from bpflow.forms import FormError, validate
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.store import Store
from bpflow_app.boxview import FieldView, clock_text, field_view
from engine.model import FIELD_TYPES, Field, Template

SEARCH_MOST = 2000  # a text search looks at the user's newest flows, this many
ANY = "all"  # the filters' "no filter" choice
STEP_WORDS = {"circle_succeeded": "succeeded", "circle_failed": "failed",
              "circle_skipped": "skipped", "circle_reset": "reset",
              "circle_retry_scheduled": "failed, retry scheduled",
              "circle_pending": "waiting for its action", "circle_ready": "ready"}


@dataclass
class Startable:
    name: str
    title: str
    description: str
    version: int
    inputs: list[FieldView] = field(default_factory=list)


@dataclass
class InstanceLine:
    id: str
    template: str
    version: int
    status: str
    last_step: str
    updated: str
    starter: str = ""


def input_fields(template: Template) -> tuple[Field, ...]:
    """The declared `workflow.input` as form fields (structured types typed as JSON)."""
    return tuple(Field(k, t if t in FIELD_TYPES else "text",
                       k if t in FIELD_TYPES else f"{k} (JSON)", True)
                 for k, t in template.inputs.items())


def parse_inputs(template: Template, form_data: dict[str, Any]) -> dict[str, Any]:
    """Typed inputs from the start form, or FormError per field."""
    values, _ = validate(input_fields(template), form_data)
    errors = {}
    for k, t in template.inputs.items():
        if t not in FIELD_TYPES and isinstance(values.get(k), str):
            try:
                values[k] = json.loads(values[k])
            except ValueError:
                errors[k] = f"{k} must be JSON"
    if errors:
        raise FormError(errors)
    return values


def startables(caller: Caller, errors: dict[str, dict[str, str]] | None = None
               ) -> list[Startable]:
    """The templates `caller` may start (not retired, `starters` allowing them)."""
    store, errors = store_for(caller), errors or {}
    out = []
    for name, version, t in store.startable_templates(lambda body: may_start(caller, body)):
        if name == SIGNIN_TEMPLATE:
            continue  # the outer flow (the session), which signing in starts
        mine = errors.get(name, {})
        out.append(Startable(name, t.title or name, t.description, version,
                             [field_view(f"start-{name}", f, None, mine.get(f.name, ""))
                              for f in input_fields(t)]))
    return out


def instance_lines(rows: list[dict[str, Any]],
                   steps: dict[str, dict[str, Any]]) -> list[InstanceLine]:
    out = []
    for r in rows:
        step = steps.get(r["id"])
        text = f"{step['circle']} {STEP_WORDS.get(step['kind'], step['kind'])}" if step else ""
        starter = r.get("user") if isinstance(r.get("user"), dict) else {}
        out.append(InstanceLine(r["id"], r["template"], r["version"], r["status"], text,
                                clock_text(r["updated_at"]), str(starter.get("username", ""))))
    return out


def my_flows(store: Store, user_id: int, offset: int, limit: int,
             template: str | None = None, status: str | None = None
             ) -> tuple[list[InstanceLine], int]:
    """A page of the user's flows (of one template, in one status, if given), newest
    first, and their total, without the user's outer flows (`signin`: the session, which
    the frame shows, never a flow anyone started)."""
    rows, total = store.list_instances(user_id, template, status, limit, offset,
                                       excluding=SIGNIN_TEMPLATE)
    return instance_lines(rows, store.last_steps([r["id"] for r in rows])), total


def found_instances(store: Store, user_id: int, text: str, offset: int, limit: int,
                    template: str | None = None, status: str | None = None
                    ) -> tuple[list[InstanceLine], int, bool]:
    """A page of the user's flows whose template, id or last step (as `STEP_WORDS` says
    it) holds `text`, their total, and whether the search stopped at the newest
    `SEARCH_MOST` (the store finds them)."""
    rows, total, cut = store.search_instances(user_id, text, STEP_WORDS, limit, offset,
                                              template, status, SIGNIN_TEMPLATE,
                                              SEARCH_MOST)
    return instance_lines(rows, store.last_steps([r["id"] for r in rows])), total, cut


def template_choices(store: Store) -> list[str]:
    """The template filter's choices: every template but the outer flow, by name."""
    return [ANY] + sorted(n for n in store.template_versions() if n != SIGNIN_TEMPLATE)
