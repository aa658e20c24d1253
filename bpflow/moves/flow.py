"""Moves on a whole instance (SPEC §4, §8, §10): start (idempotent with a key), complete
or fail a circle (a form or a confirmation through the box layer), reset, suspend,
resume and abort (its undecided approval mail closed, here and only here).

Each is an op built once that asks `bpflow.access` inside the step, on the instance as it
is then, with thin twins for a thread and an event loop (`bpflow.moves.steps`). Who may
not see an instance gets its 'not found'; who sees it but may not control it (a person it
asked) gets Forbidden.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from bpflow import access
from bpflow.access import Caller, drivable, startable
from bpflow.errors import Conflict, Forbidden, NotFound
from bpflow.interactions import Interactions, take
from bpflow.mailbox import Mailbox
from bpflow.moves.steps import Op, returning, step, step_async, visible, visible_async
from bpflow.store import Store
from bpflow.store.public import AlreadyStarted
from engine.instance import FAILURE, Instance
from engine.messages import N_
from engine.moves import INSTANCE_MOVES
from engine.runtime import Engine, InputError

WORKER = "worker"  # the actor of what the worker does on its own (expiry)
Within = Callable[[Op], Op]  # an op wrapped to run with more in the same step


# --------------------------------------------------------------------- start
def start(store: Store, caller: Caller, template: str, inputs: dict[str, Any] | None = None,
          version: int | None = None, key: str | None = None) -> tuple[Instance, bool]:
    """Start `template` for the caller (who must be among its starters): (the instance,
    whether this call started it). With a `key` (an Idempotency-Key), the same key from
    the same user gives the instance it started first, also when sent at the same moment."""
    iid = None if key is None else store.keyed_id(caller.id, key)
    if iid is not None:
        try:
            return _first(store.get(iid), caller), False
        except NotFound:
            pass  # not started yet
    try:
        return store.start(template, inputs, caller.as_user(), version, instance_id=iid,
                           admit=lambda t: startable(caller, t)), True
    except AlreadyStarted as exc:  # the same key, at the same moment
        return _first(exc.instance, caller), False


async def start_async(store: Store, caller: Caller, template: str,
                      inputs: dict[str, Any] | None = None, version: int | None = None,
                      key: str | None = None) -> tuple[Instance, bool]:
    """`start` for an event loop (the commit is awaited)."""
    iid = None if key is None else store.keyed_id(caller.id, key)
    if iid is not None:
        try:
            return _first(await asyncio.to_thread(store.get, iid), caller), False
        except NotFound:
            pass
    try:
        return await store.start_async(template, inputs, caller.as_user(), version,
                                       instance_id=iid,
                                       admit=lambda t: startable(caller, t)), True
    except AlreadyStarted as exc:
        return _first(exc.instance, caller), False


def _first(inst: Instance, caller: Caller) -> Instance:
    """The instance an earlier start with the caller's key made."""
    if inst.user.get("id") != caller.id:
        raise Conflict(N_("this Idempotency-Key names another instance"))
    return inst


# ------------------------------------------------------- complete and fail
def completing(caller: Caller, uri: str, bookmark: str, result: Any) -> Op:
    """Complete a circle that is not a form or confirmation (taking a task nobody holds)."""
    def op(engine: Engine, inst: Instance) -> None:
        take(engine, inst, uri, caller)
        engine.complete(inst, uri, bookmark, result, caller.username)
    return op


def failing(caller: Caller, uri: str, bookmark: str, reason: str) -> Op:
    def op(engine: Engine, inst: Instance) -> None:
        take(engine, inst, uri, caller)
        engine.fail(inst, uri, bookmark, reason, caller.username)
    return op


def _form(inst: Instance, uri: str, result: Any) -> dict[str, Any] | None:
    """What a form or confirmation circle is sent (its box layer checks it); None for
    any other circle. A confirmation is accepted unless the result is `false`."""
    box = inst.template.plan.nodes[uri].circle.box
    if not box.form and box.confirm is None:
        return None
    data = result if isinstance(result, dict) else {}
    if box.confirm is not None and result is not False:
        data = {"accept": True, **data}
    return data


def complete(store: Store, caller: Caller, iid: str, uri: str, bookmark: str, result: Any,
             client: str | None = None) -> Instance:
    """The caller completes circle `uri`: its assignee, or a candidate while nobody holds
    it (then completing claims it), checked in the step on the instance as it is then."""
    inst = visible(store, caller, iid)
    drivable(caller, inst, uri, answer=True)
    data = _form(inst, uri, result)
    if data is not None:
        return Interactions(store).submit(iid, uri, bookmark, data, caller.username, client,
                                          caller)
    return store.apply(iid, returning(completing(caller, uri, bookmark, result)))


async def complete_async(store: Store, caller: Caller, iid: str, uri: str, bookmark: str,
                         result: Any, client: str | None = None) -> Instance:
    inst = await visible_async(store, caller, iid)
    drivable(caller, inst, uri, answer=True)
    data = _form(inst, uri, result)
    if data is not None:
        return await Interactions(store).submit_async(iid, uri, bookmark, data,
                                                      caller.username, client, caller)
    return await store.apply_async(iid, returning(completing(caller, uri, bookmark,
                                                             result)))


def submit(store: Store, caller: Caller, iid: str, uri: str, bookmark: str,
           data: dict[str, Any]) -> Instance:
    """A person sends the form (or confirmation) of circle `uri` from a page: validated
    and decided inside the step (`bpflow.interactions`)."""
    visible(store, caller, iid)
    return Interactions(store).submit(iid, uri, bookmark, data, caller.username,
                                      caller=caller)


