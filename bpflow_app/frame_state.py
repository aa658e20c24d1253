"""State of the frame around every signed-in page: the outer circle. Every signed-in
page sits inside the user's outer flow, a linear `signin` instance of two circles. `auth`
is the sign-in form (the auth circle's own fields) and its auth action (`SignInState`);
`main` is the signed-in session, inside which the pages show the user's business flows
(`FrameState`: unread mail, the outer flow, the pages' loads). Signing in starts no
business flow: people start those from My flows. `components/frame.py` draws it.

Signing in continues the user's outer flow rather than starting one, and the token lives
in localStorage, so neither a reload nor a second sign-in restarts anything.
"""

from __future__ import annotations

import os
from typing import Any

import reflex as rx

from bpflow import auth
from bpflow.access import Caller
from bpflow.backend import get_store, store_for
from bpflow.errors import RateLimited
from bpflow.forms import FormError, validate
from bpflow.interactions import OUTER_STATUSES, SIGNIN_TEMPLATE, Interactions
from bpflow_app.boxview import FieldView, field_view
from bpflow_app.catalogs import N_
from bpflow_app.session import SessionState
from engine.errors import BpflowError
from engine.model import Field

REGISTRATION_OPEN = os.environ.get("BPFLOW_REGISTRATION", "closed") == "open"
FALLBACK_FORM = (Field("username", "string", N_("Username"), True),
                 Field("password", "password", N_("Password"), True))


def auth_form() -> tuple[Field, ...]:
    """The fields of the outer flow's `auth` circle."""
    try:
        template = get_store().template(SIGNIN_TEMPLATE)[1]
        return template.plan.nodes["auth"].circle.box.form or FALLBACK_FORM
    except (BpflowError, KeyError):
        return FALLBACK_FORM


def auth_fields(state: SessionState, errors: dict[str, str] | None = None
                ) -> list[FieldView]:
    """The sign-in form's fields, labelled in the page's language (the shipped `signin`
    template's labels are in the catalogs)."""
    errors = errors or {}
    out = []
    for f in auth_form():
        view = field_view("auth", f, None, errors.get(f.name),
                          lang=state._language())
        view.label = state.gettext(view.label)
        out.append(view)
    return out


class SignInState(SessionState):
    """The `auth` circle's box: its form and the auth action behind it."""

    fields: list[FieldView] = [field_view("auth", f, None) for f in FALLBACK_FORM]
    error: str = ""
    busy: bool = False

    @rx.event
    def load(self):
        self.fields = auth_fields(self)

    @rx.event
    def choose_here(self, code: str):
        """The sign-in page's language menu: the form relabelled too."""
        self._choose(code)
        self.fields, self.error = auth_fields(self), ""

    @rx.event
    def sign_in(self, form_data: dict[str, Any]):
        self.busy, self.error = True, ""
        yield
        try:
            yield self._sign_in(form_data)
        finally:
            self.busy = False

    def _sign_in(self, form_data: dict[str, Any]):
        form = auth_form()
        try:
            values, secrets = validate(form, form_data)
        except FormError as exc:
            self.fields = auth_fields(self, {
                f.name: self.gettext("%(field)s is required",
                                     field=self.gettext(f.label or f.name))
                for f in form if f.name in exc.errors})
            return None
        username, password = values.get("username") or "", secrets.get("password", "")
        store = get_store()
        try:
            outer = Interactions(store).sign_in(username, password, self._client())
        except RateLimited as exc:
            self.error = self.gettext("Too many failed attempts; try again in %(seconds)s s",
                                      seconds=exc.retry_after)
            return None
        except FormError:  # the auth action's own refusal (the same credentials checked)
            outer = None
        except BpflowError as exc:
            return rx.toast.error(self.gettext("Signing in failed: %(reason)s",
                                               reason=self.explain(exc)))
        # The account as its own tenant has it (signing in names no tenant: the outer flow
        # is the user's tenant's, `Interactions.sign_in`).
        user = store.of(outer.tenant).user(username) if outer is not None else None
        if user is None:
            self.fields = auth_fields(
                self, {"password": self.gettext("Wrong username or password")})
            return None
        self.token, self.outer = auth.issue_token(user), outer.id
        caller = self._visitor()
        if caller is not None:
            self._account_language(caller)
        self.fields = auth_fields(self)
        # The frame comes up for the new session and loads the page (FrameState.catch_up).
        # (the name is the header's, marked as data there: not in a toast, which cannot)
        return rx.toast.success(self.gettext("Signed in"))


