"""State of the designer (`/design`, `/design/{name}`; admins and designers, SPEC §16).

The template body lives here, on the server: the canvas (`components/canvas.py`) only
reports edits (`edit`), the panel and the JSON view change fields, and every change is
analysed at once (`bpflow.drafts.problems`), each problem put on the circle its JSON
pointer names, and kept as the caller's draft (made at the first change; its id in the
page's address, so a reload opens it). Undo and redo keep the bodies before and after
each change. Publishing shows what it changes against the latest version, then publishes
the draft (`bpflow.drafts.publish`, the path of `POST /api/templates`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import reflex as rx
from reflex.istate.delta import Delta
from reflex.state import _override_base_method
from reflex_base.constants.state import FIELD_MARKER

from bpflow import drafts, sandbox
from bpflow.access import Caller, require_designer
from bpflow.backend import store_for
from bpflow.errors import Forbidden, Unauthorized
from bpflow.languages import pick
from bpflow.limits import LimitError
from bpflow_app import designhints as dh
from bpflow_app import designview as dv
from bpflow_app import routes
from bpflow_app.catalogs import N_, translate
from bpflow_app.designhints import Pick, Timing
from bpflow_app.designview import Problem
from bpflow_app.flowview import STATE_WORDS
from bpflow_app.pages.return_state import TargetView, target_views
from bpflow_app.session import SessionState, expired
from engine.boxes import ACTION_KEYS
from engine.chain import MAX_STEPS, approval_chain
from engine.changes import Changes as Found
from engine.errors import BpflowError, DefinitionError

HISTORY = 100  # changes undo can take back
PICKED = {"to"}  # action keys the panel names people in with a picker (not as text)
# the palette's kinds in the reader's words (the canvas's accessible names too)
KIND_WORDS = {"form": N_("Form"), "confirm": N_("Confirmation"), "http": N_("HTTP call"),
              "approval": N_("Approval"), "mail": N_("Mail"), "timer": N_("Timer"),
              "signal": N_("Signal"), "flow": N_("Nested flow"), "compute": N_("Compute"),
              "marker": N_("Marker"), "auth": N_("Sign-in")}
# the canvas's accessible names (designview.picture's keys)
CANVAS_WORDS = {"node": N_("%(uri)s: %(kind)s"),
                "node_bad": N_("%(uri)s: %(kind)s, with problems"),
                "arrow": N_("Arrow from %(source)s to %(target)s"),
                "into_or": N_("Arrow from %(source)s into the OR-arrow of %(target)s"),
                "or_out": N_("OR-arrow into %(target)s"),
                "junction": N_("OR-junction of %(target)s"),
                "weak": N_("Weak edge from %(source)s to %(target)s"), "or": N_("or")}
CIRCLE_TEXTS = ("description", "when")  # a circle's keys edited as text
CIRCLE_JSON = ("enter", "leave")  # ... as JSON (retry, timeout, ... have inputs of their own)
# the controls a circle's timing and people have, and the keys below the circle whose
# analysis problems each shows (`Extra.notes`)
NOTED = {"retry": ("retry",), "timeout": ("timeout",), "due": ("due",), "remind": ("remind",),
         "assign": ("assign",), "cc": ("cc",), "to": ("box/action/to",)}


@dataclass
class Changes:
    """What publishing changes against the latest version, as the dialog lists it."""
    new: bool = False
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # "uri: key, key"
    template: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)


def changes_view(found: Found) -> Changes:
    return Changes(found.new, list(found.added), list(found.removed),
                   [f"{uri}: {', '.join(keys)}" for uri, keys in found.changed.items()],
                   list(found.template), list(found.moved))


@dataclass
class ChainStep:
    """One approver step of the approval chain's quick form (`engine.chain`)."""
    index: int = 0
    kind: str = "field"  # users | roles | field
    who: str = "manager"  # usernames or roles (comma separated), or the user field
    quorum: str = "all"


# the request form an approval chain starts with (the form builder refines it)
CHAIN_FORM = [{"name": "reason", "type": "text", "label": "Reason", "required": True},
              {"name": "manager", "type": "user", "role": "approver", "label": "Manager",
               "required": True}]


@dataclass
class FieldRow:
    """A form field as the form builder shows it."""
    index: int = 0
    name: str = ""
    type: str = "string"
    label: str = ""
    required: bool = False
    options: str = ""
    default: str = ""
    accept: str = ""
    hints: list[str] = field(default_factory=list)  # completions of its default


@dataclass
class KeyRow:
    """One key of a circle's action (or of the circle) and its text."""
    key: str = ""
    text: str = ""
    hints: list[str] = field(default_factory=list)  # completions of its text


@dataclass
class TryField:
    """A field of the selected circle's form, as Try it fills it."""
    name: str = ""
    label: str = ""
    type: str = "string"
    required: bool = False
    options: list[str] = field(default_factory=list)  # the values a choice stores
    option_labels: list[str] = field(default_factory=list)  # as the reader sees them
    default: str = ""


@dataclass
class TryPanel:
    """What the selected circle of a tried draft shows: its state and the moves it can
    make now (`bpflow.sandbox`'s `can`)."""
    uri: str = ""
    state: str = ""  # the colour key (`designview.trial_states`)
    words: str = ""  # the state in the reader's words
    fill: bool = False
    confirm: bool = False  # its fill is a confirmation (accept or decline)
    decide: bool = False
    returning: bool = False  # its "Send back to…" is open: the steps are listed
    answer: bool = False
    fire: bool = False
    fires_at: str = ""
    fields: list[TryField] = field(default_factory=list)
    result: str = ""
    reason: str = ""


