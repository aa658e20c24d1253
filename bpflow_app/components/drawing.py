"""The flow drawing as SVG elements, from the shapes of `bpflow_app/drawing.py`.

Every label is an SVG text child (escaped by React); colours, coordinates and paths are
computed on the server. Circles and frames are buttons: selecting one opens its details.
"""

from __future__ import annotations

import reflex as rx

from bpflow_app.components.when import when
from bpflow_app.drawing import (
    EDGE,
    OR_EDGE,
    STATE_STYLE,
    WEAK_EDGE,
    Canvas,
    Drawing,
    Edge,
    Frame,
    Junction,
    Node,
    R,
)
from bpflow_app.flowview import STATE_WORDS, CircleInfo
from bpflow_app.i18n import _

svg = rx.el.svg
# Enter or space on a focused circle (an SVG group, which has no key events of its own in
# Reflex) clicks it, so the drawing works from the keyboard too.
KEY_TO_CLICK = rx.Var(
    "((e) => { if ((e.key === 'Enter' || e.key === ' ') && e.target.getAttribute('role')"
    " === 'button') { e.preventDefault(); e.target.dispatchEvent(new MouseEvent('click',"
    " {bubbles: true})); } })")
MARKERS = {"plain": ("bp-arrow", EDGE), "or": ("bp-arrow-or", OR_EDGE),
           "weak": ("bp-arrow-weak", WEAK_EDGE)}


def _marker(marker_id: str, color: str) -> rx.Component:
    return svg.marker(
        svg.path(d="M 0 0 L 10 5 L 0 10 z", custom_attrs={"fill": color}),
        id=marker_id, view_box="0 0 10 10", ref_x=9, ref_y=5, marker_width=7,
        marker_height=7, orient="auto-start-reverse",
    )


def _edge(e: rx.Var[Edge]) -> rx.Component:
    marker = rx.match(e.kind, *[(k, f"url(#{m})") for k, (m, _) in MARKERS.items()], "")
    return svg.path(d=e.d, class_name="flow-edge", custom_attrs={
        "fill": "none", "stroke": e.stroke, "strokeWidth": 1.6, "strokeDasharray": e.dash,
        "markerEnd": rx.cond(e.arrow, marker, ""), "data-kind": e.kind})


def _junction(j: rx.Var[Junction]) -> rx.Component:
    return svg.g(
        svg.polygon(points=j.points, custom_attrs={"fill": "#ede9fe", "stroke": OR_EDGE,
                                                  "strokeWidth": 1.5}),
        svg.text(_("or"), x=j.x, y=j.y - 11, custom_attrs={
            "textAnchor": "middle", "fontSize": 10, "fill": OR_EDGE, "fontWeight": 600}),
        class_name="or-junction",
    )


def _node(n: rx.Var[Node], selected: rx.Var[str], preview: rx.Var[list[str]],
          on_select) -> rx.Component:
    return svg.g(
        svg.title(rx.cond(n.tip != "", n.aria + " — " + n.tip, n.aria)),
        rx.cond(preview.contains(n.id),
                svg.circle(cx=n.x, cy=n.y, r=R + 9, custom_attrs={
                    "fill": "none", "stroke": WEAK_EDGE, "strokeWidth": 2.5,
                    "strokeDasharray": "5 3"}, class_name="preview-ring")),
        rx.cond(n.nested, svg.circle(cx=n.x, cy=n.y, r=R + 4, custom_attrs={
            "fill": "none", "stroke": n.stroke, "strokeWidth": 1.5})),
        svg.circle(cx=n.x, cy=n.y, r=R, class_name="node-disc", custom_attrs={
            "fill": n.fill, "stroke": n.stroke, "strokeDasharray": n.dash,
            "strokeWidth": rx.cond(selected == n.id, 4, 2)}),
        svg.text(n.glyph, x=n.x, y=n.y + 5, custom_attrs={
            "textAnchor": "middle", "fontSize": 15, "fill": n.stroke, "fontWeight": 700}),
        svg.text(n.label, x=n.x, y=n.y + R + 17, custom_attrs={  # the template's words
            "textAnchor": "middle", "fontSize": 12, "fill": "#343a40", "translate": "no"}),
        on_click=on_select(n.id) if on_select else None,
        class_name="flow-node",
        custom_attrs={"role": "button", "tabIndex": 0, "aria-label": n.aria,
                      "data-circle": n.id, "data-state": n.state},
    )


def _frame(f: rx.Var[Frame], selected: rx.Var[str], on_select) -> rx.Component:
    return svg.g(
        svg.rect(x=f.x, y=f.y, width=f.w, height=f.h, rx=12, custom_attrs={
            "fill": "#fcfcfd", "stroke": f.stroke,
            "strokeWidth": rx.cond(selected == f.id, 3, 1.5)}),
        svg.text(f.label, x=f.x + 12, y=f.y + 18, custom_attrs={
            "fontSize": 12, "fontWeight": 600, "fill": f.stroke, "translate": "no"}),
        on_click=on_select(f.id) if on_select else None,
        class_name="flow-frame",
        custom_attrs={"role": "button", "tabIndex": 0, "aria-label": f.aria,
                      "data-circle": f.id, "data-state": f.state},
    )