class FrameState(SessionState):
    """What the frame around every signed-in page shows: unread mail, the outer flow.

    Its `load` is the last on_load handler of every signed-in page (`page_loads`), so the
    server runs the page's loads right after hydrating, without a round trip through the
    browser, and `ready` turns true once they are done: the page is drawn once, with its
    data. `ready` stays true while the tab moves between pages (no flash of a loading
    screen); each page shows its own loading state meanwhile.

    `loaded_for` names the session the page's data was loaded for: when the session
    changes without a page load (signing in on this page, or in another tab, whose token
    reaches this one), the frame shows the loading screen instead, whose `catch_up` loads
    the page for the new session, so nobody sees data loaded for someone else."""

    unread: int = 0
    main_state: str = "waiting"
    ready: bool = False  # the session is known: the frame or the sign-in form can show
    loaded_for: str = ""  # the session_key the page's data was loaded for

    @rx.event
    def load(self):
        self.ready = True
        if not self.token:
            return None  # nobody signed in: the sign-in form, nothing to explain
        return self._guarded(self._show)

    def _show(self, caller: Caller) -> None:
        self._account_language(caller)
        counts = store_for(caller).mail_counts(caller)
        self.unread = sum(c["unread"] for c in counts.values())
        self.main_state = self._main_state(caller)
        self.loaded_for = self.session_key

    @rx.event
    def catch_up(self):
        """The frame came up for a session the page was not loaded for: load it now (the
        page's loads, this state's last)."""
        if self._visitor() is None or self.loaded_for == self.session_key:
            return None
        return list(loads_for(self.router.route_id))

    def _main_state(self, caller: Caller) -> str:
        """The state of the `main` circle of the caller's own outer flow (in their
        tenant). The one this browser remembers, unless it is not theirs (another
        account, or another tenant's, which is not found): then their latest."""
        store = store_for(caller)
        inst = self._own_outer(store, caller, self.outer) if self.outer else None
        if inst is None:
            inst = self._own_outer(store, caller, store.latest_instance(
                SIGNIN_TEMPLATE, caller.id, OUTER_STATUSES))
        if inst is None:
            return "waiting"
        self.outer = inst.id
        return inst.circles["main"].state if "main" in inst.circles else "waiting"

    @staticmethod
    def _own_outer(store: Any, caller: Caller, outer: str | None) -> Any:
        try:
            inst = store.get(outer) if outer else None
        except BpflowError:
            return None
        return inst if inst is not None and inst.user.get("id") == caller.id else None


# The on_load handlers of each signed-in route: the page's own, then the frame's.
PAGE_LOADS: dict[str, tuple[Any, ...]] = {}


def page_loads(route: str, *loads: Any, then: tuple[Any, ...] = ()) -> list[Any]:
    """Register and return the on_load handlers of a signed-in page (`route` as given to
    `add_page`, dynamic segments in brackets): the page's `loads`, the frame's, and `then`
    what may wait until the page is drawn with its data (a dialog's state put back
    closed: as a dialog's `on_mount` it was an event of its own that the server handled
    before the page's loads, whenever the tab moved to the page)."""
    PAGE_LOADS[route] = (*loads, FrameState.load, *then)
    return list(PAGE_LOADS[route])


def loads_for(route: str) -> tuple[Any, ...]:
    """The on_load handlers of a route as Reflex matched it (`router.route_id`, dynamic
    segments in brackets, the app's frontend path off)."""
    return PAGE_LOADS.get(route, (FrameState.load,))