@dataclass
class Panel:
    """What the properties panel shows of the selected circle."""
    uri: str = ""
    kind: str = "marker"
    description: str = ""
    when: str = ""
    when_hints: list[str] = field(default_factory=list)  # completions (`designhints`)
    confirm: str = ""
    confirm_hints: list[str] = field(default_factory=list)
    has_form: bool = False
    fields: list[FieldRow] = field(default_factory=list)
    action: list[KeyRow] = field(default_factory=list)
    more: list[KeyRow] = field(default_factory=list)  # retry, timeout, assign, ...
    depends: str = ""  # its deps in words: "a, b | c"
    errors: list[str] = field(default_factory=list)


@dataclass
class Extra:
    """The selected circle's people and timing, as the panel's pickers and inputs show
    them, and each control's message (a value it cannot take, else the analysis's)."""
    has_to: bool = False  # its action names people in `to` (an approval, a mail)
    recipients: list[Pick] = field(default_factory=list)  # its `to`
    assign_users: list[Pick] = field(default_factory=list)
    assign_roles: list[Pick] = field(default_factory=list)
    cc_users: list[Pick] = field(default_factory=list)
    cc_roles: list[Pick] = field(default_factory=list)
    escalate_users: list[Pick] = field(default_factory=list)
    escalate_roles: list[Pick] = field(default_factory=list)
    timing: Timing = field(default_factory=Timing)
    notes: dict[str, str] = field(default_factory=dict)  # by control (`NOTED`)


def design_name(path: str) -> str:
    """The template of a `/design/<name>` path (behind any frontend path); "" for new."""
    parts = [p for p in path.split("/") if p]
    return parts[-1] if len(parts) >= 2 and parts[-2] == "design" else ""


