"""A flow's definition: circles, boxes, form fields, who may act, retries and timeouts.

Immutable values built from a JSON body that passed analysis, with the normalisers that
read their raw JSON (also used by the analysis to report problems). A `Template`
(`model.py`) holds a `Flow` of them; the runtime's flattened view of it is `plan.py`.
"""


from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from engine.messages import N_

FIELD_TYPES = ("string", "text", "number", "integer", "boolean", "date", "email", "select",
               "password", "user", "file")
FILE_EXTENSION = re.compile(r"\.[a-z0-9]{1,10}\Z")  # a `file` field's `accept`: ".pdf"
MAX_FILE_BYTES = 1 << 30  # the most a `file` field's `max_bytes` may say
TIMEOUT_POLICIES = {"retry": "retry", "fail": "fail", "terminate": "terminate",
                    "escalate": "escalate",
                    "RETRY": "retry", "TIME_OUT_WF": "terminate", "FAIL": "fail"}
ROLE_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}\Z")  # a role: `finance`, `approver`, ...
MAX_CANDIDATES = 100  # entries in one `assign` list
RETRY_LOGIC = {"fixed": "fixed", "FIXED": "fixed", "exponential": "exponential",
               "EXPONENTIAL_BACKOFF": "exponential", "exponential_backoff": "exponential"}
MAX_RETRIES = 100
MAX_WAIT = 315_576_000  # seconds in 10 years: the longest delay, retry wait or timeout


class Invalid(ValueError):
    """A normalisation problem; the analysis turns it into a coded error."""


