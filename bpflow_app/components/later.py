"""`later(waiting, page)`: the page drawn in pieces the browser can interleave with other
work, `waiting` shown until it is drawn.

When a signed-in page's state first arrives, React draws the whole page at once: one long
task (hundreds of ms on a slow phone) during which the page answers nothing, the largest
part of Lighthouse's Total Blocking Time (bench/RESULTS.md, "Phones"). Drawn in a React
transition instead, React does the same work in slices of a few ms and lets the browser
run between them; only putting the finished page on the screen is one task. Only the first
page a tab draws is drawn so: after it, a page opened in the app (already a transition
of React Router's) is drawn at once."""

from __future__ import annotations

from typing import Any

import reflex as rx
from reflex.vars.base import ImportVar

LATER_JS = """
function Later({children}) {
  const [waiting, page] = children;
  const [shown, setShown] = useState(() => globalThis.__bpflowDrawn === true);
  useEffect(() => {
    if (!shown) startTransition(() => setShown(true));
    globalThis.__bpflowDrawn = true;
  }, [shown]);
  return shown ? page : waiting;
}"""


class Later(rx.Component):
    tag = "Later"

    def add_imports(self) -> dict[str, Any]:
        return {"react": [ImportVar(tag="useState"), ImportVar(tag="useEffect"),
                          ImportVar(tag="startTransition")]}

    def add_custom_code(self) -> list[str]:
        return [LATER_JS]


def later(waiting: rx.Component, page: rx.Component) -> rx.Component:
    return Later.create(waiting, page)
