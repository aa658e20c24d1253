"""People's work on one circle (SPEC §10): claim, unclaim, delegate and withdraw, each one
durable step, for the REST API (`api/routes/tasks.py`), the inbox's Tasks tab and the flow
page alike.

Who may do each is `bpflow.access`'s answer, asked inside the step on the instance as it
is then (two people claiming at once: one gets it, the other a Conflict). An instance the
caller may not see is not found, as everywhere. Every function raises the errors of
`bpflow.errors` (and the engine's TransitionError for a circle no longer waiting for a
person) and returns the instance as the step left it; each has an `_async` twin for an
event loop.
"""

from __future__ import annotations

from typing import Any

from bpflow import access
from bpflow.access import Caller
from bpflow.errors import Conflict, Forbidden, NotFound
from bpflow.languages import pick
from bpflow.mailbox import Mailbox
from bpflow.moves.steps import Op, step, step_async
from bpflow.store import Store
from engine.instance import Instance
from engine.messages import N_
from engine.runtime import Engine
from engine.tasks import open_task


# --------------------------------------------------------------- the steps' rules
def engine_task(engine: Engine, inst: Instance, uri: str) -> dict[str, Any]:
    """The open task of circle `uri` (NotFound / 409 as the engine says)."""
    if uri not in inst.circles:
        raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
    return open_task(engine, inst, uri)


def claiming(caller: Caller, uri: str) -> Op:
    def op(engine: Engine, inst: Instance) -> None:
        task = engine_task(engine, inst, uri)
        if task["assignee"] not in (None, caller.username):
            raise Conflict(N_("circle '%(uri)s' is held by %(user)s", uri=uri,
                                  user=task["assignee"]))
        if task["assignee"] is None and not access.may_claim(caller, task,
                                                             inst.template.name):
            raise Forbidden(N_("circle '%(uri)s' waits for %(whom)s", uri=uri,
                                   whom=access.describe(task)))
        engine.claim(inst, uri, caller.username, caller.username)
    return op


def unclaiming(caller: Caller, uri: str) -> Op:
    def op(engine: Engine, inst: Instance) -> None:
        task = engine_task(engine, inst, uri)
        if task["assignee"] is None:
            raise Conflict(N_("nobody holds circle '%(uri)s'", uri=uri))
        if not access.may_unclaim(caller, task):
            raise Forbidden(N_("circle '%(uri)s' is %(user)s's task", uri=uri,
                                   user=task["assignee"]))
        engine.unclaim(inst, uri, caller.username)
    return op


def delegating(caller: Caller, uri: str, target: Caller) -> Op:
    def op(engine: Engine, inst: Instance) -> None:
        task = engine_task(engine, inst, uri)
        if not access.may_delegate(caller, task, target):
            raise Forbidden(N_("only the task's assignee may hand it on, to another candidate"
                               " (an admin to anyone)") if task["assignee"] == caller.username
                            or task["assignee"] is None else
                            N_("circle '%(uri)s' is %(user)s's task", uri=uri,
                               user=task["assignee"]))
        engine.delegate(inst, uri, target.username, caller.username)
    return op


def withdrawing(caller: Caller, uri: str, reason: str | None, epoch: list[int]) -> Op:
    """The op of a withdrawal; `epoch` receives the attempt it closes."""
    def op(engine: Engine, inst: Instance) -> None:
        if uri not in inst.circles:
            raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
        if not access.may_withdraw(caller, inst):
            raise Forbidden(N_("only the flow's starter (or an admin) may withdraw its work"))
        epoch[:] = [inst.circles[uri].epoch]
        engine.send_back(inst, uri, "withdrawn", caller.username, reason or None)
    return op


def target(store: Store, username: str) -> Caller:
    """The user a task is handed to (NotFound for an unknown or disabled one)."""
    to = store.user(username)
    if to is None:
        raise NotFound(N_("no user '%(name)s'", name=username))
    return Caller.of(to)


# ------------------------------------------------------------ for a thread
def claim(store: Store, caller: Caller, iid: str, uri: str) -> Instance:
    return step(store, caller, iid, claiming(caller, uri))


def unclaim(store: Store, caller: Caller, iid: str, uri: str) -> Instance:
    return step(store, caller, iid, unclaiming(caller, uri))


def delegate(store: Store, caller: Caller, iid: str, uri: str, to: str) -> Instance:
    return step(store, caller, iid, delegating(caller, uri, target(store, to)))


def withdraw(store: Store, caller: Caller, iid: str, uri: str,
             reason: str | None = None) -> Instance:
    epoch: list[int] = []
    inst = step(store, caller, iid, withdrawing(caller, uri, reason, epoch))
    Mailbox(store).close_attempt(iid, uri, epoch[0], "withdrawn")
    return inst



# -------------------------------------------------------- for an event loop
async def claim_async(store: Store, caller: Caller, iid: str, uri: str) -> Instance:
    return await step_async(store, caller, iid, claiming(caller, uri))


async def unclaim_async(store: Store, caller: Caller, iid: str, uri: str) -> Instance:
    return await step_async(store, caller, iid, unclaiming(caller, uri))


async def delegate_async(store: Store, caller: Caller, iid: str, uri: str,
                         to: str) -> Instance:
    return await step_async(store, caller, iid, delegating(caller, uri, target(store, to)))


async def withdraw_async(store: Store, caller: Caller, iid: str, uri: str,
                         reason: str | None = None) -> Instance:
    epoch: list[int] = []
    inst = await step_async(store, caller, iid, withdrawing(caller, uri, reason, epoch))
    Mailbox(store).close_attempt(iid, uri, epoch[0], "withdrawn")
    return inst


# ------------------------------------------------------------------ reading
def circle_words(store: Store, template: str, version: int, circle: str,
                 lang: str | None = None) -> tuple[str, str]:
    """(the template's title, the circle's description) of a task row, from its template
    version (built once per process), in `lang` when given (`languages.pick`; else as
    the model keeps them: strings reading as English); empty when the version is gone."""
    try:
        _, built = store.template(template, version)
    except NotFound:
        return "", ""
    node = built.plan.nodes.get(circle)
    title, description = built.title, node.circle.description if node else ""
    return (title, description) if lang is None else (pick(title, lang),
                                                       pick(description, lang))


def delegates(store: Store, caller: Caller, task: dict[str, Any]) -> list[str]:
    """Whom the caller may hand a task to (not whoever holds it now): another candidate,
    or for an admin any enabled user."""
    out = []
    for user in store.list_users():
        if user["disabled_at"] is None and user["username"] != task["assignee"] and \
                access.may_delegate(caller, task, Caller.of(user)):
            out.append(user["username"])
    return out
