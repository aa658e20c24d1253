"""What the designer's properties panel offers while a circle is edited (SPEC §16): the
`${...}` names a circle may read and the expression language's functions (completion),
the people a circle names (the pickers' entries, each known or not), and the circle's
common fields as plain values (retry, timeout, due, remind) instead of JSON text.

Pure functions on plain JSON (no Reflex), like `designview`: the page state calls them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from bpflow_app import designview as dv
from bpflow_app.catalogs import N_
from engine.definition import MAX_RETRIES, MAX_WAIT
from engine.expression_ops import FUNCTIONS, LAZY
from engine.placeholders import WHOLE

HINTS = 8  # suggestions shown under a field at once
# what a circle's result holds, by its box (docs/units.md "Result on success"); a kind
# not here offers only its whole result (`${http}`)
RESULT_KEYS = {"confirm": ("accepted",), "approval": ("approved", "decisions"),
               "mail": ("sent_to", "mails"), "timer": ("fired_at", "due_at"),
               "auth": ("username", "roles")}
BUILT_IN = ("user.username", "user.roles", "instance.id", "instance.template",
            "instance.version")  # docs/dsl.md "Variable roots"
# an unfinished `${...` (no closing brace right after its name); the name taken whole
# (possessive: no backtracking into it, which made a long name cost its length squared)
OPEN = re.compile(r"\$\{([A-Za-z0-9_.-]*+)(?!\})")
WORD = re.compile(r"(?<![\w.$])([A-Za-z_]\w*)\Z")  # an expression's last word (a function)
KEYWORDS = {"and", "or", "not", "true", "false", "null"}
# the functions as they are written: `year()` (no argument), `len(` (one or more)
CALLS = sorted([f"{name}()" if high == 0 else f"{name}("
                for name, (_, high, _) in FUNCTIONS.items()] + [f"{name}(" for name in LAZY])
POLICIES = ("fail", "retry", "terminate", "escalate")  # a timeout's, as the panel offers
RETRY_LOGIC = ("fixed", "exponential")
CC_ON = ("done", "ready")


# ------------------------------------------------------------------ completion
def upstream(body: dict[str, Any], uri: str) -> list[str]:
    """The circles `uri` depends on through arrows (weak edges do not count), nearest
    first: the circles whose results it may read."""
    arrows = dict(reversed(dv._arrows(body)))  # a duplicate uri: its first circle
    seen: list[str] = []
    todo = list(arrows.get(uri, []))
    while todo:
        u = todo.pop(0)
        if u not in seen and u != uri and u in arrows:
            seen.append(u)
            todo += arrows[u]
    return seen


def results(circle: dict[str, Any]) -> list[str]:
    """What `${uri...}` reads of a circle's result: its form's fields (a form without an
    action), a compute's outputs, the keys of the kinds that have known ones; else the
    whole result."""
    uri = circle["uri"]
    box = circle.get("box") if isinstance(circle.get("box"), dict) else {}
    action = box.get("action") if isinstance(box.get("action"), dict) else None
    if action is None and isinstance(box.get("form"), list):
        keys = [f["name"] for f in box["form"] if isinstance(f, dict)
                and isinstance(f.get("name"), str)]
    elif action is not None and action.get("type") == "compute":
        outputs = action.get("outputs")
        keys = [str(k) for k in outputs] if isinstance(outputs, dict) else []
    else:
        keys = list(RESULT_KEYS.get(dv.kind_of(circle), ()))
    return [f"{uri}.{k}" for k in keys] if keys else [uri]


def names(body: dict[str, Any], uri: str) -> list[str]:
    """Every `${...}` name circle `uri` may read (without the braces): the results of
    the circles upstream, its own form's fields (in its action), the template's
    declared inputs, the starting user and the instance."""
    out: list[str] = []
    for u in upstream(body, uri):
        circle = dv.find(body, u)
        if circle is not None:
            out += results(circle)
    circle = dv.find(body, uri) or {}
    box = circle.get("box") if isinstance(circle.get("box"), dict) else {}
    if isinstance(box.get("action"), dict) and isinstance(box.get("form"), list):
        out += [f"form.{f['name']}" for f in box["form"] if isinstance(f, dict)
                and isinstance(f.get("name"), str)]
    inputs = body.get("inputs")
    out += [f"workflow.input.{k}" for k in inputs] if isinstance(inputs, dict) else []
    return list(dict.fromkeys([*out, *BUILT_IN]))


def _unfinished(text: str) -> re.Match[str] | None:
    found = None
    for m in OPEN.finditer(text):
        found = m
    return found


def typing(text: str, expression: bool) -> tuple[str, str] | None:
    """What is being typed at the end of a field's text that may be completed:
    ("name", what follows an unfinished `${`) or, in an expression, ("call", its last
    word); None when nothing is."""
    m = _unfinished(text)
    if m is not None:
        return "name", m.group(1)
    if expression:
        w = WORD.search(text)
        if w is not None and w.group(1) not in KEYWORDS:
            return "call", w.group(1)
    return None


def suggest(text: str, known: list[str], expression: bool) -> list[str]:
    """The completions of what is being typed (names shown as `${claim.amount}`, the
    functions as `year()`), those starting with it first; at most `HINTS`."""
    typed = typing(text, expression)
    if typed is None:
        return []
    what, part = typed
    pool = [f"${{{n}}}" for n in known] if what == "name" else CALLS
    inner = [p[2:-1] if what == "name" else p for p in pool]
    low = part.lower()
    first = [p for p, i in zip(pool, inner, strict=True) if i.lower().startswith(low)]
    then = [p for p, i in zip(pool, inner, strict=True)
            if low and low in i.lower() and p not in first]
    return [*first, *then][:HINTS]


def complete(text: str, choice: str, expression: bool) -> str:
    """`text` with what is being typed replaced by `choice` (one of `suggest`'s)."""
    m = _unfinished(text)
    if m is not None and choice.startswith("${"):
        return text[:m.start()] + choice + text[m.end():]
    w = WORD.search(text) if expression else None
    if w is not None and not choice.startswith("${"):
        return text[:w.start()] + choice
    return text + choice


# ------------------------------------------------------------------ people
@dataclass
class Pick:
    """A person or role a circle names, as a picker shows it."""
    name: str = ""
    known: bool = True  # a user (or role) of the tenant, or a `${...}` placeholder


def entries(value: Any) -> list[str]:
    """A `to` (one name or a list) or a `users`/`roles` list as its names."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def placeholder(name: str) -> bool:
    return WHOLE.match(name) is not None


def picks(names: list[str], known: set[str], users: bool) -> list[Pick]:
    return [Pick(n, n in known or (users and placeholder(n))) for n in names]


# ------------------------------------------------------------------ plain values
@dataclass
class Timing:
    """A circle's retry, timeout, due and remind as the panel's inputs show them."""
    retry_count: str = ""
    retry_delay: str = ""
    retry_logic: str = "fixed"
    retry_waits: str = ""  # a list of waits the count and delay cannot say ("1, 5, 30")
    timeout_seconds: str = ""
    timeout_policy: str = "fail"
    due: str = ""
    before_due: str = ""
    every: str = ""
    cc_on: str = "done"


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "" if value is None else dv.value_text(value)
    return str(int(value)) if float(value).is_integer() else str(value)


def timing(circle: dict[str, Any]) -> Timing:
    t = Timing()
    retry = circle.get("retry")
    if isinstance(retry, dict):
        t.retry_count, t.retry_delay = _num(retry.get("count")), _num(retry.get("delay"))
        t.retry_logic = str(retry.get("logic") or "fixed").lower()
    elif isinstance(retry, list) and retry:
        t.retry_count, t.retry_delay = str(len(retry)), _num(retry[0])
        doubling = all(isinstance(w, (int, float)) and w == retry[0] * 2**i
                       for i, w in enumerate(retry))
        t.retry_logic = "exponential" if doubling and len(retry) > 1 else "fixed"
        if not doubling and len(set(map(str, retry))) > 1:
            t.retry_waits = ", ".join(_num(w) for w in retry)
    timeout = circle.get("timeout") if isinstance(circle.get("timeout"), dict) else {}
    t.timeout_seconds = _num(timeout.get("seconds"))
    t.timeout_policy = str(timeout.get("policy") or "fail")
    t.due = _num(circle.get("due"))
    remind = circle.get("remind") if isinstance(circle.get("remind"), dict) else {}
    t.before_due, t.every = _num(remind.get("before_due")), _num(remind.get("every"))
    cc = circle.get("cc") if isinstance(circle.get("cc"), dict) else {}
    t.cc_on = str(cc.get("on") or "done")
    return t


class Wrong(ValueError):
    """A value typed into one of the panel's inputs that it cannot be (its message is a
    catalog key, `N_`)."""


def seconds(text: str) -> int | float | None:
    """A number of seconds typed in an input (None: empty); Wrong when it is not one."""
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise Wrong(N_("Give a number of seconds")) from None
    if not math.isfinite(value) or value < 0 or value > MAX_WAIT:
        raise Wrong(N_("Give a number of seconds from 0 to 10 years"))
    return int(value) if value.is_integer() else value


def count(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or int(text) > MAX_RETRIES:
        raise Wrong(N_("Give a whole number of retries from 0 to %(most)s", most=MAX_RETRIES))
    return int(text)


def set_timing(circle: dict[str, Any], key: str, text: str) -> None:
    """One of the panel's timing inputs changed: `key` is `retry_count`, `retry_delay`,
    `retry_logic`, `timeout_seconds`, `timeout_policy`, `due`, `before_due`, `every` or
    `cc_on`. Wrong when the text is not a value of it."""
    if key.startswith("retry_"):
        retry = circle.get("retry")
        if isinstance(retry, list):  # a list of waits becomes {count, delay, logic}
            t = timing(circle)
            retry = {"count": len(retry), "delay": seconds(t.retry_delay) or 0,
                     "logic": t.retry_logic}
        retry = dict(retry) if isinstance(retry, dict) else {}
        part = key.removeprefix("retry_")
        if part == "count":
            retry["count"] = count(text)
        elif part == "delay":
            retry["delay"] = seconds(text)
        elif text in RETRY_LOGIC:
            retry["logic"] = text
        if retry.get("logic") == "fixed":
            del retry["logic"]
        retry = {k: v for k, v in retry.items() if v is not None}
        if "count" not in retry:  # no count, no retries
            retry = {}
        dv.set_key(circle, "retry", retry)
    elif key.startswith("timeout_"):
        timeout = dict(circle["timeout"]) if isinstance(circle.get("timeout"), dict) else {}
        if key == "timeout_seconds":
            timeout["seconds"] = seconds(text)
            if timeout["seconds"] is None:  # no time, no timeout
                timeout = {}
        elif text in POLICIES:
            dv.set_key(timeout, "policy", None if text == "fail" else text)
            if text != "escalate":
                timeout.pop("to", None)
        dv.set_key(circle, "timeout", timeout)
    elif key == "due":
        dv.set_key(circle, "due", seconds(text))
    elif key in ("before_due", "every"):
        remind = dict(circle["remind"]) if isinstance(circle.get("remind"), dict) else {}
        dv.set_key(remind, key, seconds(text))
        dv.set_key(circle, "remind", remind)
    elif key == "cc_on" and text in CC_ON:
        cc = dict(circle["cc"]) if isinstance(circle.get("cc"), dict) else {}
        dv.set_key(cc, "on", None if text == "done" else text)
        dv.set_key(circle, "cc", cc)


# where each picker's names are kept in a circle, and whether they are users or roles
TARGETS = {"to": (("box", "action", "to"), True),
           "assign.users": (("assign", "users"), True),
           "assign.roles": (("assign", "roles"), False),
           "cc.users": (("cc", "users"), True), "cc.roles": (("cc", "roles"), False),
           "escalate.users": (("timeout", "to", "users"), True),
           "escalate.roles": (("timeout", "to", "roles"), False)}


def named(circle: dict[str, Any], target: str) -> list[str]:
    """The names a picker's field holds now."""
    value: Any = circle
    for key in TARGETS[target][0]:
        value = value.get(key) if isinstance(value, dict) else None
    return entries(value)


def set_named(circle: dict[str, Any], target: str, names: list[str]) -> None:
    """A picker's names kept: an approval's `to` one name or a list; a `users` or
    `roles` list (its object dropped when it names nobody: `cc` keeps `on` only with
    someone to copy)."""
    path = TARGETS[target][0]
    if target == "to":
        action = circle.setdefault("box", {}).setdefault("action", {})
        dv.set_key(action, "to", names[0] if len(names) == 1 else names)
        return
    holder = circle
    for key in path[:-1]:
        if not isinstance(holder.get(key), dict):
            holder[key] = {}
        holder = holder[key]
    dv.set_key(holder, path[-1], names)
    if target.startswith("cc.") and not (holder.get("users") or holder.get("roles")):
        circle.pop("cc", None)
    elif target.startswith("assign.") and not holder:
        circle.pop("assign", None)