def show(value: Any, limit: int = 60) -> str:
    """`repr(value)` for a message: clipped, and never raising (huge integers)."""
    try:
        text = repr(value)
    except ValueError:
        return N_("a number too long to print")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def is_wait(value: Any) -> bool:
    """A finite, non-negative number of seconds, at most 10 years."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and 0 <= value <= MAX_WAIT)  # NaN fails both comparisons


def _wait(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise Invalid(N_("%(what)s must be a number of seconds, got %(value)s", what=what,
                         value=show(value)))
    if value < 0:
        raise Invalid(N_("%(what)s must not be negative, got %(value)s", what=what,
                         value=show(value)))
    if value > MAX_WAIT:
        raise Invalid(N_("%(what)s must be at most 10 years (%(most)s seconds), got %(value)s",
                         what=what, most=format(MAX_WAIT, ","), value=show(value)))
    return float(value)


def normalize_retry(spec: Any) -> tuple[float, ...]:
    """The seed's list of waits: `[1, 5, 30]`, or ATF's `{count, delay, logic}`.

    `fixed` waits `delay` before each retry; `exponential` doubles it each time
    (delay, 2*delay, 4*delay, ...).
    """
    if spec is None:
        return ()
    if isinstance(spec, list):
        if len(spec) > MAX_RETRIES:
            raise Invalid(N_("at most %(most)s retries, got %(count)s", most=MAX_RETRIES,
                             count=len(spec)))
        return tuple(_wait(v, N_("retry wait #%(n)s", n=i + 1)) for i, v in enumerate(spec))
    if isinstance(spec, dict):
        unknown = set(spec) - {"count", "delay", "logic"}
        if unknown:
            raise Invalid(N_("unknown retry keys: %(keys)s (expected count, delay, logic)",
                             keys=", ".join(sorted(unknown))))
        count = spec.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_RETRIES:
            raise Invalid(N_("retry count must be an integer from 0 to %(most)s, got %(value)s",
                             most=MAX_RETRIES, value=show(count)))
        delay = _wait(spec.get("delay", 0), "retry delay")
        logic = spec.get("logic", "fixed")
        if not isinstance(logic, str) or logic not in RETRY_LOGIC:
            raise Invalid(N_("retry logic must be 'fixed' or 'exponential', got %(value)s",
                             value=show(logic)))
        if RETRY_LOGIC[logic] == "fixed":
            return tuple(delay for _ in range(count))
        waits = tuple(delay * 2**i for i in range(count))
        if waits and waits[-1] > MAX_WAIT:
            raise Invalid(N_("exponential retry: wait #%(n)s would be %(seconds)s seconds, more"
                             " than 10 years (%(most)s seconds)", n=count,
                             seconds=format(waits[-1], ",.0f"), most=format(MAX_WAIT, ",")))
        return waits
    raise Invalid(N_("retry must be a list of waits or an object {count, delay, logic}"))


@dataclass(frozen=True)
class Assign:
    """Who may act on a circle (SPEC §10): usernames (or `${...}` placeholders resolving to
    usernames) and role names."""

    users: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()


def normalize_assign(spec: Any, what: str = "assign") -> Assign:
    """`{"users": [...], "roles": [...]}` (at least one entry)."""
    if not isinstance(spec, dict):
        raise Invalid(N_("%(what)s must be an object {users, roles}", what=what))
    unknown = set(spec) - {"users", "roles"}
    if unknown:
        raise Invalid(N_("unknown %(what)s keys: %(keys)s (expected users, roles)", what=what,
                         keys=", ".join(sorted(map(str, unknown)))))
    lists = {}
    for key in ("users", "roles"):
        value = spec.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip()
                                                  for v in value):
            raise Invalid(N_("%(what)s %(key)s must be a list of non-empty strings", what=what,
                             key=key))
        if len(value) > MAX_CANDIDATES:
            raise Invalid(N_("%(what)s %(key)s: at most %(most)s entries, got %(count)s",
                             what=what, key=key, most=MAX_CANDIDATES, count=len(value)))
        lists[key] = tuple(dict.fromkeys(value))
    bad = [r for r in lists["roles"] if not ROLE_NAME.match(r)]
    if bad:
        raise Invalid(N_("%(what)s roles: %(role)s is not a role name (lower-case letters,"
                         " digits, '_' and '-', starting with a letter, at most 40)", what=what,
                         role=show(bad[0])))
    if not lists["users"] and not lists["roles"]:
        raise Invalid(N_("%(what)s names nobody: give users, roles or both", what=what))
    return Assign(lists["users"], lists["roles"])


@dataclass(frozen=True)
class Cc:
    """Whom a circle copies (SPEC §15, 抄送): usernames (or `${...}` placeholders
    resolving to usernames) and role names, sent one mail of kind `cc` when the circle
    becomes ready (`on` "ready") or is done ("done")."""

    users: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    on: str = "done"


CC_MOMENTS = ("ready", "done")


def normalize_cc(spec: Any) -> Cc:
    """`{"users": [...], "roles": [...], "on": "ready"|"done"}` (default "done")."""
    if not isinstance(spec, dict):
        raise Invalid(N_("%(what)s must be an object {users, roles, on}", what="cc"))
    on = spec.get("on", "done")
    if on not in CC_MOMENTS:
        raise Invalid(N_("cc on must be 'ready' or 'done', got %(value)s", value=show(on)))
    people = normalize_assign({k: v for k, v in spec.items() if k != "on"}, "cc")
    return Cc(people.users, people.roles, on)


@dataclass(frozen=True)
class Remind:
    """When the people a circle waits for are reminded (SPEC §15): `before_due` seconds
    before its due time (once), and/or `every` seconds while it waits."""

    before_due: float | None = None
    every: float | None = None


MIN_REMIND_EVERY = 60.0  # seconds: nobody is reminded more often than once a minute


def normalize_remind(spec: Any) -> Remind:
    """`{"before_due": seconds}` and/or `{"every": seconds}`."""
    if not isinstance(spec, dict):
        raise Invalid(N_("remind must be an object {before_due, every}"))
    unknown = set(spec) - {"before_due", "every"}
    if unknown:
        raise Invalid(N_("unknown remind keys: %(keys)s (expected before_due, every)",
                         keys=", ".join(sorted(map(str, unknown)))))
    if not spec:
        raise Invalid(N_("remind needs before_due, every or both"))
    before = _wait(spec["before_due"], "remind before_due") if "before_due" in spec else None
    every = _wait(spec["every"], "remind every") if "every" in spec else None
    if before is not None and before <= 0:
        raise Invalid(N_("remind before_due must be greater than 0 seconds"))
    if every is not None and every < MIN_REMIND_EVERY:
        raise Invalid(N_("remind every must be at least %(n)s seconds", n=int(MIN_REMIND_EVERY)))
    return Remind(before, every)


@dataclass(frozen=True)
class Timeout:
    seconds: float
    policy: str  # retry | fail | terminate | escalate
    to: Assign | None = None  # escalate: the new candidates


def normalize_timeout(spec: Any) -> Timeout | None:
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise Invalid(N_("timeout must be an object {seconds, policy}"))
    unknown = set(spec) - {"seconds", "policy", "to"}
    if unknown:
        raise Invalid(N_("unknown timeout keys: %(keys)s",
                         keys=", ".join(sorted(map(str, unknown)))))
    seconds = _wait(spec.get("seconds"), "timeout seconds")
    if seconds <= 0:
        raise Invalid(N_("timeout seconds must be greater than 0"))
    policy = spec.get("policy", "fail")
    if not isinstance(policy, str) or policy not in TIMEOUT_POLICIES:
        raise Invalid(N_("timeout policy must be retry, fail, terminate or escalate, got"
                         " %(value)s", value=show(policy)))
    policy = TIMEOUT_POLICIES[policy]
    if policy == "escalate":
        if "to" not in spec:
            raise Invalid(N_("an escalate timeout needs 'to': {users, roles}"))
        return Timeout(seconds, policy, normalize_assign(spec["to"], "timeout to"))
    if "to" in spec:
        raise Invalid(N_("only an escalate timeout takes 'to'"))
    return Timeout(seconds, policy)


def normalize_due(spec: Any) -> float | None:
    """`due`: seconds after the circle became ready."""
    if spec is None:
        return None
    seconds = _wait(spec, "due")
    if seconds <= 0:
        raise Invalid(N_("due must be greater than 0 seconds"))
    return seconds


@dataclass(frozen=True)
class Field:
    """A form field. Its texts for people (`label`, `option_labels`, `placeholder`,
    `help`) are strings or `engine.texts.Text` (several languages; a string reading as
    English): `bpflow.languages.pick(text, lang)` gives the reader's."""
    name: str
    type: str = "string"
    label: str = ""
    required: bool = False
    options: tuple[Any, ...] = ()  # the values a select stores (an option's `value`)
    default: Any = None
    role: str | None = None  # a `user` field: pick among users having this role
    # a `file` field: the extensions it takes (".pdf"; none: any type bpflow keeps) and
    # the most bytes (None: the server's limit)
    accept: tuple[str, ...] = ()
    max_bytes: int | None = None
    # each option's label, in the order of `options` (an option without one: its value)
    option_labels: tuple[str, ...] = field(default=(), compare=False)
    placeholder: str | None = field(default=None, compare=False)
    help: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Box:
    form: tuple[Field, ...] = ()
    confirm: str | None = None
    action: dict[str, Any] | None = None  # the action's JSON, with placeholders

    @property
    def action_type(self) -> str | None:
        return self.action["type"] if self.action else None

    @property
    def empty(self) -> bool:
        return not self.form and self.confirm is None and self.action is None