class DesignState(SessionState):
    # the template being designed: kept on the server only (the page is sent what it
    # shows of it: the canvas's picture, the panels, the JSON view's text)
    _body: dict[str, Any] = {}
    source: str = ""  # the template opened (empty: a new one)
    selected: str = ""  # a circle's uri, an arrow's or a junction's id ("" the template)
    problems: list[Problem] = []
    _json_text: str = ""  # the JSON view's (`DesignJson.json_text`)
    json_error: str = ""
    show_weak: bool = False
    loading: bool = True
    allowed: bool = False
    can_undo: bool = False
    can_redo: bool = False
    draft: int = 0  # the caller's draft holding the body (0: none yet)
    changes: Changes = Changes()  # what publishing changes (asked before publishing)
    asked: bool = False  # the publish dialog is open
    chain_open: bool = False  # the approval chain's quick form is open
    chain: list[ChainStep] = []
    chain_error: str = ""
    trial: dict[str, Any] = {}  # the sandbox's state while the draft is tried ({}: not)
    people_users: list[str] = []  # whom the pickers offer (`drafts.people`)
    people_roles: list[str] = []
    pick_errors: dict[str, str] = {}  # by picker: the name it could not take
    typed_errors: dict[str, str] = {}  # by control: the value it could not take
    said: str = ""  # what the last move of a form field did (read out by screen readers)
    try_comment: str = ""  # the comment of a tried approval's decision
    try_back: str = ""  # the tried approval whose "Send back to…" is open ("": none)
    try_targets: list[TargetView] = []  # ... the steps it may go back to
    try_target: str = ""  # ... the one chosen
    _undo: list[str] = []
    _redo: list[str] = []
    # the canvas's picture as this page was last sent it (`get_delta`,
    # `designview.changed`): its version, and its nodes and edges by id unless the next
    # picture is to be sent whole
    _drawn: dict[str, Any] = {}

    def _raw(self) -> dict[str, Any]:
        """The body itself, not Reflex's proxy of it: reading a 200-circle body through
        the proxy (a new proxy for every list and dict reached) costs far more than the
        analysis (bench/designer.py). Only read: changes go through `_change`."""
        return getattr(self._body, "__wrapped__", self._body)

    # ------------------------------------------------------------ loading
    def _designer(self) -> Caller:
        caller = self._caller()
        require_designer(caller)
        return caller

    def _as_designer(self, step: Callable[[Caller], Any]) -> Any:
        try:
            caller = self._designer()
        except Unauthorized as exc:
            return expired(self, exc)
        except Forbidden:
            self.allowed = False
            return rx.toast.error(self.gettext("Only administrators and designers may "
                                               "design templates"))
        self.allowed = True
        return step(caller)

    @rx.event
    def load(self):
        self.loading = True
        self._whole()  # a new page: its canvas is drawn whole
        if self._visitor() is None:
            return None
        name = design_name(self.router.url.path)
        draft = self.router.url.query_parameters.get("draft", "")
        return self._as_designer(lambda caller: self._open(
            caller, name, int(draft) if draft.isdigit() else 0))

    def _open(self, caller: Caller, name: str, draft: int):
        """A draft of the caller's (reloaded), else the latest version of `name` (a draft
        of it is made at the first change), else a new template."""
        self.source, self.selected, self.json_error, self.draft = name, "", "", 0
        self.changes, self.asked, self.trial = Changes(), False, {}
        self._undo, self._redo = [], []
        store = store_for(caller)
        body: dict[str, Any] = dv.empty()
        try:
            if draft:
                body, self.draft = drafts.open_draft(store, caller, draft).body, draft
            elif name:
                body = drafts.draft_from_template(store, caller, name)
        except BpflowError as exc:
            self.loading = False
            return rx.toast.error(self.explain(exc))
        self._show(caller, body)
        self._people(caller)
        self._json_text = dv.dumps(body)
        self.loading = False
        return None

    def _show(self, caller: Caller, body: dict[str, Any]) -> None:
        """`body` as the current one: analysed, the history's buttons (the JSON view's
        text is the caller's to set: `_then`)."""
        self._body = body
        self.problems = self._analyse(caller, body)
        self.can_undo, self.can_redo = bool(self._undo), bool(self._redo)
        if self.selected and not self._exists(self.selected):
            self.selected = ""

    def _analyse(self, caller: Caller, body: dict[str, Any]) -> list[Problem]:
        return [Problem(p.pointer, p.code, self.say(p.message), p.warning,
                        dv.element_of(body, p.pointer))
                for p in drafts.problems(store_for(caller), body)]

    def _save(self, caller: Caller, body: dict[str, Any]) -> Any:
        """Keep the body as the caller's draft (made at the first change, its id then in
        the page's address, so that a reload opens it)."""
        store = store_for(caller)
        try:
            if self.draft:
                drafts.save_draft(store, caller, self.draft, body)
                return None
            self.draft = drafts.create_draft(store, caller, body).id
        except (BpflowError, LimitError) as exc:
            return rx.toast.error(self.explain(exc))
        return rx.call_script(f"history.replaceState(history.state, '', "
                              f"location.pathname + '?draft={self.draft}')")

    def _exists(self, element: str) -> bool:
        if dv.find(self._raw(), element) is not None:
            return True
        parsed = dv.parse_arrow(element)
        return parsed is not None and dv.find(self._raw(), parsed[0]) is not None

    # ------------------------------------------------------------ changes
    def _change(self, edit: Callable[[dict[str, Any]], str | None],
                typed: str | None = None) -> Any:
        """Apply `edit` to a copy of the body; keep it (undoable) unless it says why not.
        `typed`: the JSON view's text when the change was typed there."""
        def step(caller: Caller) -> Any:
            body = copy.deepcopy(self._raw())
            refused = edit(body)
            if refused:
                return rx.toast.error(self.gettext(REFUSALS.get(refused, refused)))
            if body == self._raw():
                return None
            self._undo = [*self._undo[-(HISTORY - 1):], _kept(self._raw())]
            self._redo = []
            self.json_error = ""
            self._show(caller, body)
            return self._then(caller, body, typed)
        return self._as_designer(step)

    def _then(self, caller: Caller, body: dict[str, Any], typed: str | None = None
              ) -> Iterator[Any]:
        """After a change: the page is sent the analysis and the picture first (its errors
        shown without waiting for the rest, bench/designer.py), then the JSON view's text
        and the draft kept."""
        yield None
        self._json_text = dv.dumps(body) if typed is None else typed
        yield self._save(caller, body)

    def _travel(self, back: bool) -> Any:
        def step(caller: Caller) -> Any:
            source, target = (self._undo, self._redo) if back else (self._redo, self._undo)
            if not source:
                return None
            body = json.loads(source[-1])
            if back:
                self._undo, self._redo = source[:-1], [*target, _kept(self._raw())]
            else:
                self._redo, self._undo = source[:-1], [*target, _kept(self._raw())]
            self.json_error = ""
            self._show(caller, body)
            return self._then(caller, body)
        return self._as_designer(step)

    @rx.event
    def undo(self):
        return self._travel(back=True)

    @rx.event
    def redo(self):
        return self._travel(back=False)

    @rx.event
    def edit(self, change: dict[str, Any]):
        """An edit the canvas reports: `{"kind": "select" | "move" | "connect" | "delete"
        | "add" | "undo" | "redo" | "layout" | "weak" | "picture", ...}` ("picture": the
        canvas missed a change and asks for its whole picture)."""
        kind = change.get("kind")
        if kind == "picture":
            self._whole()
            self.dirty_vars.add("graph")
            return None
        if kind == "select":
            self.selected = str(change.get("id") or "")
            return None
        if kind == "move":
            moves = [m for m in change.get("nodes") or [] if isinstance(m, dict)]
            return self._change(lambda body: self._moved(body, moves))
        if kind == "connect":
            source, target = str(change.get("source")), str(change.get("target"))
            return self._change(lambda body: dv.connect(body, source, target))
        if kind == "delete":
            ids = [str(i) for i in change.get("ids") or []]
            return self._change(lambda body: dv.delete(body, ids))
        if kind in ("undo", "redo"):
            return self._travel(back=kind == "undo")
        if kind == "add":
            return self._add(str(change.get("box")))
        if kind == "layout":
            return self._change(dv.unplace)
        if kind == "weak":
            self.show_weak = not self.show_weak
        return None

    @staticmethod
    def _moved(body: dict[str, Any], moves: list[dict[str, Any]]) -> None:
        for m in moves:
            try:
                dv.move(body, str(m.get("id")), float(m.get("x")), float(m.get("y")))
            except (TypeError, ValueError):
                continue

    @rx.event
    def add(self, kind: str):
        return self._add(kind)

    def _add(self, kind: str) -> Any:
        added: list[str] = []

        def adding(body: dict[str, Any]) -> str | None:
            if kind not in dv.PALETTE:
                return "invalid"
            added.append(dv.add_circle(body, kind))
            return None
        out = self._change(adding)
        if added:
            self.selected = added[0]
        return out

    @rx.event
    def select(self, element: str):
        self.selected = element

    @rx.event
    def select_problem(self, pointer: str):
        """The problems list: select the circle the pointer names (else the template)."""
        self.selected = dv.element_of(self._raw(), pointer)

    @rx.event
    def auto_layout(self):
        return self._change(dv.unplace)

    @rx.event
    def toggle_weak(self):
        self.show_weak = not self.show_weak

    @rx.event
    def delete_selected(self):
        chosen = self.selected
        return self._change(lambda body: dv.delete(body, [chosen]) if chosen else None)

    @rx.event
    def join(self, other: str):
        """Make the selected arrow an OR-arrow with `other` as one more member."""
        arrow = self.selected
        return self._change(lambda body: dv.join(body, arrow, other))

    @rx.event
    def depend_on(self, source: str):
        """The panel's (keyboard's) way to draw an arrow into the selected circle."""
        target = self.selected
        return self._change(lambda body: dv.connect(body, source, target))

    # ------------------------------------------------------------ the template's fields
    @rx.event
    def set_template(self, key: str, text: str):
        if key not in ("name", "title", "description", "kind", "inputs", "starters",
                       "stop_at"):
            return None

        def setting(body: dict[str, Any]) -> None:
            value: Any = text
            if key == "starters":
                value = [s.strip() for s in text.split(",") if s.strip()]
            elif key == "inputs":
                value = dv.text_value(text, as_text=False)
            elif key == "kind" and text == "dag":
                value = None
            elif key in ("title", "description"):
                value = dv.text_of(text)
            if key == "name":
                body["name"] = text.strip()
            else:
                dv.set_key(body, key, value)
        return self._change(setting)

    # ------------------------------------------------------------ the circle's fields
    def _on_circle(self, edit: Callable[[dict[str, Any]], str | None]) -> Any:
        uri = self.selected

        def editing(body: dict[str, Any]) -> str | None:
            circle = dv.find(body, uri)
            return edit(circle) if circle is not None else "invalid"
        return self._change(editing)

    @rx.event
    def set_uri(self, text: str):
        old, new = self.selected, text.strip()
        out = self._change(lambda body: dv.rename(body, old, new))
        if dv.find(self._raw(), new) is not None:
            self.selected = new
        return out

    @rx.event
    def set_circle(self, key: str, text: str):
        if key not in CIRCLE_TEXTS + CIRCLE_JSON + ("confirm",):
            return None

        def setting(circle: dict[str, Any]) -> None:
            if key == "confirm":
                if not isinstance(circle.get("box"), dict):
                    circle["box"] = {}
                circle["box"]["confirm"] = dv.text_of(text)
                return
            value = dv.text_value(text, as_text=key in CIRCLE_TEXTS)
            dv.set_key(circle, key, dv.text_of(value) if key == "description" and value
                       else value)
        return self._on_circle(setting)

    @rx.event
    def set_kind(self, kind: str):
        if kind not in dv.PALETTE:
            return None
        return self._on_circle(lambda circle: dv.set_kind(circle, kind))

    @rx.event
    def set_action(self, key: str, text: str):
        def setting(circle: dict[str, Any]) -> str | None:
            action = (circle.get("box") or {}).get("action")
            if not isinstance(action, dict) or key == "type":
                return "invalid"
            dv.set_key(action, key, dv.text_value(text, as_text=key in dv.TEXT_KEYS))
            return None
        return self._on_circle(setting)

    # ------------------------------------------------------------ the form builder
    @rx.event
    def new_field(self):
        return self._on_circle(dv.add_field)

    @rx.event
    def move_field(self, index: int, by: int):
        """A field one place up (-1) or down (1), said for screen readers."""
        out = self._on_circle(lambda circle: dv.move_field(circle, index, by))
        box = (dv.find(self._raw(), self.selected) or {}).get("box")
        form = box.get("form") if isinstance(box, dict) else None
        to = index + by
        if isinstance(form, list) and 0 <= index < len(form) and 0 <= to < len(form) \
                and isinstance(form[to], dict):
            self.said = self.gettext("%(name)s is now field %(n)s of %(count)s",
                                     name=dv.value_text(form[to].get("name")), n=to + 1,
                                     count=len(form))
        return out

    @rx.event
    def remove_field(self, index: int):
        return self._on_circle(lambda circle: dv.remove_field(circle, index))

    @rx.event
    def set_field(self, index: int, key: str, value: Any):
        if key not in ("name", "type", "label", "required", "options", "default", "accept"):
            return None
        return self._on_circle(lambda circle: dv.set_field(circle, index, key, value))

    # ------------------------------------------------------------ people, completion, timing
    def _people(self, caller: Caller) -> None:
        """Whom the pickers offer: the users and roles of the caller's tenant."""
        found = drafts.people(store_for(caller), caller)
        self.people_users, self.people_roles = found.users, found.roles

    @rx.event
    def pick(self, target: str, form_data: dict[str, Any]):
        """A picker's name added to the selected circle (`designhints.TARGETS`): a user
        or a `${...}` placeholder where users are named, a role where roles are; any
        other name is refused with the picker's error."""
        if target not in dh.TARGETS:
            return None
        name = str(form_data.get("name") or "").strip()
        users = dh.TARGETS[target][1]

        def step(caller: Caller) -> Any:
            self._people(caller)  # the tenant's names as they are now
            known = self.people_users if users else self.people_roles
            where = f"{self.selected}:{target}"
            if not name:
                return None
            if name not in known and not (users and dh.placeholder(name)):
                self.pick_errors = {**self.pick_errors, where: self._nobody(users, name)}
                return None
            self.pick_errors = {k: v for k, v in self.pick_errors.items() if k != where}

            def adding(circle: dict[str, Any]) -> None:
                had = dh.named(circle, target)
                if name not in had:
                    dh.set_named(circle, target, [*had, name])
            return self._on_circle(adding)
        return self._as_designer(step)

    def _nobody(self, users: bool, name: str) -> str:
        return (self.gettext("There is no user named %(name)s", name=name) if users else
                self.gettext("There is no role named %(name)s", name=name))

    @rx.event
    def unpick(self, target: str, name: str):
        """A name taken out of a picker's field."""
        if target not in dh.TARGETS:
            return None
        return self._on_circle(lambda circle: dh.set_named(
            circle, target, [n for n in dh.named(circle, target) if n != name]))

    @rx.event
    def set_timing(self, key: str, text: str):
        """One of the circle's retry, timeout, due, remind or cc inputs; a value it cannot
        take is said under it (the body keeps the last good one)."""
        control = self.selected + ":" + ("due" if key == "due" else "remind" if key in (
            "before_due", "every") else key.split("_")[0])
        wrong: list[str] = []

        def setting(circle: dict[str, Any]) -> None:
            try:
                dh.set_timing(circle, key, text)
            except dh.Wrong as exc:
                wrong.append(self.explain(exc))
        out = self._on_circle(setting)
        self.typed_errors = {**{k: v for k, v in self.typed_errors.items() if k != control},
                             **({control: wrong[0]} if wrong else {})}
        return out

    @rx.event
    def complete(self, target: str, choice: str):
        """A suggestion accepted: what is being typed in the field `target` (`when`,
        `confirm`, `action:<key>`, `field:<index>`) becomes `choice` (the page's script
        gives the field the focus back)."""
        circle = dv.find(self._raw(), self.selected) or {}
        box = circle.get("box") if isinstance(circle.get("box"), dict) else {}
        kind, _, key = target.partition(":")
        if kind == "when":
            text, expression = dv.value_text(circle.get("when")), True
        elif kind == "confirm":
            text, expression = dv.value_text(box.get("confirm")), False
        elif kind == "action" and isinstance(box.get("action"), dict):
            text, expression = dv.value_text(box["action"].get(key)), False
        elif kind == "field" and key.isdigit() and int(key) < len(box.get("form") or []):
            form_field = box["form"][int(key)]
            text = dv.value_text(form_field.get("default") if isinstance(form_field, dict)
                                 else None)
            expression = False
        else:
            return None
        done = dh.complete(text, choice, expression)
        return (self.set_circle(kind, done) if kind in ("when", "confirm") else
                self.set_action(key, done) if kind == "action" else
                self.set_field(int(key), "default", done))

    @rx.var
    def extra(self) -> Extra:
        """The selected circle's people and timing (`Extra`)."""
        body = self._raw()
        circle = dv.find(body, self.selected)
        if circle is None:
            return Extra()
        users, roles = set(self.people_users), set(self.people_roles)

        def picks(target: str) -> list[Pick]:
            is_users = dh.TARGETS[target][1]
            return dh.picks(dh.named(circle, target), users if is_users else roles, is_users)
        box = circle.get("box") if isinstance(circle.get("box"), dict) else {}
        action = box.get("action") if isinstance(box.get("action"), dict) else {}
        at = next((i for i, c in enumerate(body.get("circles") or [])
                   if isinstance(c, dict) and c.get("uri") == self.selected), -1)
        notes = {}
        for control, keys in NOTED.items():
            heads = tuple(f"/circles/{at}/{k}" for k in keys)
            found = [p.message for p in self.problems if not p.warning
                     and any(p.pointer == h or p.pointer.startswith(h + "/") for h in heads)]
            notes[control] = self.typed_errors.get(f"{self.selected}:{control}") or \
                " ".join(found)
        chosen = {t: picks(t) for t in dh.TARGETS}
        for target, (_, is_users) in dh.TARGETS.items():  # a name that is nobody's
            nobody = ", ".join(p.name for p in chosen[target] if not p.known)
            notes[target] = self.pick_errors.get(f"{self.selected}:{target}") or (
                self._nobody(is_users, nobody) if nobody else notes.get(target, ""))
        return Extra(
            has_to=action.get("type") in ("approval", "mail"), recipients=chosen["to"],
            assign_users=chosen["assign.users"], assign_roles=chosen["assign.roles"],
            cc_users=chosen["cc.users"], cc_roles=chosen["cc.roles"],
            escalate_users=chosen["escalate.users"], escalate_roles=chosen["escalate.roles"],
            timing=dh.timing(circle), notes=notes)

    # ------------------------------------------------------------ the approval chain
    @rx.event
    def open_chain(self):
        self.chain_open, self.chain_error = True, ""
        if not self.chain:
            self.chain = [ChainStep(0)]

    @rx.event
    def close_chain(self):
        self.chain_open = False

    @rx.event
    def show_chain(self, shown: bool):
        """The quick form's dialog opened or closed (Escape, a click outside)."""
        self.chain_open = shown and self.chain_open

    @rx.event
    def add_step(self):
        if len(self.chain) < MAX_STEPS:
            self.chain = [*self.chain, ChainStep(len(self.chain), "roles", "", "any")]

    @rx.event
    def remove_step(self, index: int):
        self.chain = [replace(c, index=i) for i, c in
                      enumerate(c for c in self.chain if c.index != index)]

    @rx.event
    def set_step(self, index: int, key: str, value: str):
        if key in ("kind", "who", "quorum"):
            self.chain = [replace(c, **{key: value}) if c.index == index else c
                          for c in self.chain]

    @rx.event
    def make_chain(self):
        """The quick form's flow: a request form, then each approver step in order,
        replacing the canvas's (undoable)."""
        steps = [_chain_step(c) for c in self.chain]
        name, title = self._raw().get("name") or "approval", self._raw().get("title") or ""
        try:
            made = approval_chain(str(name), title, [dict(f) for f in CHAIN_FORM], steps)
        except ValueError as exc:
            self.chain_error = self.explain(exc)
            return None
        self.chain_open, self.chain_error = False, ""

        def replacing(body: dict[str, Any]) -> None:
            body.clear()
            body.update(made)
        return self._change(replacing)

    # ------------------------------------------------------------ the JSON view
    @rx.event
    def set_json(self, text: str):
        """The JSON view edited: a body that parses replaces the canvas's; one that does
        not is kept in the view with the reason, the canvas as it was."""
        self._json_text = text
        if len(text) > dv.MAX_BODY:
            self.json_error = self.gettext("The JSON is too large for a template")
            return None
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            self.json_error = self.gettext("Not valid JSON: %(reason)s", reason=str(exc))
            return None
        if not isinstance(parsed, dict):
            self.json_error = self.gettext("A template is a JSON object")
            return None
        def replacing(body: dict[str, Any]) -> None:
            body.clear()
            body.update(parsed)
        return self._change(replacing, typed=text)  # as typed, not reformatted

    # ------------------------------------------------------------ publishing
    @rx.event
    def review(self):
        """Before publishing: what it changes against the latest version."""
        def step(caller: Caller) -> Any:
            self.changes = changes_view(drafts.changes(store_for(caller), self._raw()))
            self.asked = True
        return self._as_designer(step)

    @rx.event
    def cancel(self):
        self.asked = False

    @rx.event
    def show_review(self, shown: bool):
        """The publish dialog opened or closed (Escape)."""
        self.asked = shown and self.asked

    @rx.event
    def publish(self):
        self.asked = False

        def step(caller: Caller) -> Any:
            saved = self._save(caller, copy.deepcopy(self._raw())) if not self.draft else None
            if not self.draft:
                return saved
            store = store_for(caller)
            tried, self.trial = self.draft, {}
            try:
                if store.sandbox(str(tried)) is not None:  # the draft's try goes with it
                    sandbox.delete(store, caller, tried)
                name, version, created = drafts.publish(store, caller, self.draft)
            except DefinitionError:
                self.problems = self._analyse(caller, self._raw())
                return rx.toast.error(self.gettext("Fix the problems before publishing"))
            except BpflowError as exc:
                return rx.toast.error(self.explain(exc))
            self.draft, self.source, self._undo, self._redo = 0, name, [], []
            self.can_undo = self.can_redo = False
            return [rx.call_script(f"history.replaceState(history.state, '', "
                                   f"{json.dumps(routes.design(name))})"),
                    rx.toast.success(
                        self.gettext("Published %(name)s version %(version)s", name=name,
                                     version=version) if created else
                        self.gettext("Identical to %(name)s version %(version)s: no new version "
                                     "(its positions are kept)", name=name,
                                     version=version))]
        return self._as_designer(step)

    # ------------------------------------------------------------ try it
    def _trying(self, move: Callable[[Any, Caller], dict[str, Any]]) -> Any:
        """One move on the draft's sandbox (`bpflow.sandbox`): its state as the canvas
        then draws it, or why not in a toast."""
        def step(caller: Caller) -> Any:
            try:
                self.trial = move(store_for(caller), caller)
            except (BpflowError, LimitError) as exc:
                return rx.toast.error(self.explain(exc))
            self.try_comment, self.try_back, self.try_targets = "", "", []
            return None
        return self._as_designer(step)

    @rx.event
    def try_it(self):
        """Start the draft as it is now in its sandbox (a new start replaces it)."""
        if self.errors:
            return rx.toast.error(self.gettext("Fix the problems before trying the flow"))

        def starting(store: Any, caller: Caller) -> dict[str, Any]:
            if not self.draft:  # the draft the sandbox runs
                self.draft = drafts.create_draft(store, caller, self._raw()).id
            return sandbox.start(store, caller, self.draft)
        had = self.draft
        out = self._trying(starting)
        if self.draft and not had:
            return [out, rx.call_script(f"history.replaceState(history.state, '', "
                                        f"location.pathname + '?draft={self.draft}')")]
        return out

    @rx.event
    def stop_trying(self):
        """Delete the sandbox; the canvas draws the draft again."""
        def stopping(caller: Caller) -> Any:
            tried, self.trial = self.draft, {}
            try:
                sandbox.delete(store_for(caller), caller, tried)
            except BpflowError:  # already gone (deleted after a day)
                return None
            return None
        return self._as_designer(stopping)

    @rx.event
    def try_fill(self, values: dict[str, Any]):
        """The selected circle's form sent with `values` (empty ones left out)."""
        uri = self.selected
        sent = {k: v for k, v in values.items() if v not in ("", None)}
        return self._trying(lambda store, caller: sandbox.fill(store, caller, self.draft,
                                                               uri, sent))

    @rx.event
    def try_confirm(self, accept: bool):
        uri = self.selected
        return self._trying(lambda store, caller: sandbox.fill(
            store, caller, self.draft, uri, {"accept": accept}))

    @rx.event
    def set_try_comment(self, value: str):
        self.try_comment = value

    @rx.event
    def try_decide(self, decision: str):
        """Approve or reject the selected approval with the comment written (if any)."""
        uri, comment = self.selected, self.try_comment.strip()
        if decision == "returned":
            return self._try_back(uri, None, comment)
        return self._trying(lambda store, caller: sandbox.decide(store, caller, self.draft,
                                                                 uri, decision, comment))

    @rx.event
    def try_ask_return(self):
        """"Send back to…" of the selected approval: the steps it may go back to, as a
        real flow's "Return to…" lists them (the nearest chosen)."""
        uri = self.selected

        def offer(caller: Caller) -> Any:
            try:
                found = sandbox.return_targets(store_for(caller), caller, self.draft, uri,
                                               self._language())
            except BpflowError as exc:
                return rx.toast.error(self.explain(exc))
            if not found:
                return rx.toast.info(self.gettext("There is no earlier step to return it to"))
            self.try_targets, self.try_target = target_views(found, self.gettext)
            self.try_back = uri
            return None
        return self._as_designer(offer)

    @rx.event
    def set_try_target(self, value: str):
        self.try_target = value

    @rx.event
    def try_return(self):
        """Send the approval back to the step chosen, saying why."""
        return self._try_back(self.try_back, self.try_target or None, self.try_comment.strip())

    def _try_back(self, uri: str, to: str | None, comment: str) -> Any:
        if not comment:  # as in the inbox: whoever gets it back reads what to amend
            return rx.toast.error(self.gettext("Say what to amend: returning needs a comment"))
        return self._trying(lambda store, caller: sandbox.decide(
            store, caller, self.draft, uri, "returned", comment, to))

    @rx.event
    def try_answer(self, values: dict[str, Any]):
        """The selected circle's answer: an HTTP status and a JSON body (or a signal's
        data)."""
        uri = self.selected
        status, text = str(values.get("status") or "").strip(), str(values.get("body") or "")
        if status and not (status.isdigit() and 100 <= int(status) <= 599):
            return rx.toast.error(self.gettext("An HTTP status is a number from 100 to 599"))
        try:
            body = json.loads(text) if text.strip() else None
        except ValueError as exc:
            return rx.toast.error(self.gettext("Not valid JSON: %(reason)s", reason=str(exc)))
        return self._trying(lambda store, caller: sandbox.answer(
            store, caller, self.draft, uri, int(status) if status else None, body))

    @rx.event
    def try_fire(self):
        """What the selected circle waits for the clock for happens now."""
        uri = self.selected
        return self._trying(lambda store, caller: sandbox.fire(store, caller, self.draft, uri))

    @rx.var
    def trying(self) -> bool:
        return bool(self.trial)

    @rx.var
    def trial_status(self) -> str:
        return str(self.trial.get("status") or "")

    @rx.var
    def trial_path(self) -> list[str]:
        """The path taken: each circle's moves in order, in words ("request: done")."""
        return [f"{m['uri']}: {self.gettext(STATE_WORDS.get(m['state'], m['state']))}"
                for m in self.trial.get("path") or []]

    @rx.var
    def try_panel(self) -> TryPanel:
        circles = self.trial.get("circles") or {}
        run = circles.get(self.selected)
        if not isinstance(run, dict):
            return TryPanel()
        state = dv.trial_states({self.selected: run})[self.selected]
        lang = self._language()
        circle = dv.find(self._raw(), self.selected) or {}
        box = circle.get("box") if isinstance(circle.get("box"), dict) else {}
        form = box.get("form") if isinstance(box.get("form"), list) else []
        can = run.get("can") or []
        return TryPanel(
            uri=self.selected, state=state, words=self.gettext(STATE_WORDS[state]),
            fill="fill" in can, confirm="fill" in can and "confirm" in box,
            decide="decide" in can, returning="decide" in can and self.try_back == self.selected,
            answer="answer" in can, fire="fire" in can,
            fires_at=str(run.get("fires_at") or ""),
            fields=[_try_field(f, lang) for f in form if isinstance(f, dict)
                    and isinstance(f.get("name"), str)],
            result="" if run.get("result") is None else json.dumps(run["result"],
                                                                   ensure_ascii=False),
            reason=str(run.get("reason") or ""))

    # ------------------------------------------------------------ what the page shows
    def _whole(self) -> None:
        """The canvas's next picture is sent whole."""
        self._drawn = {"version": self._drawn.get("version", 0)}

    @_override_base_method  # Reflex's way to override one of its state's methods
    def get_delta(self) -> Delta:
        """The changes sent to the page, the canvas's picture among them as what differs
        from the picture the page was last sent (`designview.changed`): typing into a
        200-circle flow sends the node that changed, not all of them (bench/designer.py)."""
        delta = super().get_delta()
        mine = delta.get(self.get_full_name())
        key = "graph" + FIELD_MARKER
        if mine and key in mine:
            drawn = getattr(self._drawn, "__wrapped__", self._drawn)
            mine[key], kept = dv.changed(drawn, mine[key])
            self._drawn = kept
        return delta

    @rx.var
    def errors(self) -> int:
        return sum(1 for p in self.problems if not p.warning)

    @rx.var
    def graph(self) -> dict[str, list[dict[str, Any]]]:
        """The canvas's nodes and edges."""
        words = {**CANVAS_WORDS, **{f"kind:{k}": v for k, v in KIND_WORDS.items()}}

        lang = self._language()  # once: each node's names are said in it

        def say(key: str, **values: Any) -> str:
            return translate(lang, words[key], **values)
        trial = getattr(self.trial, "__wrapped__", self.trial)
        states = dv.trial_states(trial.get("circles") or {}) if trial else None
        nodes, edges = dv.picture(self._raw(), self.problems, self.selected, self.show_weak,
                                  say, states)
        for n in nodes:  # a tried circle is named with its state
            if "state" in n["data"]:
                n["ariaLabel"] += " — " + translate(lang, STATE_WORDS[n["data"]["state"]])
        return {"nodes": nodes, "edges": edges}

    @rx.var
    def template_fields(self) -> dict[str, str]:
        body = self._raw()
        return {"name": dv.value_text(body.get("name")),
                "title": dv.value_text(body.get("title")),
                "description": dv.value_text(body.get("description")),
                "kind": str(body.get("kind") or "dag"),
                "inputs": dv.value_text(body.get("inputs")),
                "starters": ", ".join(s for s in body.get("starters") or []
                                      if isinstance(s, str))
                if isinstance(body.get("starters"), list) else "",
                "stop_at": dv.value_text(body.get("stop_at"))}

    @rx.var
    def arrow_selected(self) -> bool:
        return dv.parse_arrow(self.selected) is not None

    @rx.var
    def panel(self) -> Panel:
        circle = dv.find(self._raw(), self.selected)
        if circle is None:
            return Panel()
        box = circle.get("box") if isinstance(circle.get("box"), dict) else {}
        action = box.get("action") if isinstance(box.get("action"), dict) else None
        form = box.get("form") if isinstance(box.get("form"), list) else []
        kind = dv.kind_of(circle)
        keys = sorted(set(ACTION_KEYS.get(kind, ())) - PICKED)
        groups = circle.get("deps") if isinstance(circle.get("deps"), list) else []
        known: list[str] = []  # the names it may read, once asked (`designhints.names`)

        def hints(text: str, expression: bool = False) -> list[str]:
            if dh.typing(text, expression) is None:
                return []
            if not known:
                known.extend(dh.names(self._raw(), self.selected))
            return dh.suggest(text, known, expression)
        when, confirm = dv.value_text(circle.get("when")), dv.value_text(box.get("confirm"))
        rows = [_row(i, f) for i, f in enumerate(form) if isinstance(f, dict)]
        for r in rows:
            r.hints = hints(r.default)
        texts = [(k, dv.value_text(action.get(k))) for k in keys] if action else []
        return Panel(
            uri=self.selected, kind=kind,
            description=dv.value_text(circle.get("description")),
            when=when, when_hints=hints(when, expression=True),
            confirm=confirm, confirm_hints=hints(confirm),
            has_form=bool(form),
            fields=rows,
            action=[KeyRow(k, t, hints(t)) for k, t in texts],
            more=[KeyRow(k, dv.value_text(circle.get(k))) for k in CIRCLE_JSON],
            depends=", ".join(" | ".join(map(str, g)) for g in groups if isinstance(g, list)),
            errors=[p.message for p in self.problems
                    if p.element == self.selected and not p.warning])


