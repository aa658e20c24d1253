"""Structural checks of a circle's box (form layer, confirm, action layer).

Each check returns `(pointer below /box, message)` pairs; the analysis files
them under `invalid_box`. Kept apart from the analysis so that the units that
run boxes can share the vocabulary (field types, action types).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from croniter import croniter

from engine.definition import (
    FIELD_TYPES,
    FILE_EXTENSION,
    MAX_FILE_BYTES,
    MAX_WAIT,
    ROLE_NAME,
    is_wait,
    show,
)
from engine.kinds import ACTION_TYPES
from engine.messages import N_

FIELD_KEYS = {"name", "type", "label", "required", "options", "default", "placeholder", "help",
              "role", "accept", "max_bytes"}
FIELD_TEXTS = ("label", "placeholder", "help")  # a field's texts for people (SPEC §17)
OPTION_KEYS = {"value", "label"}
ACTION_TEXTS = {"approval": ("subject", "body"), "mail": ("subject", "body")}
HTTP_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
CRON_YEARS = 5  # a cron must match a time within this many years
Problems = list[tuple[str, str]]


def check_box(box: dict[str, Any]) -> Problems:
    problems: Problems = []
    form = box.get("form")
    if isinstance(form, list):
        problems += _check_form(form)
        if "confirm" in box:
            problems.append(("/confirm", N_("a box holds a form or a confirmation, not both")))
    action = box.get("action")
    kind = action.get("type") if isinstance(action, dict) else None
    if "confirm" in box and isinstance(action, dict):
        problems.append(("/confirm", N_("a box holds a confirmation or an action, not both"
                                        " (put the action in the next circle)")))
    if isinstance(form, list) and kind != "auth":
        problems += [(f"/form/{i}/type", N_("password fields only feed an auth action; they"
                      " are never stored, so no other box could read them"))
                     for i, f in enumerate(form) if isinstance(f, dict)
                     and f.get("type") == "password"]
    if (isinstance(form, list) or "confirm" in box) and kind == "signal":
        problems.append(("/form" if isinstance(form, list) else "/confirm",
                         N_("a signal action waits for the outside world from the moment its"
                            " circle is ready: it takes no form or confirmation (put them in"
                            " the circle before)")))
    if isinstance(form, list) and kind in ("compute", "timer", "flow"):
        problems.append(("/form", N_("a form cannot feed a %(kind)s action (it runs"
                                     " without anyone's input)", kind=kind)))
    if isinstance(action, dict) and isinstance(action.get("type"), str):
        kind = action["type"]
        if kind not in ACTION_TYPES:
            problems.append(("/action/type", N_("unknown action type '%(kind)s' (expected one"
                             " of %(known)s)", kind=kind, known=", ".join(ACTION_TYPES))))
        else:
            problems += [("/action" + p, m) for p, m in CHECKS[kind](action, box)]
            problems += [(f"/action/{_escape(key)}", N_(
                          "unknown key '%(key)s' for a %(kind)s action (expected %(known)s)",
                          key=key, kind=kind,
                          known=", ".join(sorted(ACTION_KEYS[kind])) or N_("none")))
                         for key in sorted(set(action) - ACTION_KEYS[kind] - {"type"})]
    return problems


def _check_form(form: list[Any]) -> Problems:
    problems: Problems = []
    seen: set[str] = set()
    for i, f in enumerate(form):
        at = f"/form/{i}"
        if not isinstance(f, dict):
            problems.append((at, N_("a form field must be an object")))
            continue
        name = f.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            problems.append((f"{at}/name", N_("field name %(name)s must be an identifier"
                             " (letters, digits, underscore)", name=show(name))))
        elif name in seen:
            problems.append((f"{at}/name", N_("field '%(name)s' appears twice", name=name)))
        else:
            seen.add(name)
        ftype = f.get("type", "string")
        if ftype not in FIELD_TYPES:
            problems.append((f"{at}/type", N_("unknown field type %(type)s (expected one of"
                             " %(known)s)", type=show(ftype), known=", ".join(FIELD_TYPES))))
        if ftype == "select":
            options = f.get("options")
            if not isinstance(options, list) or not options:
                problems.append((f"{at}/options",
                                 N_("a select field needs a non-empty options list")))
            else:
                problems += _check_options(options, f"{at}/options")
        elif "options" in f:
            problems.append((f"{at}/options", N_("only select fields take options")))
        if "role" in f and ftype != "user":
            problems.append((f"{at}/role", N_("only user fields take a role")))
        elif "role" in f and not (isinstance(f["role"], str) and ROLE_NAME.match(f["role"])):
            problems.append((f"{at}/role", N_("%(role)s is not a role name", role=show(f["role"]))))
        problems += _check_file(f, at, ftype)
        if "required" in f and not isinstance(f["required"], bool):
            problems.append((f"{at}/required", N_("required must be true or false")))
        if ftype == "password" and "default" in f:
            problems.append((f"{at}/default", N_("a password field cannot have a default")))
        for key in sorted(set(f) - FIELD_KEYS):
            problems.append((f"{at}/{_escape(key)}",
                             N_("unknown field key %(key)s", key=show(key))))
    return problems


def _check_file(f: dict[str, Any], at: str, ftype: Any) -> Problems:
    """A `file` field's `accept` (extensions like ".pdf") and `max_bytes`; no default."""
    problems: Problems = [(f"{at}/{key}", N_("only file fields take %(key)s", key=key))
                          for key in ("accept", "max_bytes") if key in f and ftype != "file"]
    if ftype != "file":
        return problems
    accept = f.get("accept", [])
    if not isinstance(accept, list) or not all(
            isinstance(a, str) and FILE_EXTENSION.match(a) for a in accept):
        problems.append((f"{at}/accept", N_("accept must be a list of extensions in lower case,"
                                            " like %(example)s", example='[".pdf", ".png"]')))
    size = f.get("max_bytes")
    if "max_bytes" in f and (not isinstance(size, int) or isinstance(size, bool)
                             or not 0 < size <= MAX_FILE_BYTES):
        problems.append((f"{at}/max_bytes", N_("max_bytes must be a whole number of bytes"
                                               " from 1 to %(max)s", max=MAX_FILE_BYTES)))
    if "default" in f:
        problems.append((f"{at}/default", N_("a file field cannot have a default")))
    return problems


