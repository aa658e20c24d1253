"""Where a template's flows wait, drawn over the flow (SPEC §18's heat map), for the pages
that show it (templates, operations): the template's drawing, and the same drawing with
each circle filled by its wait (`drawing.heated`) and its figures (count, median, p95,
longest: `Store.durations`' per-circle figures) in its title, in the reader's words
(`say`: the page state's `gettext`)."""

from __future__ import annotations

from typing import Any

from bpflow_app.catalogs import N_
from bpflow_app.drawing import Drawing, draw, heated
from bpflow_app.flowview import STATE_WORDS
from bpflow_app.templatesview import Say

SPANS = ((86400, N_("%(n)s d")), (3600, N_("%(n)s h")), (60, N_("%(n)s min")))


def span(seconds: float | None, say: Say) -> str:
    """A wait in the reader's words: seconds, minutes, hours or days."""
    if seconds is None:
        return "–"
    for size, unit in SPANS:
        if seconds >= size:
            return say(unit, n=f"{seconds / size:.1f}".removesuffix(".0"))
    return say(N_("%(n)s s"), n=f"{seconds:.1f}".removesuffix(".0"))


def template_drawing(t: Any, say: Say) -> Drawing:
    """A template's drawing without an instance (its nested flows expanded, its weak
    edges drawn), each circle named "step: state" for assistive technology."""
    nested = {cid: node.weak for cid, node in t.plan.nodes.items() if node.weak}
    return draw(t.analysis, {}, expanded=set(t.analysis.get("nested", {})),
                weak=nested or None, aria=lambda name, state: say(
                    N_("%(step)s: %(state)s"), step=name,
                    state=say(STATE_WORDS.get(state, state))))


def heat_map(d: Drawing, figures: dict[str, dict[str, Any]], say: Say
             ) -> tuple[Drawing, bool]:
    """`d` as a heat map of `figures` (circle id -> {"count", "p50", "p95", "max"}
    seconds), and whether any circle has waited at all (else there is nothing to show)."""
    waited = any(f.get("count") for f in figures.values())
    return heated(d, figures, lambda f: say(
        N_("%(count)s waits: median %(p50)s, p95 %(p95)s, longest %(max)s"),
        count=f["count"], p50=span(f["p50"], say), p95=span(f["p95"], say),
        max=span(f["max"], say))), waited