class DesignJson(DesignState):
    """The JSON view's text in a state of its own, so that its change (the text of a
    200-circle template is ~44 kB, sent after the analysis: `DesignState._then`) redraws
    the view alone, not the whole page (bench/designer.py)."""

    @rx.var
    def json_text(self) -> str:
        return self._json_text


class DesignNames(DesignState):
    """The circles' names (the panels' *Add an arrow from…* and *Join into an OR-arrow
    with…* lists, 200 items each for a 200-circle flow) in a state of their own: a change
    that leaves them as they were redraws neither list (bench/designer.py)."""

    @rx.var
    def uris(self) -> list[str]:
        return [c["uri"] for c in dv.circles(self._raw()) if isinstance(c.get("uri"), str)]


def _kept(body: dict[str, Any]) -> str:
    """A body as undo and redo keep it (compact: never shown)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _try_field(f: dict[str, Any], lang: str) -> TryField:
    """A form field as Try it fills it: its label and its options' labels in the
    reader's language, as a flow's form shows them (`bpflow.languages.pick`)."""
    options = f.get("options") if isinstance(f.get("options"), list) else []
    values = [str(o.get("value", "")) if isinstance(o, dict) else str(o) for o in options]
    return TryField(name=f["name"], label=pick(f.get("label"), lang) or f["name"],
                    type=str(f.get("type") or "string"), required=bool(f.get("required")),
                    options=values,
                    option_labels=[(pick(o.get("label"), lang) if isinstance(o, dict) else "")
                                   or v for o, v in zip(options, values, strict=True)],
                    default="" if f.get("default") is None else dv.value_text(f["default"]))


def _chain_step(c: ChainStep) -> dict[str, Any]:
    """A quick form's step as `engine.chain` takes it."""
    names = [w.strip() for w in c.who.split(",") if w.strip()]
    if c.kind == "field":
        return {"field": c.who.strip(), "quorum": c.quorum}
    if c.kind == "roles":
        return {"roles": names}
    return {"users": names, "quorum": c.quorum}


def _row(index: int, f: dict[str, Any]) -> FieldRow:
    options = f.get("options") if isinstance(f.get("options"), list) else []
    return FieldRow(
        index=index, name=dv.value_text(f.get("name")), type=str(f.get("type") or "string"),
        label=dv.value_text(f.get("label")), required=bool(f.get("required")),
        options=", ".join(dv.value_text(o) for o in options),
        default=dv.value_text(f.get("default")),
        accept=", ".join(map(str, f.get("accept") or [])))


# why an edit was refused, in words
REFUSALS = {"linear": N_("In a linear template each circle follows the one before it: "
                         "change the kind to dag to draw arrows"),
            "exists": N_("That arrow is already there"),
            "invalid": N_("That cannot be done here"),
            "uri": N_("A circle's name starts with a small letter and holds only small "
                      "letters, digits, _ and -"),
            }