def _check_options(options: list[Any], at: str) -> Problems:
    """An option is a value (its own label) or `{"value": v, "label": text}`; its label
    is checked with the box's other texts (`texts`)."""
    problems: Problems = []
    for j, option in enumerate(options):
        if not isinstance(option, dict):
            continue
        value = option.get("value")
        if "value" not in option or not isinstance(value, (str, int, float)):
            problems.append((f"{at}/{j}", N_("an option given as an object needs a value (a"
                                " string, number or boolean) and may have a label:"
                                " %(example)s", example='{"value": ..., "label": ...}')))
        problems += [(f"{at}/{j}/{_escape(key)}", N_("unknown option key %(key)s (expected"
                      " value, label)", key=show(key)))
                     for key in sorted(set(option) - OPTION_KEYS)]
    return problems


def option_value(option: Any) -> Any:
    """What choosing an option stores: its `value` when given as an object, else itself."""
    return option.get("value") if isinstance(option, dict) else option


def texts(box: dict[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """(pointer below /box, value, what it is) of each text a box shows people, which
    may be a string or a map of language to text (SPEC §17): the confirmation, a form
    field's label, placeholder and help, an option's label, an approval's or a mail's
    subject and body."""
    if "confirm" in box:
        yield "/confirm", box["confirm"], N_("confirm")
    form = box.get("form")
    for i, f in enumerate(form if isinstance(form, list) else []):
        if not isinstance(f, dict):
            continue
        name = N_("field '%(name)s'", name=f["name"]) if isinstance(f.get("name"), str) \
            else N_("field %(index)s", index=i)
        for key in FIELD_TEXTS:
            if key in f:
                yield f"/form/{i}/{key}", f[key], _field_text(key, name)
        options = f.get("options")
        for j, option in enumerate(options if isinstance(options, list) else []):
            if isinstance(option, dict) and "label" in option:
                yield (f"/form/{i}/options/{j}/label", option["label"],
                       N_("the label of option %(index)s of %(field)s", index=j,
                          field=name))
    action = box.get("action")
    kind = action.get("type") if isinstance(action, dict) else None
    if isinstance(action, dict) and isinstance(kind, str) and kind in ACTION_TEXTS:
        for key in ACTION_TEXTS[kind]:
            if key in action:
                yield f"/action/{key}", action[key], _action_text(kind, key)


def _field_text(key: str, field: str) -> str:
    """What a field's text is, named in a message (`key`: one of `FIELD_TEXTS`)."""
    if key == "label":
        return N_("the label of %(field)s", field=field)
    if key == "placeholder":
        return N_("the placeholder of %(field)s", field=field)
    return N_("the help of %(field)s", field=field)


def _action_text(kind: str, key: str) -> str:
    """What an action's text is, named in a message (`ACTION_TEXTS`)."""
    if kind == "approval":
        return N_("the approval's subject") if key == "subject" else N_("the approval's body")
    return N_("the mail's subject") if key == "subject" else N_("the mail's body")


def _recipients(action: dict[str, Any]) -> tuple[Problems, int | None]:
    to = action.get("to")
    if isinstance(to, str) and to.strip():
        return [], 1 if "${" not in to else None
    if isinstance(to, list) and to and all(isinstance(t, str) and t.strip() for t in to):
        if len(set(to)) != len(to):
            return [("/to", N_("each recipient may be named only once"))], None
        return [], len(to)
    return [("/to", N_("'to' must name a user or a non-empty list of users"))], None


def _text_keys(action: dict[str, Any], *keys: str) -> Problems:
    return [(f"/{k}", N_("'%(key)s' must be a string", key=k)) for k in keys
            if k in action and not isinstance(action[k], str)]


def _http(action: dict[str, Any], box: dict[str, Any]) -> Problems:
    problems: Problems = []
    url = action.get("url")
    if not isinstance(url, str) or not url.strip():
        problems.append(("/url", N_("an http action needs a url")))
    method = action.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        problems.append(("/method", N_("unknown HTTP method %(method)s", method=show(method))))
    headers = action.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        problems.append(("/headers", N_("headers must be an object of strings")))
    if "json" in action and "body" in action:
        problems.append(("/body", N_("give either json or body, not both")))
    problems += _text_keys(action, "body")
    timeout = action.get("timeout", 10)
    if not is_wait(timeout) or timeout == 0:
        problems.append(("/timeout", N_("timeout must be a positive number of seconds,"
                            " at most 10 years (%(most)s)", most=format(MAX_WAIT, ","))))
    return problems


QUORUM_WORDS = ("all", "any", "sequence")


def quorum_problem(quorum: Any, count: int | None = None) -> str | None:
    """Why `quorum` is not an approval's quorum (SPEC §15) for `count` addressees (when
    known), or None: "all", "any", "sequence", a positive N (at most the addressees),
    {"ratio": r} with 0 < r ≤ 1."""
    if isinstance(quorum, str) and quorum in QUORUM_WORDS:
        return None
    if isinstance(quorum, dict):
        ratio = quorum.get("ratio")
        if set(quorum) != {"ratio"} or isinstance(ratio, bool) or \
                not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            return N_("a vote's quorum is {\"ratio\": r} with 0 < r ≤ 1")
        return None
    if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
        return N_("quorum must be 'all', 'any', 'sequence', {\"ratio\": r} or a positive"
                  " integer")
    if count is not None and quorum > count:
        return N_("quorum %(quorum)s is more than the %(count)s approvers", quorum=quorum,
                  count=count)
    return None


def _approval(action: dict[str, Any], box: dict[str, Any]) -> Problems:
    problems, count = _recipients(action)
    problem = quorum_problem(action.get("quorum", "all"), count)
    return problems + ([("/quorum", problem)] if problem else [])


def _mail(action: dict[str, Any], box: dict[str, Any]) -> Problems:
    return _recipients(action)[0]


def _timer(action: dict[str, Any], box: dict[str, Any]) -> Problems:
    if ("delay" in action) == ("cron" in action):
        return [("", N_("a timer needs exactly one of delay (seconds) or cron"))]
    if "delay" in action:
        if not is_wait(action["delay"]):
            return [("/delay", N_("delay must be a number of seconds, 0 or more and at"
                                " most 10 years (%(most)s)", most=format(MAX_WAIT, ",")))]
        return []
    cron = action["cron"]
    if not isinstance(cron, str) or not croniter.is_valid(cron):
        return [("/cron", N_("%(cron)s is not a valid cron expression", cron=show(cron)))]
    if not fires(cron):
        return [("/cron", N_("%(cron)s never fires: no time matches it within"
                            " %(years)s years", cron=show(cron), years=CRON_YEARS))]
    return []


@lru_cache(maxsize=4096)
def fires(cron: str) -> bool:
    """Whether a valid cron expression matches a time within CRON_YEARS years from now."""
    start = datetime.now(UTC)
    try:
        croniter(cron, start, max_years_between_matches=CRON_YEARS).get_next(datetime)
    except Exception:  # noqa: BLE001 - whatever croniter makes of it, it would not run
        return False
    return True


def _flow(action: dict[str, Any], box: dict[str, Any]) -> Problems:
    if ("template" in action) == ("circles" in action):
        return [("", N_("a nested flow needs exactly one of template (a name) or circles"
                        " (inline)"))]
    return []


def _auth(action: dict[str, Any], box: dict[str, Any]) -> Problems:
    form = box.get("form")
    fields = {f.get("name"): f.get("type", "string") for f in form if isinstance(f, dict)
              and isinstance(f.get("name"), str)} if isinstance(form, list) else {}
    if "username" not in fields or fields.get("password") != "password":
        return [("", N_("an auth action needs a form with a 'username' field and a"
                        " 'password' field of type password"))]
    return []


def _compute(action: dict[str, Any], box: dict[str, Any]) -> Problems:
    outputs = action.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        return [("/outputs", N_("compute needs outputs: an object of name -> expression"))]
    return [(f"/outputs/{k}", N_("an output must be an expression string"))
            for k, v in outputs.items() if not isinstance(v, str)]


SIGNAL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,100}\Z")


def _signal(action: dict[str, Any], box: dict[str, Any]) -> Problems:
    name = action.get("name")
    problems: Problems = []
    if not isinstance(name, str) or not SIGNAL_NAME.match(name):
        problems.append(("/name", N_("a signal needs a name: 1 to 100 letters, digits"
                                     " and _ . : -")))
    key = action.get("key")
    if key is not None and (isinstance(key, bool) or not isinstance(key, (str, int))):
        problems.append(("/key", N_("a signal's key is a string (it may hold ${...}) or"
                                    " an integer")))
    elif isinstance(key, str) and len(key) > 300:
        problems.append(("/key", N_("a signal's key is at most 300 characters")))
    return problems


ACTION_KEYS = {
    "http": {"method", "url", "headers", "json", "body", "timeout"},
    "approval": {"to", "quorum", "subject", "body", "data"},
    "mail": {"to", "subject", "body"}, "timer": {"delay", "cron"},
    "flow": {"template", "circles", "kind"}, "auth": set(), "compute": {"outputs"},
    "signal": {"name", "key"},
}
CHECKS = {"http": _http, "approval": _approval, "mail": _mail, "timer": _timer, "flow": _flow,
          "auth": _auth, "compute": _compute, "signal": _signal}


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")
