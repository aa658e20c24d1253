"""The approval chain (SPEC §16): the most common flow from a quick form — a request form,
then an ordered list of approver steps — as a linear template the designer can refine.

    request ──▶ approve_1 ──▶ approve_2 ──▶ … ──▶ done

Each step names its approvers one way:

- `{"users": ["ann", "bob"], "quorum": "all"|"any"|"sequence"}`: an approval mail to
  each (会签 / 或签 / 依次, SPEC §15; `all` when not given);
- `{"field": "manager", "quorum": ...}`: the person the requester chose in the form's
  user field `manager` (the field must be of the form, of type `user`);
- `{"roles": ["finance"]}`: a task offered to the people of those roles, one of whom
  accepts or declines it (a role is decided by whoever of it takes it: `any`, the only
  quorum a role step takes).

Steps are arrows, not `kind: "linear"`, so the canvas can branch them later. What is
wrong with the quick form's answers is a ValueError saying so; what comes out is a body
the analysis accepts (the designer shows its findings all the same).
"""

from __future__ import annotations

from typing import Any

from engine.messages import N_
from engine.shape import NAME, ROLE

QUORUMS = ("all", "any", "sequence")
MAX_STEPS = 20  # approver steps of one chain
MAX_PEOPLE = 50  # users or roles of one step
REQUEST, DONE = "request", "done"


def approval_chain(name: str, title: Any, fields: list[dict[str, Any]],
                   approvers: list[dict[str, Any]]) -> dict[str, Any]:
    """The template body: the form `fields` at `request`, one circle per approver step
    in order, then `done`. `title` is a text (a string or `{language: text}`) or empty."""
    if not isinstance(name, str) or not NAME.match(name) or len(name) > 100:
        raise ValueError(N_("%(name)s is not a template name (a-z, 0-9, _ and -)",
                            name=repr(name)))
    if not isinstance(fields, list) or not all(isinstance(f, dict) for f in fields):
        raise ValueError(N_("the request form is a list of fields"))
    if not isinstance(approvers, list) or not approvers:
        raise ValueError(N_("an approval chain needs at least one approver step"))
    if len(approvers) > MAX_STEPS:
        raise ValueError(N_("an approval chain has at most %(n)s steps", n=MAX_STEPS))
    users = {f.get("name") for f in fields if f.get("type") == "user"}
    body: dict[str, Any] = {"name": name}
    if title:
        body["title"] = title
    circles: list[dict[str, Any]] = [{"uri": REQUEST, "box": {"form": list(fields)}}]
    for number, step in enumerate(approvers, 1):
        circle = _step(step, number, users, title or name)
        circles.append({"uri": circle.pop("uri"), "deps": [[circles[-1]["uri"]]], **circle})
    circles.append({"uri": DONE, "deps": [[circles[-1]["uri"]]]})
    body["circles"] = circles
    return body


def _step(step: Any, number: int, user_fields: set[Any], what: Any) -> dict[str, Any]:
    """One approver step's circle (without its arrow)."""
    if not isinstance(step, dict):
        raise ValueError(N_("approver step %(n)s is not an object", n=number))
    ways = [k for k in ("users", "roles", "field") if k in step]
    if len(ways) != 1:
        raise ValueError(N_("approver step %(n)s names its approvers by one of 'users',"
                            " 'roles' or 'field'", n=number))
    quorum = step.get("quorum", "all" if ways[0] != "roles" else "any")
    if quorum not in QUORUMS:
        raise ValueError(N_("approver step %(n)s: the quorum is all, any or sequence",
                            n=number))
    uri = f"approve_{number}"
    subject = _subject(what)
    if ways[0] == "roles":
        roles = step["roles"]
        if not _names(roles) or not all(ROLE.match(r) for r in roles):
            raise ValueError(N_("approver step %(n)s: 'roles' is a list of role names",
                                n=number))
        if quorum != "any":
            raise ValueError(N_("approver step %(n)s: a role is decided by whoever of it"
                                " takes the task (quorum any)", n=number))
        return {"uri": uri, "assign": {"roles": list(roles)}, "box": {"confirm": subject}}
    if ways[0] == "users":
        to = step["users"]
        if not _names(to):
            raise ValueError(N_("approver step %(n)s: 'users' is a list of usernames",
                                n=number))
        to = list(dict.fromkeys(to))
    else:
        field = step["field"]
        if field not in user_fields:
            raise ValueError(N_("approver step %(n)s: %(field)s is no user field of the"
                                " request form", n=number, field=repr(field)))
        to = [f"${{{REQUEST}.{field}}}"]
    action = {"type": "approval", "to": to if len(to) > 1 else to[0], "quorum": quorum,
              "subject": subject}
    return {"uri": uri, "box": {"action": action}}


def _names(value: Any) -> bool:
    return isinstance(value, list) and 0 < len(value) <= MAX_PEOPLE and all(
        isinstance(v, str) and v and len(v) <= 100 for v in value)


def _subject(what: Any) -> Any:
    """The approvers' subject: the chain's title and who asks, in each language given."""
    if isinstance(what, dict):
        return {lang: f"{text} (${{user.username}})" for lang, text in what.items()}
    return f"{what} (${{user.username}})"