def fail(store: Store, caller: Caller, iid: str, uri: str, bookmark: str,
         reason: str) -> Instance:
    drivable(caller, visible(store, caller, iid), uri)
    return store.apply(iid, returning(failing(caller, uri, bookmark, reason)))


async def fail_async(store: Store, caller: Caller, iid: str, uri: str, bookmark: str,
                     reason: str) -> Instance:
    drivable(caller, await visible_async(store, caller, iid), uri)
    return await store.apply_async(iid, returning(failing(caller, uri, bookmark, reason)))


# ----------------------------------------------- reset, suspend, resume, abort
def levels_of(scope: str, levels: int | None) -> int | None:
    """The levels a reset of `scope` goes up (InputError when 'levels' names none)."""
    if scope == "levels" and levels is None:
        raise InputError(N_("scope 'levels' needs levels (0 or more)"))
    return levels


def _controlled(caller: Caller | None, inst: Instance) -> None:
    """The flow's starter or an admin controls it (None: the worker, on its own)."""
    if caller is not None and not access.may_act(caller, inst):
        raise Forbidden(N_("only the flow's starter (or an admin) may do this"))


def resetting(caller: Caller, uri: str, scope: str, levels: int | None) -> Op:
    levels = levels_of(scope, levels)

    def op(engine: Engine, inst: Instance) -> None:
        _controlled(caller, inst)
        if uri not in inst.template.plan.nodes:
            raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
        engine.reset(inst, uri, scope, levels, caller.username)
    return op


def retrying(caller: Caller, circle: str | None = None) -> Op:
    """Retry an incident: reset its failed circle (`circle`, or every failed one) with
    scope `self`, as an admin would by hand (SPEC §18's bulk retry)."""
    def op(engine: Engine, inst: Instance) -> None:
        _controlled(caller, inst)
        failed = [cid for cid, run in inst.circles.items() if run.state == FAILURE
                  and (circle is None or cid == circle)]
        if not failed:
            raise Conflict(N_("the instance has no failed circle to retry"))
        for cid in failed:
            if inst.circles[cid].state == FAILURE:  # not reset with an earlier one
                engine.reset(inst, cid, "self", None, caller.username)
    return op


def controlling(caller: Caller | None, move: str, reason: str | None = None) -> Op:
    """Suspend, resume or abort the flow (the engine's instance moves); `caller` None is
    the worker acting on its own."""
    if move not in INSTANCE_MOVES:
        raise InputError(N_("unknown move '%(move)s' (expected %(moves)s)", move=move,
                            moves=", ".join(INSTANCE_MOVES)))

    def op(engine: Engine, inst: Instance) -> None:
        _controlled(caller, inst)
        actor = WORKER if caller is None else caller.username
        if move == "abort":
            engine.abort(inst, reason or "aborted", actor)
        else:
            getattr(engine, move)(inst, actor)
    return op


def reset_preview(store: Store, caller: Caller, iid: str, uri: str, scope: str,
                  levels: int | None) -> list[str]:
    """The circles a reset would send back to waiting (nothing changes)."""
    inst = access.acting(caller, store.get(iid))
    if uri not in inst.circles:
        raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
    return store.engine.reset_preview(inst, uri, scope, levels_of(scope, levels))


def reset(store: Store, caller: Caller, iid: str, uri: str, scope: str = "self",
          levels: int | None = None) -> Instance:
    return step(store, caller, iid, resetting(caller, uri, scope, levels))


async def reset_async(store: Store, caller: Caller, iid: str, uri: str, scope: str = "self",
                      levels: int | None = None) -> Instance:
    return await step_async(store, caller, iid, resetting(caller, uri, scope, levels))


def retry(store: Store, caller: Caller, iid: str, circle: str | None = None,
          within: Within | None = None) -> Instance:
    """Reset the instance's failed circle (`retrying`); `within` wraps the move's op (a
    bulk operation's check and mark, in the same step)."""
    op = retrying(caller, circle)
    return step(store, caller, iid, within(op) if within else op)


def control(store: Store, caller: Caller, iid: str, move: str,
            reason: str | None = None, within: Within | None = None) -> Instance:
    """Suspend, resume or abort (`move`) for the caller; an aborted flow asks nobody any
    more (its undecided approval mail is closed). `within` wraps the move's op (a bulk
    operation's check and mark, in the same step)."""
    op = controlling(caller, move, reason)
    inst = step(store, caller, iid, within(op) if within else op)
    _over(store, iid, move)
    return inst


async def control_async(store: Store, caller: Caller, iid: str, move: str,
                        reason: str | None = None) -> Instance:
    inst = await step_async(store, caller, iid, controlling(caller, move, reason))
    await asyncio.to_thread(_over, store, iid, move)
    return inst


def expire(store: Store, iid: str, reason: str) -> Instance:
    """The worker terminates an instance past its template's `stop_at` (no caller), its
    approval mail closed as any abort's."""
    inst = store.apply(iid, returning(controlling(None, "abort", reason)))
    _over(store, iid, "abort")
    return inst


def _over(store: Store, iid: str, move: str) -> None:
    """After an abort nobody is asked about the flow any more: its undecided approval
    mail is closed (the one place that does it)."""
    if move == "abort":
        Mailbox(store).close_instance(iid)
