"""What a migration asks, as the templates and operations pages take it: the version to
migrate from and the one to migrate to, and the map of renamed circles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reflex as rx

from bpflow_app.i18n import _


def migration_request(versions: rx.Var[list[str]], source: rx.Var[str], target: rx.Var[str],
                      mapping: rx.Var[str], on_source: Callable[..., Any],
                      on_target: Callable[..., Any], on_map: Callable[..., Any],
                      prefix: str, rows: str = "3") -> rx.Component:
    """The two version choices and the map's text area, their ids `prefix`-from, -to and
    -map."""
    return rx.fragment(
        rx.hstack(
            rx.text(_("From"), size="2", aria_hidden="true"),
            rx.select(versions, value=source, on_change=on_source, size="1",
                      id=f"{prefix}-from",  # the trigger's name (rx.select gives it these)
                      custom_attrs={"aria-label": _("Version to migrate from")}),
            rx.text(_("to"), size="2", aria_hidden="true"),
            rx.select(versions, value=target, on_change=on_target, size="1",
                      id=f"{prefix}-to", custom_attrs={"aria-label": _("Version to migrate to")}),
            spacing="2", align="center"),
        rx.text_area(value=mapping, on_change=on_map, rows=rows, width="100%",
                     placeholder=_("Renamed circles, one per line: old -> new (optional)"),
                     font_family="monospace", id=f"{prefix}-map",
                     custom_attrs={"aria-label": _("Map of renamed circles")}))
