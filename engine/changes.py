"""What a template body changes against another (SPEC §16's publish), and the designer's
positions (`"ui": {"x", "y"}` on a circle) that are no part of what a template means.

A circle's `ui` is where the designer draws it. The engine and the analysis ignore it
(the schema only checks it is two numbers), and so does a version's identity: the
store's digest is taken of `without_positions(body)`, so moving circles alone makes no
new version; the store keeps the moved positions as the template's layout instead.

Circles are named by their path of uris (`review.check` for a circle of the inline
nested flow of `review`). `changes` compares the top-level circles: a change inside a
nested flow is a change of its circle's `box`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

UI = "ui"  # the circle key of a designer's position
Position = dict[str, float]


@dataclass(frozen=True)
class Changes:
    """What publishing `after` would change against `before` (the latest version)."""

    new: bool = False  # no version yet: publishing creates the first
    added: list[str] = field(default_factory=list)  # uris of circles only `after` has
    removed: list[str] = field(default_factory=list)  # uris of circles only `before` has
    changed: dict[str, list[str]] = field(default_factory=dict)  # uri -> keys that differ
    template: list[str] = field(default_factory=list)  # template keys that differ
    moved: list[str] = field(default_factory=list)  # circles whose `ui` position differs

    @property
    def positions_only(self) -> bool:
        """Only positions differ: publishing makes no new version (it keeps the layout)."""
        return not self.new and bool(self.moved) and not self.changes_meaning

    @property
    def changes_meaning(self) -> bool:
        """Publishing would create a new version."""
        return self.new or bool(self.added or self.removed or self.changed or self.template)

    def as_dict(self) -> dict[str, Any]:
        return {"new": self.new, "added": self.added, "removed": self.removed,
                "changed": self.changed, "template": self.template, "moved": self.moved,
                "positions_only": self.positions_only}


def changes(before: Any, after: Any) -> Changes:
    """What `after` changes against `before` (None: there is no version yet). Either may
    be an unfinished body (a draft): what is not an object, or a circle without a uri,
    is left out of the comparison."""
    if not isinstance(before, dict):
        return Changes(new=True)
    after = after if isinstance(after, dict) else {}
    old, new = _circles(before), _circles(after)
    changed: dict[str, list[str]] = {}
    moved = []
    for uri in old.keys() & new.keys():
        a, b = old[uri], new[uri]
        keys = sorted(k for k in a.keys() | b.keys() if k not in ("uri", UI)
                      and a.get(k) != b.get(k))
        if keys:
            changed[uri] = keys
        if a.get(UI) != b.get(UI):
            moved.append(uri)
    template = sorted(k for k in before.keys() | after.keys()
                      if k != "circles" and before.get(k) != after.get(k))
    if "circles" not in after or not isinstance(after.get("circles"), list):
        template = sorted({*template, "circles"})
    return Changes(added=[u for u in new if u not in old],
                   removed=[u for u in old if u not in new],
                   changed=dict(sorted(changed.items())), template=template,
                   moved=sorted(moved))


def _circles(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The top-level circles of a body by uri, in order (the first of a repeated uri)."""
    found: dict[str, dict[str, Any]] = {}
    circles = body.get("circles")
    for c in circles if isinstance(circles, list) else []:
        if isinstance(c, dict) and isinstance(c.get("uri"), str):
            found.setdefault(c["uri"], c)
    return found


# ---------------------------------------------------------------- positions
def positions(body: Any) -> dict[str, Position]:
    """Every circle's position that a body carries, by the circle's path of uris."""
    found: dict[str, Position] = {}
    for path, circle in _walk(body):
        ui = circle.get(UI)
        if _is_position(ui):
            found[path] = {"x": ui["x"], "y": ui["y"]}
    return found


def without_positions(body: Any) -> Any:
    """`body` with no circle's `ui` (a copy where one had it; `body` itself otherwise)."""
    return _rewrite(body, lambda _path, circle: circle if UI not in circle else
                    {k: v for k, v in circle.items() if k != UI})


def with_positions(body: Any, places: dict[str, Position]) -> Any:
    """`body` with the circles `places` names at those positions (a copy where one
    moved); the other circles keep theirs."""
    if not places:
        return body

    def place(path: str, circle: dict[str, Any]) -> dict[str, Any]:
        at = places.get(path)
        return {**circle, UI: dict(at)} if at is not None and circle.get(UI) != at else circle
    return _rewrite(body, place)


def _is_position(ui: Any) -> bool:
    return isinstance(ui, dict) and set(ui) == {"x", "y"} and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in ui.values())


def _nested(circle: dict[str, Any]) -> list[Any] | None:
    """The circles of a circle's inline nested flow, if it has one."""
    box = circle.get("box")
    action = box.get("action") if isinstance(box, dict) else None
    inner = action.get("circles") if isinstance(action, dict) else None
    return inner if isinstance(inner, list) else None


def _walk(body: Any, prefix: str = ""):
    circles = body.get("circles") if isinstance(body, dict) else None
    for c in circles if isinstance(circles, list) else []:
        if isinstance(c, dict) and isinstance(c.get("uri"), str):
            path = prefix + c["uri"]
            yield path, c
            inner = _nested(c)
            if inner is not None:
                yield from _walk({"circles": inner}, path + ".")


def _rewrite(body: Any, fix, prefix: str = "") -> Any:
    """`body` with each circle `c` at path p replaced by `fix(p, c)` (nested flows too);
    what is unchanged is shared, not copied."""
    circles = body.get("circles") if isinstance(body, dict) else None
    if not isinstance(circles, list):
        return body
    out, differs = [], False
    for c in circles:
        new = c
        if isinstance(c, dict) and isinstance(c.get("uri"), str):
            path = prefix + c["uri"]
            new = fix(path, c)
            inner = _nested(new)
            if inner is not None:
                action = new["box"]["action"]
                done = _rewrite(action, fix, path + ".")
                if done is not action:
                    new = {**new, "box": {**new["box"], "action": done}}
        differs = differs or new is not c
        out.append(new)
    return {**body, "circles": out} if differs else body
