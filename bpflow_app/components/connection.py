"""What a page shows while it cannot reach the server, in the reader's language (Reflex's
own overlay says it in English): a pulsing "offline" icon with its explanation, and a
notice after two failed attempts that goes away once the page is connected again."""

from __future__ import annotations

import reflex as rx
from reflex.vars.base import VarData
from reflex_base.components.memo import memo
from reflex_base.constants import Hooks
from reflex_components_core.core.banner import (
    WifiOffPulse,
    connect_errors,
    has_connection_errors,
    has_too_many_connection_errors,
)
from reflex_components_sonner.toast import toast_ref

from bpflow_app.i18n import _

TOAST = "websocket-error"


class _Notice(rx.Fragment):
    def add_hooks(self) -> list[str | rx.Var]:
        text = _("Cannot reach the server. Trying again…")
        js = (f"useEffect(() => {{ const toast = {toast_ref!s};"
              f" if ({has_too_many_connection_errors!s})"
              f" toast?.error({text!s}, {{id: '{TOAST}', closeButton: true,"
              " duration: 120000});"
              f" else toast?.dismiss('{TOAST}'); }}, [{connect_errors!s}, {text!s}])")
        return [Hooks.CONNECT_ERRORS, rx.Var(js, _var_data=VarData.merge(
            text._get_all_var_data(), toast_ref._get_all_var_data(),
            connect_errors._get_all_var_data(),
            VarData(imports={"react": ["useEffect"]})))]


def _overlay() -> rx.Component:
    return rx.fragment(
        rx.cond(has_connection_errors,
                rx.el.div(WifiOffPulse.create(aria_hidden="true"), role="status",
                          title=_("Cannot reach the server. Trying again…"),
                          position="fixed", width="100vw", height="0")),
        _Notice.create(),
    )


def connection_overlay() -> rx.Component:
    """The overlay of every page (an app wrap, as Reflex's own: a component of its own, so
    that it is drawn inside the providers of the connection and the state)."""
    return rx.fragment(memo(_overlay)())
