"""The boxes of the circles that wait for someone: a form with typed inputs, a
confirmation, or the status of an action that runs elsewhere (an HTTP call, an approval
waiting for its approvers, a timer), with every `${...}` already substituted.

Each box says whom it waits for (a task's candidates or holder, with its due time; an
approval's approvers) and, for the person looking, what they may do about it: fill it in
only if they may drive it (`access.may_drive`; the others see whom it waits for, and no
bookmark), claim or give back a task, or take the work back (its starter).

Every text is made in the reader's language (`Words`, from the catalogs); a step is
named by its circle's description (its uri only where none is written). Plain data (no
Reflex) so it can be tested on its own; `components/boxes.py` renders it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bpflow import access
from bpflow.access import Caller
from bpflow.files import max_file_bytes
from bpflow.interactions import Interactions
from bpflow.languages import DEFAULT, pick
from bpflow.mailbox import Mailbox
from bpflow_app.catalogs import N_, translate
from engine.errors import BpflowError
from engine.instance import SUCCESS, WAITING, Instance, parse_time
from engine.model import Field
from engine.moves import ACTIVE
from engine.phase import Phase, action_extra, approval, box_phase, staged_form
from engine.readiness import READY
from engine.runtime import SCHEDULED
from engine.tasks import sole

HTML_TYPES = {"string": "text", "text": "text", "number": "number", "integer": "number",
              "date": "date", "email": "email", "password": "password"}


class Words:
    """The texts of the views in one language (the same catalogs as the pages')."""

    def __init__(self, lang: str = DEFAULT):
        self.lang = lang

    def gettext(self, message: str, **values: Any) -> str:
        return translate(self.lang, message, **values)

    def ngettext(self, singular: str, plural: str, n: int, **values: Any) -> str:
        return translate(self.lang, singular, plural, n, **values)

    def either(self, names: list[str]) -> str:
        """"a, b or c" in the reader's words."""
        if len(names) <= 1:
            return "".join(names)
        return self.gettext("%(some)s or %(last)s", some=self.gettext(", ").join(names[:-1]),
                            last=names[-1])

    def both(self, names: list[str]) -> str:
        """"a, b and c" in the reader's words."""
        if len(names) <= 1:
            return "".join(names)
        return self.gettext("%(some)s and %(last)s", some=self.gettext(", ").join(names[:-1]),
                            last=names[-1])


ENGLISH = Words()


def step_name(inst: Instance, cid: str, words: Words = ENGLISH) -> str:
    """A step as its people know it: its circle's description, else its uri."""
    node = inst.template.plan.nodes.get(cid)
    text = pick(node.circle.description, words.lang) if node is not None else ""
    return text or cid.rsplit(".", 1)[-1]


@dataclass
class FieldView:
    name: str
    type: str  # the DSL type: string, text, number, ..., select, boolean
    label: str
    required: bool
    input_id: str
    html_type: str = "text"
    step: str = ""
    options: list[str] = field(default_factory=list)  # the values a choice stores
    option_labels: list[str] = field(default_factory=list)  # as the reader sees them
    default: str = ""
    checked: bool = False
    error: str = ""
    # its error was fixed since the form was last sent: the error line keeps its height
    # (empty) until the next sending, so that nothing below it (the Submit button the
    # pointer is going down on as the field is left) moves
    fixed: bool = False
    # a `file` field: where its upload goes ("instance/circle/field"), the extensions it
    # takes (the file picker's `accept`) and its size limit (bytes; in words)
    upload: str = ""
    accept: str = ""
    max_bytes: int = 0
    limit: str = ""


@dataclass
class BoxView:
    cid: str
    title: str  # the step's description (its uri where it has none)
    description: str  # the uri, for the technical view
    kind: str  # "form", "confirm", "status", or "wait" (a person's box, not the viewer's)
    bookmark: str = ""
    fields: list[FieldView] = field(default_factory=list)
    submit_label: str = "Submit"
    confirm_text: str = ""
    tone: str = ""  # status: running, retrying, approval, timer
    status_title: str = ""
    status_lines: list[str] = field(default_factory=list)
    tech_lines: list[str] = field(default_factory=list)  # engine detail: for admins
    at: str = ""  # status: when a timer fires or the next try is (ISO)
    approvers: list[str] = field(default_factory=list)
    quorum: str = ""
    form_error: str = ""
    waits: str = ""  # "Waits for someone in finance", "Held by fred", "Waits for you"
    due: str = ""  # a task's due time (ISO, shown by components/when.py)
    overdue: bool = False
    claim: bool = False  # what the viewer may do: take the task,
    unclaim: bool = False  # give it back to its candidates,
    withdraw: bool = False  # take the work back (the flow's starter, an admin)
    round_lines: list[str] = field(default_factory=list)  # an approval's round: who decided,
    # who is next, what is still needed (`approval_round`)
    sign_mail: int = 0  # the viewer's mail of the round, while they may add signers
    round_mail: int = 0  # a mail of the round, for removing signers
    removable: list[str] = field(default_factory=list)  # whom the viewer may remove
    mail: int = 0  # the viewer's pending approval mail of the step (transfer, delegate)
    returned_note: str = ""  # why this step came back to its people (SPEC §15)
    return_mail: int = 0  # the viewer's open approval mail of it: "Return to…" offered


def iso_text(at: datetime | str | None) -> str:
    """A time for the browser to show in its reader's language and zone
    (`components/when.py`): ISO 8601 with its offset, empty for none."""
    if at is None:
        return ""
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.isoformat()


def clock_text(at: datetime | str | None) -> str:
    """A time as people read it, in UTC."""
    if at is None:
        return ""
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


FIXED = ""  # in a form's errors: the field had an error and it was fixed (`FieldView.fixed`)
PICKER_MAX = 500  # a user field offers at most this many names; past that, typed names


def field_view(cid: str, f: Field, default: Any, error: str | None = None,
               people: list[str] | None = None, lang: str = DEFAULT) -> FieldView:
    """A field as the page shows it to a reader of `lang` (its label and its options'
    labels in their language); `people`: the usernames a `user` field offers."""
    out = FieldView(name=f.name, type=f.type, label=pick(f.label, lang) or f.name,
                    required=f.required,
                    input_id=f"f-{cid}-{f.name}".replace(".", "-"),
                    html_type=HTML_TYPES.get(f.type, "text"), error=error or "",
                    fixed=error == FIXED)
    if f.type in ("number", "integer"):
        out.step = "1" if f.type == "integer" else "any"
    if f.type == "select":
        out.options = [str(o) for o in f.options]
        out.option_labels = [pick(label, lang) or str(o)
                             for o, label in zip(f.options, f.option_labels, strict=False)]
        out.option_labels += out.options[len(out.option_labels):]
    if f.type == "user" and people is not None and len(people) <= PICKER_MAX:
        out.options = out.option_labels = people  # a picker; the server checks the name
    if f.type == "boolean":
        out.checked = default is True
    elif f.type != "password" and default is not None:
        out.default = _text(default)
    return out


def file_view(view: FieldView, f: Field, iid: str, cid: str) -> FieldView:
    """A `file` field's upload: where it goes, what it takes, its size limit."""
    if f.type == "file":
        limit = min(f.max_bytes or max_file_bytes(), max_file_bytes())
        view.upload, view.accept = f"{iid}/{cid}/{f.name}", ",".join(f.accept)
        view.max_bytes, view.limit = limit, size_words(limit)
    return view


def size_words(size: int) -> str:
    """A size as people read it: 812 B, 12 KB, 3.4 MB."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.0f} KB"
    return f"{size / 1_000_000:.1f} MB"


def box_views(interactions: Interactions, inst: Instance, statuses: dict[str, str],
              errors: dict[str, dict[str, str]] | None = None,
              caller: Caller | None = None, words: Words = ENGLISH) -> list[BoxView]:
    """A box for every circle that waits for a person or shows an action's progress, as
    `caller` may see it (None: as someone who may drive every box), in `words`."""
    engine = interactions.store.engine
    nodes = inst.template.plan.nodes
    ready = set(engine.ready(inst))
    errors = errors or {}
    now = engine.clock()
    out = []
    for cid in inst.template.plan.order:
        node, run = nodes[cid], inst.circles[cid]
        if run.state != WAITING or node.children:
            continue
        status = statuses.get(cid)
        if cid in ready:
            if caller is None or access.may_fill(caller, inst, cid) or \
                    box_phase(node.circle.box, run) is not Phase.INPUT:
                box = _ready_box(interactions, inst, cid, errors.get(cid, {}), words)
            else:
                box = _base(inst, cid, "wait", words)  # someone else's to fill in
            if box is not None:
                _people(box, inst, cid, caller, now, words)
                if box.tone == "approval":
                    approval_round(box, interactions.store, inst, cid, caller, words)
                if caller is not None and box.tone == "approval":
                    box.mail = interactions.mailbox.pending_mail(inst.id, cid, run.epoch,
                                                                 caller)
                _returning(box, interactions, inst, cid, caller, words)
        elif status == READY and _timer(inst, cid):
            box = _action_box(interactions, inst, cid, words)  # waits for its time
        elif status == SCHEDULED:
            box = _retry_box(inst, cid, words)
        else:
            continue
        if box is not None:
            out.append(box)
    return out


def who_words(task: dict[str, Any], words: Words) -> str:
    """Whom a task waits for: "bob, carol or someone in finance" (`access.describe` in the
    reader's words)."""
    who = [str(u) for u in task["users"]] + [
        words.gettext("someone in %(role)s", role=r) for r in task["roles"]]
    return words.either(who) if who else words.gettext("nobody")


def delegation(task: dict[str, Any], caller: Caller,
               say: Callable[..., str] = ENGLISH.gettext) -> str:
    """A task's delegation (委派) in a sentence, for its holder or its delegate."""
    delegate = task.get("delegate") or {}
    if not delegate:
        return ""
    if delegate.get("to") == caller.username:
        return say(N_("%(name)s asked you to answer it for them; your answer goes back to"
                      " them"), name=delegate.get("from") or "")
    if delegate.get("answer") is not None:
        return say(N_("%(name)s answered; open it to confirm or answer differently"),
                   name=delegate["to"])
    return say(N_("Waiting for %(name)s's answer"), name=delegate["to"])


def _people(view: BoxView, inst: Instance, cid: str, caller: Caller | None,
            now: datetime, words: Words = ENGLISH) -> None:
    """Whom the ready circle waits for, and what the viewer may do about it."""
    node, run = inst.template.plan.nodes[cid], inst.circles[cid]
    phase, task = box_phase(node.circle.box, run), run.task
    before = any(inst.circles[m].state == SUCCESS for group in node.deps for m in group)
    starter = caller is not None and access.may_withdraw(caller, inst) and before
    if phase is Phase.INPUT and task is not None:
        holder = task["assignee"]
        mine = caller is not None and holder == caller.username
        if mine and sole(task["users"], task["roles"]) == holder:
            view.waits = words.gettext("Waits for you")
        elif mine:
            view.waits = words.gettext("Held by you")
        elif holder:
            view.waits = words.gettext("Held by %(name)s", name=holder)
        else:
            view.waits = words.gettext("Waits for %(who)s", who=who_words(task, words))
        if task.get("delegate") and caller is not None:
            view.waits = words.gettext("%(waits)s · %(delegation)s", waits=view.waits,
                                       delegation=delegation(task, caller, words.gettext))
        due = parse_time(task["due_at"])
        if due is not None:
            view.due, view.overdue = iso_text(due), due <= now
        if caller is not None:
            view.claim = access.may_claim(caller, task, inst.template.name)
            view.unclaim = access.may_unclaim(caller, task) and \
                sole(task["users"], task["roles"]) != holder
            theirs = mine or (holder is None and access.candidate(caller, task,
                                                                  inst.template.name))
            view.withdraw = starter and not theirs
    elif phase is Phase.APPROVAL:
        info = approval(run) or {}
        names = [str(a) for a in info.get("approvers", [])]
        if names:
            who = words.both(names) if info.get("quorum", "all") == "all" else \
                words.either(names)
            view.waits = words.gettext("Waits for %(who)s", who=who)
        view.withdraw = starter


ROUND_SAID = {  # a decision of the round, without and with its comment
    "approved": (N_("%(who)s approved"), N_("%(who)s approved — “%(comment)s”")),
    "rejected": (N_("%(who)s rejected"), N_("%(who)s rejected — “%(comment)s”")),
    "removed": (N_("%(who)s was removed"), N_("%(who)s was removed — “%(comment)s”"))}


def round_lines(info: dict[str, Any], say: Any) -> list[str]:
    """Where an approval's round stands (`Mailbox.round_of`), in sentences said with
    `say` (a `gettext`): each decision in turn, whom it waits for now, who comes later,
    how many approvals are still needed."""
    lines = []
    for d in info["decisions"]:
        said = ROUND_SAID.get(d["decision"])
        if said is not None:
            lines.append(say(said[1], who=d["approver"], comment=d["comment"])
                         if d["comment"] else say(said[0], who=d["approver"]))
    if info["verdict"] is None:
        if info["waiting"]:
            lines.append(say(N_("Now: %(who)s"), who=", ".join(info["waiting"])))
        if info["later"]:
            lines.append(say(N_("Then: %(who)s"), who=", ".join(info["later"])))
        more = info["needed"] - info["approved"]
        if more > 0:
            lines.append(say(N_("Approvals still needed: %(n)s of %(count)s"), n=more,
                             count=info["needed"]))
    return lines


def approval_round(view: BoxView, store: Any, inst: Instance, cid: str,
                   caller: Caller | None, words: Words = ENGLISH) -> None:
    """The approval card's round (SPEC §15): its addressees as they are now, who decided,
    who is next, what is still needed; and what the viewer may change of it (add signers:
    an addressee asked now; remove signers: the flow's starter, an admin)."""
    info = Mailbox(store).round_of(inst.id, cid, inst.circles[cid].epoch)
    if info is None:
        return
    view.approvers = info["approvers"]
    view.quorum = _quorum_text(info["quorum"], info["seats_count"], words)
    view.round_lines = round_lines(info, words.gettext)
    if info["waiting"]:
        view.waits = words.gettext("Waits for %(who)s", who=words.both(info["waiting"]))
    if caller is None or info["verdict"] is not None:
        return
    mine = info["mails"].get(caller.username)
    if mine and caller.username in info["waiting"]:
        view.sign_mail = mine
    decided = {d["approver"] for d in info["decisions"]}
    if access.may_act(caller, inst) and info["mails"]:
        view.round_mail = next(iter(info["mails"].values()))
        view.removable = [n for n in info["approvers"] if n not in decided] \
            if len(info["approvers"]) > 1 else []


def returned_words(inst: Instance, cid: str, words: Words = ENGLISH) -> str:
    """Why a ready step came back to its people (its task's `returned`), in a sentence:
    "ann sent this back from “The manager approves”: “please attach the receipt”"."""
    note = (inst.circles[cid].task or {}).get("returned")
    if not isinstance(note, dict):
        return ""
    who, comment = str(note.get("by") or ""), str(note.get("comment") or "")
    source = step_name(inst, str(note.get("step") or cid), words)
    if note.get("kind") == "withdrawn":
        return words.gettext("%(who)s took this back from “%(step)s”", who=who, step=source)
    if comment:
        return words.gettext("%(who)s sent this back from “%(step)s”: “%(comment)s”",
                             who=who, step=source, comment=comment)
    return words.gettext("%(who)s sent this back from “%(step)s”", who=who, step=source)


def _returning(view: BoxView, interactions: Interactions, inst: Instance, cid: str,
               caller: Caller | None, words: Words) -> None:
    """Why the step came back (for everyone who sees it), and for a pending approver of
    its approval, their mail: the box offers "Return to…"."""
    view.returned_note = returned_words(inst, cid, words)
    run = inst.circles[cid]
    if caller is None or approval(run) is None:
        return
    mine = [m.id for m in interactions.store.attempt_approvals(inst.id, cid, run.epoch)
            if m.recipient_id == caller.id and m.decision is None]
    view.return_mail = mine[0] if mine else 0


def _timer(inst: Instance, cid: str) -> bool:
    """A ready timer circle of a running instance: it waits for the clock (so the engine
    does not count it as ready for a person), and the page says when it fires."""
    return (inst.status in ACTIVE and inst.circles[cid].due_at is not None
            and inst.template.plan.nodes[cid].circle.box.action_type == "timer")


def _base(inst: Instance, cid: str, kind: str, words: Words = ENGLISH) -> BoxView:
    return BoxView(cid=cid, title=step_name(inst, cid, words), description=cid, kind=kind)


def _ready_box(interactions: Interactions, inst: Instance, cid: str,
               errors: dict[str, str], words: Words = ENGLISH) -> BoxView | None:
    engine = interactions.store.engine
    run, box = inst.circles[cid], inst.template.plan.nodes[cid].circle.box
    if box.confirm is not None:
        view = _base(inst, cid, "confirm", words)
        view.bookmark = engine.bookmark(inst, cid)
        view.confirm_text = _render(engine, inst, cid, pick(box.confirm, words.lang))
        return view
    if box.form and staged_form(run) is None:
        view = _base(inst, cid, "form", words)
        view.bookmark = engine.bookmark(inst, cid)
        answer = ((run.task or {}).get("delegate") or {}).get("answer")
        defaults = {**interactions.defaults(inst, cid),  # a delegate's answer, to confirm
                    **(answer if isinstance(answer, dict) else {})}
        view.fields = [file_view(field_view(cid, f, defaults.get(f.name), errors.get(f.name),
                                            interactions.store.usernames(f.role)
                                            if f.type == "user" else None, words.lang),
                                 f, inst.id, cid) for f in box.form]
        view.form_error = errors.get("_form", "")
        view.submit_label = words.gettext("Sign in") if box.action_type == "auth" else \
            words.gettext("Submit")
        return view
    if box.action is not None:
        return _action_box(interactions, inst, cid, words)
    return None


def _render(engine, inst: Instance, cid: str, value: Any, extra: dict | None = None) -> Any:
    try:
        return engine.render(inst, cid, value, extra)
    except BpflowError:
        return value  # shown as written when a value is missing


def _action_box(interactions: Interactions, inst: Instance, cid: str,
                words: Words = ENGLISH) -> BoxView:
    run = inst.circles[cid]
    action = inst.template.plan.nodes[cid].circle.box.action or {}
    shown = _render(interactions.store.engine, inst, cid, action, action_extra(run))
    view = _base(inst, cid, "status", words)
    kind = action.get("type")
    info = approval(run)
    gettext = words.gettext
    if info is not None:
        view.tone, view.status_title = "approval", gettext("Waiting for approval")
        view.approvers = [str(a) for a in info.get("approvers", [])]
        view.quorum = _quorum_text(info.get("quorum", "all"), len(view.approvers), words)
        if shown.get("subject"):
            view.status_lines = [gettext("Subject: %(subject)s",
                                         subject=_text(shown.get("subject")))]
    elif kind == "http":
        view.tone, view.status_title = "running", gettext("Working on it")
        view.tech_lines = [f"{str(shown.get('method', 'GET')).upper()} "
                           f"{_text(shown.get('url'))}"]
        if run.attempts:
            view.status_lines.append(words.ngettext(
                "Tried %(n)s time; it is tried again.", "Tried %(n)s times; it is tried again.",
                run.attempts))
            view.tech_lines.append(gettext("Attempt %(count)s; last failure: %(reason)s",
                                           count=run.attempts + 1, reason=run.reason or ""))
    elif kind == "timer":
        view.tone, view.status_title = "timer", gettext("Waiting for its time")
        view.at = iso_text(run.due_at)
    else:
        view.tone, view.status_title = "running", gettext("Working on it")
        view.tech_lines = [gettext("%(kind)s action running", kind=str(kind))]
    return view


def _retry_box(inst: Instance, cid: str, words: Words = ENGLISH) -> BoxView:
    run, circle = inst.circles[cid], inst.template.plan.nodes[cid].circle
    view = _base(inst, cid, "status", words)
    gettext = words.gettext
    view.tone, view.status_title = "retrying", gettext("Failed, will retry")
    view.at = iso_text(run.next_attempt_at)
    view.status_lines = [gettext("Try %(count)s of %(most)s.", count=run.attempts + 1,
                                 most=len(circle.retry) + 1)]
    view.tech_lines = [gettext("Reason: %(reason)s", reason=run.reason or "")]
    return view


def _quorum_text(quorum: Any, approvers: int, words: Words = ENGLISH) -> str:
    if quorum == "all":
        return words.gettext("all %(count)s must approve", count=approvers) if approvers > 1 else \
            words.gettext("must approve")
    if quorum == "any":
        return words.gettext("any one approval is enough")
    if quorum == "sequence":
        return words.gettext("each in turn, in this order")
    if isinstance(quorum, dict):
        return words.gettext("a vote: %(percent)s%% of %(count)s must approve",
                             percent=round(float(quorum.get("ratio", 1)) * 100),
                             count=approvers)
    return words.gettext("%(quorum)s of %(count)s approvals needed", quorum=quorum,
                         count=approvers)
