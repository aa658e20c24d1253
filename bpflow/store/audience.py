"""Whom a task names, as tokens a query can search (SPEC §10): the one home of their
format. `a:NAME` is a task's holder, `u:NAME` a candidate by name, `r:ROLE` a candidate by
role; `*` (`EVERY`) stands for every task list of a tenant (a change after a crowd of
starts). `m:ID` names a person's mail (by user id), `m:guests` the guest messages: a change
of either tells the inbox to read its lists again.

The circle rows carry them as text (`audience`: whom an open task waits for, kept in
`task_audience` one row per token; `people`: everyone a task named, done or not); the
Tasks lists (`Queries.tasks`), the flows a person takes part in (`Queries.taking_part`),
the keys a page follows (`changes.task_keys`) and `access.named` ask the same tokens of a
person here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.instance import WAITING, CircleRun

HOLDER, CANDIDATE, ROLE = "a:", "u:", "r:"
EVERY = "*"
MAIL = "m:"  # a person's mail (by user id) changed: the inbox's lists and badges follow
GUESTS = "m:guests"  # a guest message came (those who read them follow)


def mail_of(user_id: int | None) -> str:
    """The token of a person's mail (guest messages, which have no addressee: GUESTS)."""
    return GUESTS if user_id is None else f"{MAIL}{user_id}"


def held_by(username: str) -> list[str]:
    """The token of the tasks a person holds."""
    return [HOLDER + username]


def offered_to(username: str, roles: Iterable[str]) -> list[str]:
    """The tokens of the tasks offered to a person: by name, or by one of their roles."""
    return [CANDIDATE + username, *(ROLE + r for r in roles)]


def addressed_to(username: str) -> list[str]:
    """The tokens of the tasks addressed to a person by name (held by them, or offered to
    them by name, not by a role): what their substitute is offered too (SPEC §15)."""
    return [HOLDER + username, CANDIDATE + username]


def tokens_of(username: str, roles: Iterable[str]) -> list[str]:
    """Every token naming a person: as a holder, a candidate, or by a role."""
    return held_by(username) + offered_to(username, roles)


def candidates_of(task: Mapping[str, Any]) -> list[str]:
    """The tokens of a task's candidates: by name, by role."""
    return [CANDIDATE + u for u in task["users"]] + [ROLE + r for r in task["roles"]]


def named_in(task: Mapping[str, Any]) -> list[str]:
    """The tokens a task names, done or not: its candidates, its holder."""
    named = candidates_of(task) + asked_to_answer(task, done=True)
    return named + held_by(task["assignee"]) if task["assignee"] else named


def asked_to_answer(task: Mapping[str, Any], done: bool = False) -> list[str]:
    """The token of the person a task is delegated to (委派: they answer for its holder),
    while they have not answered (`done`: also once they have)."""
    delegate = task.get("delegate")
    if not delegate or (delegate.get("answer") is not None and not done):
        return []
    return held_by(delegate["to"])


def _text(tokens: list[str]) -> str:
    """Tokens as text a `LIKE '% token %'` finds: each between spaces."""
    return " " + " ".join(tokens) + " "


def audience(run: CircleRun) -> str | None:
    """Whom the task waits for now, as text: " a:NAME " once someone holds it, else
    " u:NAME ... r:ROLE ... "; None unless the circle waits for a person (not ready,
    finished, or its form sent to its action)."""
    task = run.task
    if task is None or run.state != WAITING or run.pending is not None:
        return None
    if task["assignee"]:
        return _text(held_by(task["assignee"]) + asked_to_answer(task))
    return _text(candidates_of(task))


def people(run: CircleRun) -> str | None:
    """Everyone the circle's task names, done or not (" u:NAME ... r:ROLE ... a:NAME "):
    how a person finds the flows they take part in (by name, by role, as its holder)."""
    task = run.task
    if task is None:
        return None
    named = named_in(task)
    return _text(named) if named else None
