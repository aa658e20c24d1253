"""State of the flow page: one instance, its drawing, the boxes of its open circles (each
saying whom it waits for; a form only for who may fill it in), the people's moves (claim,
unclaim, withdraw) and the starter's controls (abort, suspend, resume), the intervention
(reset) with its preview, and the history.

Whoever the flow asked (`access.sight` FOLLOW) may open it read-only and act on the boxes
that wait for them; its starter and admins (ACT) also control it. Every move is checked
again inside its step, on the instance as it is then.

The page follows the instance without a reload: after each action it re-reads it at
once, and a background event (`follow`) waits for the store's changes of the instance
(`bpflow.store.changes`: pushed when a step commits, in this process or, on PostgreSQL, any
other) and re-reads it when its event counter moved (another person approved, the worker
finished an HTTP call). Nothing reads the database on a timer.

Its texts (the boxes', the history's, the toasts) are made here in the reader's language
(`boxview.Words`); when the language changes, the page asks for them again (`relabel`).
Engine detail (uris, attempts, raw results, the circles' table, resetting) is for admins,
in the technical view (`intervention`).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import reflex as rx

from bpflow import access, files, moves
from bpflow.access import Caller, Sight
from bpflow.backend import store_for
from bpflow.errors import Unauthorized
from bpflow.forms import FormError, validate
from bpflow.interactions import Interactions
from bpflow.moves import nudging
from bpflow.store.public import instance_key
from bpflow_app import flowview as fv
from bpflow_app.boxview import FIXED, BoxView, Words, box_views, step_name
from bpflow_app.catalogs import N_, say
from bpflow_app.drawing import Canvas, Edge, Frame, Junction, Node
from bpflow_app.session import SessionState, expired
from engine.errors import BookmarkError, BpflowError
from engine.instance import Instance
from engine.moves import INSTANCE_MOVES

ALIVE_S = 5.0  # how often a follow checks that its page is still shown (no query)
FOLLOW_S = 3600.0  # how long a page visit is followed, in case the tab was just left open
CONTROLS = (*INSTANCE_MOVES, "withdraw")  # each after a confirmation
MAX_REASON = 500


def work_step(caller: Caller, iid: str, what: str, cid: str = "",
              reason: str = "") -> tuple[Instance, list[str]]:
    """One person's move on a flow, by the same rules as the REST API (`bpflow.moves`):
    claim or unclaim circle `cid`'s task, withdraw the work waiting at `cid`, or abort,
    suspend or resume the flow. Who may is decided inside the step on the instance as it
    is then. Returns the instance as the step left it and the circles a withdrawal sent
    the work back to."""
    store = store_for(caller)
    if what == "claim":
        return moves.claim(store, caller, iid, cid), []
    if what == "unclaim":
        return moves.unclaim(store, caller, iid, cid), []
    if what == "withdraw":
        inst = moves.withdraw(store, caller, iid, cid, reason or None)
        return inst, [m for group in inst.template.plan.nodes[cid].deps for m in group]
    return moves.control(store, caller, iid, what, reason or None), []


# bpflow.forms' problems with a field, as whole sentences in the reader's language (the
# others are shown as the service words them)
PROBLEMS = {"must be a number": N_("%(field)s must be a number"),
            "must be a whole number": N_("%(field)s must be a whole number"),
            "must be yes or no": N_("%(field)s must be yes or no"),
            "must be text": N_("%(field)s must be text"),
            "must be an email address like name@example.com":
                N_("%(field)s must be an email address like name@example.com"),
            "must be a date like 2026-01-31": N_("%(field)s must be a date like 2026-01-31")}


def field_errors(words: Words, inst: Instance, cid: str, errors: dict[str, str],
                 data: dict[str, Any]) -> dict[str, str]:
    """A FormError's messages (`errors`, for the `data` sent) in the reader's words."""
    box = inst.template.plan.nodes[cid].circle.box
    out = dict(errors)
    for f in box.form:
        message = errors.get(f.name)
        if message is None:
            continue
        label = f.label or f.name
        label = label if isinstance(label, str) else f.name
        problem = message[len(label):].strip() if message.startswith(label) else ""
        value = data.get(f.name)
        if problem == "is required" or (f.required and (value is None or str(value).strip()
                                                        == "")):
            out[f.name] = words.gettext("%(field)s is required", field=label)
        elif problem in PROBLEMS:
            out[f.name] = words.gettext(PROBLEMS[problem], field=label)
    if "_form" in out:
        out["_form"] = words.gettext("The form could not be read; send it again.")
    return out


def route_id(path: str) -> str:
    """The instance id of a `/flow/<id>` path (behind any frontend path)."""
    parts = [p for p in path.split("/") if p]
    return parts[-1] if len(parts) >= 2 and parts[-2] == "flow" else ""


class FlowState(SessionState):
    iid: str = ""
    head: fv.Header = fv.Header()
    # The drawing, kept in parts so that a step re-sends only the parts that changed.
    nodes: list[Node] = []
    frames: list[Frame] = []
    edges: list[Edge] = []
    junctions: list[Junction] = []
    canvas: Canvas = Canvas()
    boxes: list[BoxView] = []
    chosen: fv.CircleInfo = fv.CircleInfo()  # the selected circle, for its details panel
    circle_rows: list[fv.CircleInfo] = []  # the Circles tab, filled while it is open
    history: list[fv.HistoryRow] = []
    comments: list[fv.CommentRow] = []  # the thread (SPEC §15), oldest first
    files: list[fv.FileRow] = []  # the files its forms hold
    commenting: bool = False
    missing: bool = False
    can_act: bool = False  # the flow's user or an admin (the people it asked only look)
    loading: bool = True
    busy: str = ""  # the circle whose box is being sent
    selected: str = ""
    intervention: bool = False
    levels: int = 1
    preview: list[str] = []
    preview_scope: str = ""
    resetting: bool = False
    tab: str = "flow"
    words_of: str = ""  # the language the texts of the boxes and history were made in
    ask: str = ""  # the control waiting for its confirmation: abort, suspend, resume, withdraw
    ask_circle: str = ""  # the circle a withdrawal takes back
    ask_step: str = ""  # its step's name
    ask_error: str = ""
    asking: bool = False  # the confirmed control runs
    _seq: int = -1
    _opened: set[str] = set()
    _closed: set[str] = set()
    _errors: dict[str, dict[str, str]] = {}
    _following: str = ""  # the flow a follow waits on (a follow of another one then stops)
    _circles: list[fv.CircleInfo] = []
    _sent: dict[str, Any] = {}  # the form data last sent (to word its errors)
    # copies and urges (SPEC §15: `fv.nudge_fields`)
    copies: list[fv.CopyView] = []
    can_urge: bool = False  # the starter or an admin, while a step waits for people
    urge_at: str = ""  # ISO: when they may urge again ("" now)
    can_copy: bool = False  # the starter, an assignee or an admin
    copy_open: bool = False  # the CC dialog
    copy_error: str = ""
    urging: bool = False  # an urge is under way

    @rx.var
    def preview_open(self) -> bool:
        return bool(self.preview_scope)

    @rx.var
    def ask_open(self) -> bool:
        return bool(self.ask)

    # ----------------------------------------------------------------- loading
    def _instance(self, act: bool = False) -> Instance | None:
        """The instance if the caller may see it (others get 'not found'); with `act`,
        only if they may also fill its boxes and intervene."""
        caller = self._caller()
        store = store_for(caller)  # another tenant's flow is not found
        try:
            inst = store.get(self.iid)
        except BpflowError:
            return None
        sight = access.sight(caller, inst,
                             lambda: not act and store.mail_about(caller.id, inst.id))
        self.can_act = sight is Sight.ACT
        return None if sight is Sight.NONE else inst

    def _show(self, inst: Instance) -> None:
        caller = self._caller()
        store = store_for(caller)
        states = fv.visual_states(store.engine, inst)
        expanded = (fv.default_expanded(inst) | self._opened) - self._closed
        words = self._words()
        technical = self._technical()
        d = fv.drawing(inst, states, expanded, technical and (
            self.intervention or bool(self.preview_scope)), words)
        self._circles = fv.circle_infos(inst, states, words)
        self._update(head=fv.header(inst, words), nodes=d.nodes, frames=d.frames, edges=d.edges,
                     junctions=d.junctions, canvas=Canvas(d.width, d.height, d.min_width),
                     boxes=box_views(Interactions(store), inst, store.engine.statuses(inst),
                                     self._errors, caller, words),
                     chosen=self._find(self.selected), words_of=words.lang)
        self._update(**fv.nudge_fields(store, caller, inst, words))
        self._seq = inst.seq
        if self.tab == "circles" and technical:
            self._update(circle_rows=self._circles)
        if self.tab == "history":
            self.history = fv.history_rows(store.history(inst.id), inst, words)
        self._talk(store, caller, inst, words)

    def _talk(self, store, caller: Caller, inst: Instance, words: Words) -> None:
        """The comment thread and the files (two small reads)."""
        self._update(comments=fv.comment_rows(moves.comments(store, caller, inst.id), inst,
                                              words),
                     files=fv.file_rows(files.listing(store, caller, inst.id), inst, words))

    @rx.event
    def send_comment(self, form_data: dict[str, Any]):
        """Add a comment to the thread (about the selected step when asked so)."""
        uri = self.selected if form_data.get("about_step") and self.selected else None
        self.commenting = True
        yield
        try:
            caller = self._caller()
            moves.comment(store_for(caller), caller, self.iid, form_data.get("text"), uri)
            self._reload()
            yield rx.toast.success(self.gettext("Comment added"))
        except Unauthorized as exc:
            yield expired(self, exc)
        except (BpflowError, ValueError) as exc:
            yield rx.toast.error(self.explain(exc))
        finally:
            self.commenting = False

    def _words(self) -> Words:
        return Words(self._language())

    def _technical(self) -> bool:
        """Whether the caller may open the technical view (admins, `bpflow.access`)."""
        return access.is_admin(self._caller())

    def _update(self, **values: Any) -> None:
        """Set the vars whose value changed (only those go to the browser)."""
        for name, value in values.items():
            if getattr(self, name) != value:
                setattr(self, name, value)

    def _find(self, cid: str) -> fv.CircleInfo:
        return next((c for c in self._circles if c.id == cid), fv.CircleInfo())

    def _reload(self) -> bool:
        inst = self._instance()
        self.missing, self.loading = inst is None, False
        if inst is not None:
            self._show(inst)
        return inst is not None

    @rx.event
    def relabel(self):
        """The page's language changed: its texts again, in the new one."""
        if self.iid and self.words_of and self.words_of != self._language():
            try:
                self._reload()
            except Unauthorized as exc:
                return expired(self, exc)
        return None

    @rx.event
    def load(self):
        if self._visitor() is None:
            return None
        iid = route_id(self.router.url.path)
        if iid != self.iid:
            self.iid, self.selected, self.tab, self.history = iid, "", "flow", []
            self._opened, self._closed, self._errors = set(), set(), {}
            self.preview, self.preview_scope, self.intervention = [], "", False
            self._circles, self.circle_rows, self.boxes = [], [], []
            self.chosen, self.loading = fv.CircleInfo(), True
            self.ask, self.ask_circle, self.ask_error = "", "", ""
        try:
            inst = self._instance()
            if inst is not None and self.can_act:  # decided approvals count now
                inst = Interactions(store_for(self._caller())).reenter(self.iid, inst)
            self.missing, self.loading, found = inst is None, False, inst is not None
            if inst is not None:
                self._show(inst)
        except Unauthorized as exc:
            return expired(self, exc)
        return FlowState.follow if found else None

    def _shown(self, iid: str) -> bool:
        """Whether the page still shows flow `iid` for this follow."""
        return (self._following == iid and self.iid == iid
                and route_id(self.router.url.path) == iid)

    def _catch_up(self, iid: str) -> None:
        """Re-read the flow if its event counter moved (one small query)."""
        stamp = store_for(self._caller()).instance_stamp(iid)
        if stamp is not None and stamp[0] != self._seq:
            self._reload()

    @rx.event(background=True)
    async def follow(self):
        """Re-read the flow when a step of it commits, wherever it was made; stop when
        the page shows something else (checked every ALIVE_S seconds without a query)
        or after FOLLOW_S seconds."""
        async with self:
            if self._following == self.iid:
                return  # this flow is followed already
            self._following = iid = self.iid
        loop = asyncio.get_running_loop()
        try:
            async with self:
                hub = store_for(self._caller()).changes
            with hub.subscribe([instance_key(iid)]) as changes:
                await hub.heard()
                async with self:  # what committed before the subscription
                    self._catch_up(iid)
                end = loop.time() + FOLLOW_S
                while loop.time() < end:
                    news = await changes.next(ALIVE_S)
                    async with self:
                        if not self._shown(iid):
                            break
                        if any(c.seq is None for c in news):  # anything may have changed
                            self._catch_up(iid)
                        elif any(c.seq != self._seq for c in news):
                            self._reload()
        except Unauthorized:
            pass
        finally:
            async with self:
                if self._following == iid:
                    self._following = ""

    # ------------------------------------------------------------- the boxes
    @rx.event
    def submit(self, form_data: dict[str, Any]):
        cid = str(form_data.pop("__circle", ""))
        mark = str(form_data.pop("__bookmark", ""))
        self._sent = dict(form_data)
        return self._busy(cid, self._sending(cid, mark, form_data), N_("Sent: %(step)s"))

    @rx.event
    def accept(self, cid: str, mark: str):
        return self._busy(cid, self._sending(cid, mark, {"accept": True}),
                          N_("Accepted: %(step)s"))

    @rx.event
    def decline(self, form_data: dict[str, Any]):
        cid, mark = str(form_data.get("__circle", "")), str(form_data.get("__bookmark", ""))
        reason = str(form_data.get("reason") or "")
        return self._busy(cid, self._sending(cid, mark, {"accept": False, "reason": reason}),
                          N_("Declined: %(step)s"))

    @rx.event
    def check_field(self, cid: str, name: str, value: Any):
        """A field with an error was changed: its error goes as soon as its value is
        right (checked as the form's sending will check it), or says what is wrong now."""
        shown = self._errors.get(cid)
        if not shown or name not in shown:
            return
        inst = self._instance()
        node = inst.template.plan.nodes.get(cid) if inst is not None else None
        found = [f for f in node.circle.box.form if f.name == name] if node else []
        if inst is None or not found:
            return
        interactions = Interactions(store_for(self._caller()))
        try:
            validate((found[0],), {name: value}, interactions.defaults(inst, cid),
                     interactions.accounts)
            shown[name] = FIXED
        except FormError as exc:
            shown.update(field_errors(self._words(), inst, cid, exc.errors, {name: value}))
        self._errors[cid] = shown
        self._show(inst)

    def _sending(self, cid: str, mark: str, data: dict[str, Any]):
        """The step of sending circle `cid`'s box with `data`, for `_act`."""
        iid = self.iid
        return lambda caller: moves.submit(store_for(caller), caller, iid, cid, mark, data)

    def _busy(self, cid: str, step, done: str):
        """Show the box as busy (sent to the browser first), then run the step."""
        self.busy = cid
        yield
        try:
            yield self._act(cid, step, done)
        finally:
            self.busy = ""

    def _act(self, cid: str, step, done: str):
        """Run one step of a box for the signed-in caller (who may fill it in is checked
        inside the step), then show the instance it left (re-read only after a refusal)."""
        try:
            inst = step(self._caller())
            self._errors.pop(cid, None)
            self._show(inst)  # the step's instance: no second read
            return rx.toast.success(self.gettext(
                done, step=step_name(inst, cid, self._words())))
        except Unauthorized as exc:
            return expired(self, exc)
        except FormError as exc:
            inst = self._instance()
            self._errors[cid] = exc.errors if inst is None else field_errors(
                self._words(), inst, cid, exc.errors, self._sent)
            result = rx.toast.error(self.gettext("Please correct the highlighted fields"))
        except BookmarkError:
            result = rx.toast.warning(self.gettext(
                "This step changed meanwhile; here is how it is now."))
        except BpflowError as exc:
            result = rx.toast.error(self.explain(exc))
        self._reload()
        return result

    # ------------------------------------------------ people's moves and controls
    @rx.event
    def claim(self, cid: str):
        return self._move("claim", cid, N_("“%(step)s” is yours now"))

    @rx.event
    def unclaim(self, cid: str):
        return self._move("unclaim", cid, N_("“%(step)s” went back to its candidates"))

    def _move(self, what: str, cid: str, done: str, reason: str = ""):
        """Make one move for the signed-in caller; the new state, and a toast of the
        outcome (or of why not)."""
        try:
            inst, back = work_step(self._caller(), self.iid, what, cid, reason)
        except Unauthorized as exc:
            return expired(self, exc)
        except (BpflowError, ValueError) as exc:
            self._reload()
            return rx.toast.error(self.explain(exc))
        self._show(inst)
        words = self._words()
        text = self.gettext(done, step=step_name(inst, cid, words) if cid else "")
        if back:
            text = self.gettext("%(done)s; it went back to %(steps)s", done=text,
                                steps=words.both([step_name(inst, b, words) for b in back]))
        return rx.toast.success(text)

    @rx.event
    def ask_control(self, what: str, cid: str = ""):
        """Open the confirmation of a control (abort, suspend, resume, withdraw)."""
        if what in CONTROLS and self.can_act:
            self.ask, self.ask_circle, self.ask_error = what, cid, ""
            self.ask_step = next((b.title for b in self.boxes if b.cid == cid), cid)

    @rx.event
    def cancel_control(self):
        self.ask, self.ask_circle, self.ask_error = "", "", ""

    @rx.event
    def confirm_control(self, form_data: dict[str, Any]):
        what, cid = self.ask, self.ask_circle
        reason = str(form_data.get("reason") or "").strip()
        if what not in CONTROLS:
            return None
        if what == "abort" and not reason:
            self.ask_error = self.gettext("Say why the flow is aborted")
            return None
        if len(reason) > MAX_REASON:
            self.ask_error = self.gettext(
                "A reason has at most %(most)s characters (this one has %(count)s)",
                most=MAX_REASON, count=len(reason))
            return None
        return self._control(what, cid, reason)

    def _control(self, what: str, cid: str, reason: str):
        self.asking = True
        yield
        done = {"abort": N_("Flow aborted"), "suspend": N_("Flow suspended"),
                "resume": N_("Flow resumed"), "withdraw": N_("Took back “%(step)s”")}[what]
        try:
            toast = self._move(what, cid, done, reason)
        finally:
            self.ask, self.ask_circle, self.ask_error, self.asking = "", "", "", False
        yield toast

    # ------------------------------------------------------- copies and urges
    @rx.event
    def urge(self):
        """Urge whoever the flow's open steps wait for (at most once an hour a step)."""
        self.urging = True
        yield
        try:
            caller = self._caller()
            sent = nudging.urge(store_for(caller), caller, self.iid)["circles"]
            names = list(dict.fromkeys(n for who in sent.values() for n in who))
            toast = rx.toast.success(self.gettext("Urged %(whom)s", whom=self._words().both(
                names)))
            self._reload()
        except Unauthorized as exc:
            toast = expired(self, exc)
        except BpflowError as exc:
            toast = rx.toast.error(self.explain(exc))
            self._reload()
        finally:
            self.urging = False
        yield toast

    @rx.event
    def ask_copy(self):
        if self.can_copy:
            self.copy_open, self.copy_error = True, ""

    @rx.event
    def cancel_copy(self):
        self.copy_open, self.copy_error = False, ""

    @rx.event
    def send_copy(self, form_data: dict[str, Any]):
        """Copy the people named (usernames, separated by commas or spaces)."""
        users = [u for u in re.split(r"[,，\s]+", str(form_data.get("users") or "")) if u]
        comment = str(form_data.get("comment") or "").strip()
        if not users:
            self.copy_error = self.gettext("Name at least one person to copy")
            return None
        try:
            caller = self._caller()
            sent = nudging.copy(store_for(caller), caller, self.iid, users, comment or None)
        except Unauthorized as exc:
            return expired(self, exc)
        except FormError as exc:
            self.copy_error = "; ".join(say(self._language(), m) for m in exc.errors.values())
            return None
        except BpflowError as exc:
            self.copy_error = self.explain(exc)
            return None
        self.copy_open, self.copy_error = False, ""
        self._reload()
        if not sent:
            return rx.toast.info(self.gettext("They had a copy already"))
        return rx.toast.success(self.gettext("Copied to %(whom)s",
                                             whom=self._words().both(sent)))

    # ------------------------------------------------------- drawing and panels
    @rx.event
    def select(self, cid: str):
        self.selected = "" if cid == self.selected else cid
        self.chosen = self._find(self.selected)

    @rx.event
    def toggle(self, cid: str):
        """Open or close a nested flow in the drawing."""
        expanded = cid in self._opened or (cid not in self._closed and any(
            f.id == cid for f in self.frames))
        if expanded:
            self._closed.add(cid)
            self._opened.discard(cid)
        else:
            self._opened.add(cid)
            self._closed.discard(cid)
        self._reload()

    @rx.event
    def set_intervention(self, on: bool):
        """The technical view, for admins."""
        self.intervention = on and self._technical()
        if not self.intervention and self.tab == "circles":
            self.tab = "flow"
        self._reload()

    @rx.event
    def set_levels(self, value: str):
        try:
            self.levels = max(0, min(99, int(value)))
        except ValueError:
            self.levels = 1

    @rx.event
    def set_tab(self, tab: str):
        self.tab = tab if tab != "circles" or self.intervention else "flow"
        if self.tab not in ("circles", "history"):
            return None
        try:
            self._reload()  # fills the tab, for those who may see the flow only
        except Unauthorized as exc:
            return expired(self, exc)
        return None

    # ------------------------------------------------------------ intervention
    @rx.event
    def ask_reset(self, scope: str):
        inst = self._instance(act=True)
        if inst is None or not self.selected or not self._technical():
            return None
        try:
            self.preview = store_for(self._caller()).engine.reset_preview(
                inst, self.selected, scope, self.levels if scope == "levels" else None)
        except (BpflowError, ValueError) as exc:
            return rx.toast.error(self.explain(exc))
        self.preview_scope = scope
        self._show(inst)
        return None

    @rx.event
    def cancel_reset(self):
        self.preview, self.preview_scope = [], ""
        self._reload()

    @rx.event
    def confirm_reset(self):
        scope, cid = self.preview_scope, self.selected
        self.resetting = True
        yield
        inst = None
        try:
            caller = self._caller()
            inst = moves.reset(store_for(caller), caller, self.iid, cid, scope,
                               self.levels if scope == "levels" else None)
            toast = rx.toast.success(self.ngettext(
                "%(n)s step from “%(step)s” goes back to waiting",
                "%(n)s steps from “%(step)s” go back to waiting", len(self.preview),
                step=step_name(inst, cid, self._words())))
        except Unauthorized as exc:
            toast = expired(self, exc)
        except BpflowError as exc:
            toast = rx.toast.error(self.explain(exc))
        self.preview, self.preview_scope, self.resetting = [], "", False
        if inst is None:
            self._reload()
        else:
            self._show(inst)
        yield toast
