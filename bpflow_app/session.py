"""The session, like reflex-local-auth: a signed token in the browser's localStorage (so
a reload or a new tab keeps it), the user computed from it, and a guard for handlers.

The token is the same JWT the REST API issues (`bpflow.auth`); nothing about the user
is trusted from the browser except that signature, and even a signed token only names an
account: the caller's roles, and whether the account is still enabled, come from the
users table (the store's short cache of accounts), as for the REST API. Handlers get
the signed-in person as a `bpflow.access.Caller` and ask `bpflow.access` what they may
do. Every page state derives from `SessionState`, which holds nothing else (but the
language of `LangState`, which it derives from), so loading it costs nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import reflex as rx

from bpflow import languages
from bpflow.access import DEFAULT_TENANT, Caller, may_design, require_admin
from bpflow.auth import PasswordChanged, current, verify_token
from bpflow.backend import get_store, store_for
from bpflow.errors import Forbidden, Unauthorized
from bpflow_app.i18n import LangState


class NotAdmin(Unauthorized):
    """Signed in, but not an administrator."""


def session_caller(token: str) -> Caller:
    """The caller a session's token stands for now: a valid token of an enabled account,
    with the roles the users table gives; Unauthorized otherwise."""
    caller = verify_token(token)
    return current(caller, get_store().account(caller.id))


def token_caller(token: str) -> Caller | None:
    try:
        return session_caller(token)
    except Unauthorized:
        return None


class SessionState(LangState):
    """The signed-in user of this browser (shared by its tabs)."""

    token: str = rx.LocalStorage("", name="bpflow_token", sync=True)
    # The user's outer flow (`signin`: auth → main, the session), continued at every
    # sign-in.
    outer: str = rx.LocalStorage("", name="bpflow_outer", sync=True)

    @rx.var
    def username(self) -> str:
        caller = token_caller(self.token)
        return caller.username if caller else ""

    @rx.var
    def signed_in(self) -> bool:
        return token_caller(self.token) is not None

    @rx.var
    def session_key(self) -> str:
        """Names this sign-in (a digest of its token, which every sign-in renews): the
        frame shows a page only once its data was loaded for this very session."""
        return hashlib.sha256(self.token.encode()).hexdigest()[:16] if self.token else ""

    @rx.var
    def organisation(self) -> str:
        """The signed-in user's tenant, for the header; empty for `default` (a single
        organisation never sees the concept, SPEC §12)."""
        caller = token_caller(self.token)
        return caller.tenant if caller and caller.tenant != DEFAULT_TENANT else ""

    @rx.var
    def is_admin(self) -> bool:
        caller = token_caller(self.token)
        return bool(caller and caller.is_admin)

    @rx.var
    def can_design(self) -> bool:
        """Whether the designer is offered (admins and designers, SPEC §16)."""
        caller = token_caller(self.token)
        return bool(caller and may_design(caller))

    def _caller(self) -> Caller:
        """The signed-in caller of a handler, checked now (the token may have expired, or
        the account been disabled, since the computed vars last looked); Unauthorized
        otherwise."""
        return session_caller(self.token)

    def _visitor(self) -> Caller | None:
        """The caller a page is loaded for, or None when nobody is signed in (or the token
        no longer holds): the outer circle then shows the sign-in form, and the frame's
        own load says why, so a page's load just has nothing to show."""
        return token_caller(self.token)

    def _client(self) -> str | None:
        """The browser's address, which the sign-in limit counts failures for (with the
        account): Reflex's view of the websocket peer."""
        return self.router.session.client_ip or None

    def _admin(self) -> Caller:
        caller = self._caller()
        try:
            require_admin(caller)
        except Forbidden:
            raise NotAdmin("administrators only") from None
        return caller

    def _guarded(self, step: Callable[[Caller], Any], admin: bool = False) -> Any:
        """`step(caller)` for the signed-in caller (an administrator with `admin`); if the
        session no longer holds, what the handler returns instead (`expired`)."""
        try:
            caller = self._admin() if admin else self._caller()
        except Unauthorized as exc:
            return expired(self, exc)
        return step(caller)

    @rx.event
    def sign_out(self):
        self.token = ""
        self.outer = ""
        return [rx.redirect("/"), rx.toast.info(self.gettext("Signed out"))]

    @rx.event
    def choose_language(self, code: str):
        """The language menu: this browser's pages, and the account's when someone is
        signed in (kept for every browser they sign in from)."""
        self._choose(code)
        caller = self._visitor()
        if caller is not None:
            store_for(caller).set_language(caller.id, self.choice)

    def _account_language(self, caller: Caller) -> None:
        """At sign-in and on every page: the account's language, when it has one, is this
        browser's; a language chosen here before signing in becomes the account's."""
        store = store_for(caller)
        user = store.user(caller.username)
        kept = languages.known(user.get("language")) if user else None
        if kept is not None:
            self.choice = kept
        elif languages.known(self.choice) is not None:
            store.set_language(caller.id, languages.known(self.choice))


def expired(state: SessionState, exc: Exception):
    """What a handler returns when its guard failed: back to the sign-in form."""
    if isinstance(exc, NotAdmin):
        return rx.toast.error(state.gettext("Only administrators may do that"))
    state.token = ""
    if isinstance(exc, PasswordChanged):
        return rx.toast.warning(state.gettext(
            "Your password was changed, which ended this session; please sign in again"))
    return rx.toast.warning(state.gettext("Your session has ended; please sign in again"))
