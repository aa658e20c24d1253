"""What My flows shows, as plain data: the templates the user may start with their start
forms, and the user's flows as lines (the template's title, a summary of the flow, whom
it waits for, its last step, who started it), read a page at a time or searched; the
start form's inputs parsed.

A template's texts may be a string or a map of language → text (SPEC §17):
`bpflow.languages.pick` picks the reader's.

`pages/flows_state.py` asks for these; who may start what is `bpflow.access`'s to say.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bpflow.access import Caller, may_start
from bpflow.backend import store_for
from bpflow.forms import FormError, validate
from bpflow.interactions import SIGNIN_TEMPLATE
from bpflow.languages import pick
from bpflow.store import Store
from bpflow_app.boxview import FieldView, field_view, iso_text
from bpflow_app.catalogs import N_
from engine.errors import BpflowError
from engine.instance import SUCCESS, Instance
from engine.model import FIELD_TYPES, Field, Template
from engine.phase import approval, staged_form
from engine.texts import translations

SEARCH_MOST = 2000  # a text search looks at the user's newest flows, this many
ANY = "all"  # the filters' "no filter" choice
SUMMARY_VALUES = 3  # a flow's summary: the first form's first values, this many
SUMMARY_CHARS = 40  # each cut to this many characters
WAITS_MOST = 3  # whom a flow waits for: this many named, then "…"
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
    template: str  # its name (the filters')
    version: int
    status: str
    last_step: str  # the circle of the last step, by its description
    updated: str  # ISO (`boxview.iso_text`), shown in the reader's zone
    starter: str = ""
    title: str = ""  # the template's title in the reader's language (else its name)
    step_kind: str = ""  # what the last step did (an event kind of `STEP_WORDS`)
    summary: str = ""  # the first form's values ("64.5 · Taxi to the airport · bob")
    waits: str = ""  # whom it waits for, by name and role ("finance", "bob, carol")
    waits_you: bool = False  # the reader may act on it now


def short(value: Any, most: int = SUMMARY_CHARS) -> str:
    """A value as a summary shows it, on one line and cut to `most` characters."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = " ".join((value if isinstance(value, str)
                     else json.dumps(value, ensure_ascii=False)).split())
    return text if len(text) <= most else text[:most - 1].rstrip() + "…"


def summary(inst: Instance) -> str:
    """What tells a flow from the others of its template: the values of its first form
    filled in (of the template's first circle with a form), else its inputs."""
    for cid in inst.template.plan.order:
        form = inst.template.plan.nodes[cid].circle.box.form
        if not form:
            continue
        run = inst.circles.get(cid)
        values = None if run is None else (
            run.result if run.state == SUCCESS else staged_form(run))
        if isinstance(values, dict):
            shown = [values.get(f.name) for f in form if f.type != "password"]
            return _joined(shown)
        break
    return _joined(list((inst.inputs or {}).values()))


def _joined(values: Iterable[Any]) -> str:
    shown = [short(v) for v in values if v not in (None, "", [], {}) and
             not isinstance(v, bool)]
    return " · ".join(shown[:SUMMARY_VALUES])


def waiting_for(inst: Instance, ready: Iterable[str], caller: Caller | None
                ) -> tuple[str, bool]:
    """Whom the flow waits for now (the people and roles of its ready tasks, the approvers
    of its approvals) and whether that is the reader (who may act on one of them)."""
    who: list[str] = []
    mine = False
    for cid in ready:
        run = inst.circles[cid]
        task, info = run.task, approval(run)
        if task is not None and info is None:
            holder = task.get("assignee")
            names = [holder] if holder else [*task.get("users", ()), *task.get("roles", ())]
            if caller is not None:
                mine = mine or holder == caller.username or not holder and (
                    caller.username in task.get("users", ())
                    or bool(set(task.get("roles", ())) & set(caller.roles)))
        elif info is not None:
            names = [str(a) for a in info.get("approvers", ())]
            mine = mine or caller is not None and caller.username in names
        else:
            continue
        who += [str(n) for n in names if n and str(n) not in who]
    text = ", ".join(who[:WAITS_MOST]) + (", …" if len(who) > WAITS_MOST else "")
    return text, mine


def input_fields(template: Template) -> tuple[Field, ...]:
    """The declared `workflow.input` as form fields (structured types typed as JSON)."""
    return tuple(Field(k, t if t in FIELD_TYPES else "text",
                       k if t in FIELD_TYPES else f"{k} (JSON)", True)
                 for k, t in template.inputs.items())