# Chromium hides an idle scrollbar on touch screens; a styled one stays in sight, so a
# drawing cut at the edge shows that it scrolls.
VISIBLE_SCROLLBAR = {
    "paddingBottom": "4px",
    "&::-webkit-scrollbar": {"height": "10px"},
    "&::-webkit-scrollbar-track": {"background": rx.color("gray", 3), "borderRadius": "5px"},
    "&::-webkit-scrollbar-thumb": {"background": rx.color("gray", 8), "borderRadius": "5px"},
}


def flow_drawing(d: rx.Var[Drawing], selected: rx.Var[str] | str = "",
                 preview: rx.Var[list[str]] | None = None, on_select=None,
                 canvas: rx.Var[Canvas] | None = None) -> rx.Component:
    """The drawing; `on_select(circle_id)` makes circles clickable (None: a preview).
    `d` is anything with the shape lists of a Drawing (a state may keep them apart, so
    that a step re-sends only what changed), `canvas` its size (default: `d`'s)."""
    preview = preview if preview is not None else rx.Var.create([]).to(list[str])
    c = canvas if canvas is not None else d
    scroller = rx.box(
        svg(
            svg.defs(*[_marker(m, color) for m, color in MARKERS.values()]),
            rx.foreach(d.frames, lambda f: _frame(f, selected, on_select)),
            rx.foreach(d.edges, _edge),
            rx.foreach(d.junctions, _junction),
            rx.foreach(d.nodes, lambda n: _node(n, selected, preview, on_select)),
            view_box="0 0 " + c.width.to_string() + " " + c.height.to_string(),
            width="100%",
            custom_attrs={"role": "group", "aria-label": _("Flow drawing")},
            style={"maxWidth": c.width.to_string() + "px", "minWidth": c.min_width.to_string()
                   + "px", "display": "block", "margin": "0 auto"},
        ),
        overflow_x="auto", width="100%", id="flow-drawing", style=VISIBLE_SCROLLBAR,
        custom_attrs={"onKeyDown": KEY_TO_CLICK},
    )
    # The hint shows only while the drawing is wider than its box: its height is
    # (drawing's narrowest width - the box's width) clamped to 0..3em, measured in
    # container units of the wrapper (so it follows the box, not the screen).
    hint = rx.text(
        _("Wider than the screen: scroll sideways to see the whole flow →"), size="1",
        color_scheme="gray", id="drawing-scroll-hint", aria_hidden="true",
        style={"overflow": "hidden", "margin": "0", "maxHeight": "clamp(0px, calc((" +
               c.min_width.to_string() + " * 1px - 100cqw) * 100), 3em)"},
    )
    return rx.box(scroller, hint, width="100%", style={"containerType": "inline-size"})


def legend(intervention: rx.Var[bool], junctions: rx.Var[bool] | bool = True
           ) -> rx.Component:
    """What the colours and marks mean; the junction's only where the drawing has one
    (`junctions`), the weak edge's in the technical view (`intervention`)."""
    items = [rx.hstack(rx.box(width="12px", height="12px", border_radius="50%",
                              background=fill, border=f"2px solid {stroke}"),
                       rx.text(_(STATE_WORDS[state]), size="1"), spacing="1", align="center")
             for state, (fill, stroke, _glyph) in STATE_STYLE.items()]
    items.append(rx.cond(junctions, rx.hstack(
        rx.box(width="10px", height="10px", background="#ede9fe",
               border=f"1.5px solid {OR_EDGE}", transform="rotate(45deg)"),
        rx.text(_("any one of the arrows into it is enough"), size="1"),
        spacing="1", align="center", class_name="legend-junction")))
    items.append(rx.cond(intervention, rx.hstack(
        rx.box(width="18px", border_top=f"2px dashed {WEAK_EDGE}"),
        rx.text(_("where a reset may reach back (weak edge)"), size="1"), spacing="1",
        align="center")))
    return rx.flex(*items, gap="14px", wrap="wrap", aria_label=_("Legend"))


def info_rows(c: rx.Var[CircleInfo], technical: rx.Var[bool] | bool = True
              ) -> rx.Component:
    """The details of one circle: its state, why it failed; with `technical` also its
    uri, raw result and attempts."""
    technical = rx.Var.create(technical)
    return rx.vstack(
        rx.text(rx.match(c.state, *[(k, _(v)) for k, v in STATE_WORDS.items()], c.state),
                size="2", color_scheme="gray", class_name="circle-state"),
        rx.cond(c.reason != "", rx.callout(c.reason, icon="circle-alert", color_scheme="red",
                                           size="1", width="100%")),
        rx.cond(technical, rx.vstack(
            rx.code(c.id, size="1", variant="ghost", class_name="circle-uri"),
            rx.cond(c.result != "", rx.vstack(
                rx.text(_("Result"), size="1", weight="medium", color_scheme="gray"),
                rx.el.pre(c.result, class_name="result-text"),
                width="100%", spacing="1")),
            rx.cond(c.attempts > 0, rx.text(_("Failed attempts: %(n)s", n=c.attempts),
                                            size="1")),
            rx.cond(c.next_attempt != "", rx.text(_("Next attempt:"), " ",
                                                  when(c.next_attempt), size="1")),
            spacing="2", width="100%", align="start")),
        spacing="2", width="100%", align="start",
    )
