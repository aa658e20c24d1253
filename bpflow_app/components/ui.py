"""Small shared pieces: state badges in the drawing's colours, page headings, empty
states, tab panels."""

from __future__ import annotations

import reflex as rx

COLORS = {"waiting": "gray", "ready": "indigo", "retrying": "amber", "success": "green",
          "failure": "red", "skipped": "gray", "running": "indigo", "completed": "green",
          "failed": "red", "suspended": "amber", "terminated": "gray", "approved": "green",
          "rejected": "red", "pending": "amber"}


def color_of(state: rx.Var | str) -> rx.Var | str:
    if isinstance(state, str):
        return COLORS.get(state, "gray")
    return rx.match(state, *[(k, v) for k, v in COLORS.items()], "gray")


def state_badge(state: rx.Var | str, label: rx.Var | str | None = None) -> rx.Component:
    return rx.badge(
        rx.hstack(rx.box(width="8px", height="8px", border_radius="50%",
                         background="currentColor"),
                  rx.text(label if label is not None else state, size="1"),
                  spacing="1", align="center"),
        color_scheme=color_of(state), variant="soft", radius="full",
    )


def row_badge(state: rx.Var | str, label: rx.Var | str) -> rx.Component:
    """`state_badge` for the rows of long lists: one plain element styled by the theme's
    colour tokens (assets/styles.css), not four components per row."""
    return rx.el.span(label, class_name="row-badge",
                      custom_attrs={"data-color": color_of(state)})


def visually_hidden(text: rx.Var | str) -> rx.Component:
    """Text for screen readers only (a table's header over a column of links, …)."""
    return rx.el.span(text, class_name="visually-hidden")


def page_header(title: str | rx.Var, subtitle: str | rx.Var = "",
                *actions: rx.Component) -> rx.Component:
    return rx.flex(
        rx.vstack(rx.heading(title, size="7", as_="h1"),
                  rx.cond(subtitle != "", rx.text(subtitle, color_scheme="gray", size="2"))
                  if isinstance(subtitle, rx.Var) else
                  (rx.text(subtitle, color_scheme="gray", size="2") if subtitle else
                   rx.fragment()),
                  spacing="1", align="start"),
        rx.hstack(*actions, spacing="2", wrap="wrap"),
        justify="between", align="end", wrap="wrap", spacing="3", width="100%",
        margin_bottom="16px",
    )


def empty_state(icon: str, title: str, text: str | rx.Var = "",
                *actions: rx.Component) -> rx.Component:
    return rx.center(
        rx.vstack(rx.icon(icon, size=32, color=rx.color("gray", 8)),
                  rx.text(title, weight="medium"),
                  rx.text(text, size="2", color_scheme="gray", align="center"),
                  *actions, align="center", spacing="2"),
        padding="32px", border=f"1px dashed {rx.color('gray', 6)}", border_radius="12px",
        width="100%", class_name="empty-state",
    )


def section(title: str | rx.Var, *children: rx.Component, **props) -> rx.Component:
    return rx.card(rx.vstack(rx.heading(title, size="4", as_="h2"), *children, spacing="3",
                             width="100%"), width="100%", **props)


def tab_names(tab_id: str, panel_id: str) -> dict:
    """The props of a tab trigger (`rx.tabs.trigger(..., **tab_names(...))`) whose panel is
    the `tab_panel` of `panel_id`: its own id, and the panel it controls."""
    return {"id": tab_id, "custom_attrs": {"aria-controls": panel_id}}


def tab_panel(*children: rx.Component, id: str, tab_id: rx.Var | str,
              **props) -> rx.Component:
    """The panel of the tab shown (the triggers given `tab_names(..., id)`): a plain
    element named by its tab, `tab_id`. Radix's tab content
    mounts through `Presence`, whose check of the node's animation makes the browser compute
    every style of the page at once: 10-20 ms of a page's first draw, and of each change
    of tab (bench/RESULTS.md, "Sixth look")."""
    return rx.el.div(*children, role="tabpanel", id=id, tab_index=0,
                     custom_attrs={"aria-labelledby": tab_id}, width="100%", **props)