@dataclass(frozen=True)
class Circle:
    uri: str
    description: str = ""
    deps: tuple[tuple[str, ...], ...] = ()
    weak: tuple[str, ...] = ()
    when: str | None = None
    box: Box = field(default_factory=Box)
    retry: tuple[float, ...] = ()
    timeout: Timeout | None = None
    flow: Flow | None = None  # set when the action is a nested flow
    assign: Assign | None = None  # who may act on its box (absent: the starter)
    due: float | None = None  # seconds after it became ready: the task's due time
    cc: Cc | None = None  # whom it copies (SPEC §15)
    remind: Remind | None = None  # when the people it waits for are reminded (SPEC §15)
    # any JSON values, carried verbatim into the events of the circle becoming ready and
    # leaving waiting (SPEC §11, Busybee's enter/leave actions); None when absent
    enter: Any = field(default=None, compare=False, hash=False)
    leave: Any = field(default=None, compare=False, hash=False)

    @property
    def is_task(self) -> bool:
        """Whether its box waits for a person (a form or a confirmation; signing in
        aside): the circles that are tasks (SPEC §10)."""
        box = self.box
        return bool(box.form or box.confirm is not None) and box.action_type != "auth"


@dataclass(frozen=True)
class Flow:
    circles: tuple[Circle, ...]
    terminal: str
    name: str | None = None  # the nested template's name, when nested by name

    def circle(self, uri: str) -> Circle:
        return self._by_uri[uri]

    @cached_property
    def _by_uri(self) -> dict[str, Circle]:
        return {c.uri: c for c in self.circles}