def parse_inputs(template: Template, form_data: dict[str, Any],
                 gettext: Callable[..., str] | None = None) -> dict[str, Any]:
    """Typed inputs from the start form, or FormError per field (said with `gettext`, the
    page's `LangState.gettext`, when given)."""
    say = gettext or (lambda message, **values: message % values)
    try:
        values, _ = validate(input_fields(template), form_data)
    except FormError as exc:
        raise FormError({k: say(N_("%(field)s is required"), field=k)
                         if _empty(form_data.get(k)) else m
                         for k, m in exc.errors.items()}) from None
    errors = {}
    for k, t in template.inputs.items():
        if t not in FIELD_TYPES and isinstance(values.get(k), str):
            try:
                values[k] = json.loads(values[k])
            except ValueError:
                errors[k] = say(N_("%(field)s must be JSON"), field=k)
    if errors:
        raise FormError(errors)
    return values


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def startables(caller: Caller, errors: dict[str, dict[str, str]] | None = None,
               lang: str = "en") -> list[Startable]:
    """The templates `caller` may start (not retired, `starters` allowing them), with
    their texts in `lang`."""
    store, errors = store_for(caller), errors or {}
    out = []
    for name, version, t in store.startable_templates(lambda body: may_start(caller, body)):
        if name == SIGNIN_TEMPLATE:
            continue  # the outer flow (the session), which signing in starts
        mine = errors.get(name, {})
        out.append(Startable(name, pick(t.title, lang) or name,
                             pick(t.description, lang), version,
                             [field_view(f"start-{name}", f, None, mine.get(f.name), lang=lang)
                              for f in input_fields(t)]))
    return out


def instance_lines(store: Store, rows: list[dict[str, Any]], caller: Caller | None = None,
                   lang: str = "en") -> list[InstanceLine]:
    """The lines of instance rows (`Store.list_instances`' and the like), read with their
    instances (two queries however many) and last steps (one), as `caller` reads them."""
    ids = [r["id"] for r in rows]
    steps = store.last_steps(ids)
    insts = store.get_many(ids) if ids else {}
    out = []
    for r in rows:
        step = steps.get(r["id"])
        inst = insts.get(r["id"])
        user = r.get("user")
        starter = user if isinstance(user, dict) else {}
        line = InstanceLine(r["id"], r["template"], r["version"], r["status"], "",
                            iso_text(r["updated_at"]), str(starter.get("username", "")),
                            title=r["template"])
        if inst is not None:
            line.title = pick(inst.template.title, lang) or r["template"]
            line.summary = summary(inst)
            line.waits, line.waits_you = waiting_for(inst, store.engine.ready(inst), caller)
        if step:
            node = inst.template.plan.nodes.get(step["circle"]) if inst else None
            line.last_step = pick(node.circle.description, lang) if node else ""
            line.last_step = line.last_step or step["circle"]
            line.step_kind = step["kind"]
        out.append(line)
    return out


def my_flows(store: Store, caller: Caller, offset: int, limit: int,
             template: str | None = None, status: str | None = None, lang: str = "en"
             ) -> tuple[list[InstanceLine], int]:
    """A page of the user's flows (of one template, in one status, if given), newest
    first, and their total, without the user's outer flows (`signin`: the session, which
    the frame shows, never a flow anyone started)."""
    rows, total = store.list_instances(caller.id, template, status, limit, offset,
                                       excluding=SIGNIN_TEMPLATE)
    return instance_lines(store, rows, caller, lang), total


def found_instances(store: Store, caller: Caller, text: str, offset: int, limit: int,
                    template: str | None = None, status: str | None = None,
                    lang: str = "en") -> tuple[list[InstanceLine], int, bool]:
    """A page of the user's flows whose template (by name, or by a title in any of its
    languages: the list shows titles), id or last step (as `STEP_WORDS` says it) holds
    `text`, their total, and whether the search stopped at the newest `SEARCH_MOST` (the
    store finds them)."""
    rows, total, cut = store.search_instances(caller.id, text, STEP_WORDS, limit, offset,
                                              template, status, SIGNIN_TEMPLATE,
                                              SEARCH_MOST, titled(store, text))
    return instance_lines(store, rows, caller, lang), total, cut


def titled(store: Store, text: str) -> list[str]:
    """The templates (but the outer flow) a title of which, in any language, holds
    `text` in any case."""
    held = text.casefold()
    out = []
    for name in store.template_versions():
        if name == SIGNIN_TEMPLATE:
            continue
        try:
            title = store.template(name)[1].title
        except BpflowError:
            continue
        if any(held in t.casefold() for t in (translations(title) or {"": title}).values()
               if isinstance(t, str)):
            out.append(name)
    return out


def template_choices(store: Store, lang: str = "en") -> list[tuple[str, str]]:
    """The template filter's choices, (name, title in `lang`): every template but the
    outer flow, by title."""
    out = []
    for name in store.template_versions():
        if name == SIGNIN_TEMPLATE:
            continue
        try:
            title = pick(store.template(name)[1].title, lang)
        except BpflowError:
            title = ""
        out.append((name, title or name))
    return sorted(out, key=lambda c: (c[1].casefold(), c[0]))
