"""The designer's canvas: React Flow (`@xyflow/react`) in a small component of ours
(`assets/design_canvas.jsx`), which draws the nodes and edges the server gives (whole, or
what changed: `designview.changed`) and reports each edit (`on_edit`) for the server to
apply (SPEC §16). Only a dragged node's position lives in the browser, while it is
dragged."""

from __future__ import annotations

from typing import Any

import reflex as rx
from reflex.event import passthrough_event_spec

XYFLOW = "@xyflow/react@12.12.1"


class DesignCanvas(rx.Component):
    library = "$/public/design_canvas.jsx"
    lib_dependencies: list[str] = [XYFLOW]  # noqa: RUF012 (Reflex reads a class list)
    tag = "DesignCanvas"

    # the nodes and edges: whole, or what changed from the version the canvas holds
    picture: rx.Var[dict[str, Any]]
    # key ("Alt+1", "Control+z") -> the edit it reports
    keys: rx.Var[dict[str, dict[str, Any]]]
    label: rx.Var[str]  # the canvas's accessible name
    # React Flow's own words by its keys (`ariaLabelConfig`), and "moved" ({x}, {y})
    words: rx.Var[dict[str, str]]

    on_edit: rx.EventHandler[passthrough_event_spec(dict[str, Any])]


def design_canvas(**props: Any) -> rx.Component:
    return DesignCanvas.create(**props)
