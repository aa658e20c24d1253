"""People's work on one circle (SPEC §10, §15): claim, unclaim, transfer (转办, `/assign`),
delegate (委派) and withdraw, each one
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
from bpflow.forms import FormError
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


def transferring(caller: Caller, uri: str, target: Caller, comment: str | None = None) -> Op:
    """Transfer (转办, `/assign`): the task goes to `target`, who holds it."""
    def op(engine: Engine, inst: Instance) -> None:
        task = engine_task(engine, inst, uri)
        if not access.may_transfer(caller, task, target):
            raise Forbidden(N_("only the task's assignee may hand it on, to another candidate"
                               " (an admin to anyone)") if task["assignee"] == caller.username
                            or task["assignee"] is None else
                            N_("circle '%(uri)s' is %(user)s's task", uri=uri,
                               user=task["assignee"]))
        engine.transfer(inst, uri, target.username, caller.username, comment or None)
    return op


def delegating(caller: Caller, uri: str, target: Caller, comment: str | None = None) -> Op:
    """Delegate (委派): `target` answers the task; the answer comes back to its assignee,
    whose sending it (the same, or different) completes the circle."""
    def op(engine: Engine, inst: Instance) -> None:
        task = engine_task(engine, inst, uri)
        if target.username == caller.username:
            raise FormError({"to": N_("choose someone other than yourself")})
        if task.get("delegate") and task["assignee"] == caller.username:
            raise Conflict(N_("circle '%(uri)s' waits for %(user)s's answer", uri=uri,
                              user=task["delegate"]["to"]))
        if not access.may_delegate(caller, task, target):
            raise Forbidden(N_("only the task's assignee may delegate it")
                            if task["assignee"] in (None, caller.username) else
                            N_("circle '%(uri)s' is %(user)s's task", uri=uri,
                               user=task["assignee"]))
        engine.delegate(inst, uri, target.username, caller.username, comment or None)
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


def target(store: Store, username: str, strict: bool = False) -> Caller:
    """The user a task is handed to: an unknown or disabled one is not found (a
    transfer, as `/assign` always answered) or, `strict`, refused: 422 (a delegation)."""
    to = store.user(username)
    if to is None:
        if strict:
            raise FormError({"to": N_("no user named %(name)s", name=username[:100])})
        raise NotFound(N_("no user '%(name)s'", name=username))
    return Caller.of(to)


# ------------------------------------------------------------ for a thread
def claim(store: Store, caller: Caller, iid: str, uri: str) -> Instance:
    return step(store, caller, iid, claiming(caller, uri))


def unclaim(store: Store, caller: Caller, iid: str, uri: str) -> Instance:
    return step(store, caller, iid, unclaiming(caller, uri))


def transfer(store: Store, caller: Caller, iid: str, uri: str, to: str,
             comment: str | None = None) -> Instance:
    return step(store, caller, iid, transferring(caller, uri, target(store, to), comment))


def delegate(store: Store, caller: Caller, iid: str, uri: str, to: str,
             comment: str | None = None) -> Instance:
    return step(store, caller, iid, delegating(caller, uri, target(store, to, True), comment))


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


async def transfer_async(store: Store, caller: Caller, iid: str, uri: str, to: str,
                         comment: str | None = None) -> Instance:
    return await step_async(store, caller, iid,
                            transferring(caller, uri, target(store, to), comment))


async def delegate_async(store: Store, caller: Caller, iid: str, uri: str, to: str,
                         comment: str | None = None) -> Instance:
    return await step_async(store, caller, iid,
                            delegating(caller, uri, target(store, to, True), comment))


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


def transferees(store: Store, caller: Caller, task: dict[str, Any]) -> list[str]:
    """Whom the caller may transfer a task to (not whoever holds it now): another
    candidate, or for an admin any enabled user."""
    out = []
    for user in store.list_users():
        if user["disabled_at"] is None and user["username"] != task["assignee"] and \
                access.may_transfer(caller, task, Caller.of(user)):
            out.append(user["username"])
    return out


def delegates(store: Store, caller: Caller, task: dict[str, Any]) -> list[str]:
    """Whom the caller may delegate a task to: any other enabled user of the tenant,
    when the caller holds it and nobody answers for them yet."""
    return [user["username"] for user in store.list_users()
            if user["disabled_at"] is None and access.may_delegate(caller, task,
                                                                   Caller.of(user))]
