"""How a move runs: the caller must see the instance (else it is not found, as
everywhere), then the move's op is one durable step, on a thread or on an event loop.

An op is built once per move (`Op`: it asks `bpflow.access` inside, on the instance as
the step sees it) and run by `step` or `step_async`, so each move is a rule plus two thin
twins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bpflow import access
from bpflow.access import Caller
from bpflow.store import Store
from engine.instance import Instance
from engine.runtime import Engine

Op = Callable[[Engine, Instance], None]


def returning(op: Op) -> Callable[[Engine, Instance], Instance]:
    """`op` answering the instance it changed (what a move's step returns)."""
    def run(engine: Engine, inst: Instance) -> Instance:
        op(engine, inst)
        return inst
    return run


def visible(store: Store, caller: Caller, iid: str, inst: Instance | None = None) -> Instance:
    """The instance, NotFound unless the caller may see it (a cached copy settles it for
    its starter and admins; who else may see it is read from its state now)."""
    if inst is None:
        inst = store.peek(iid)
    if access.may_act(caller, inst):
        return inst
    inst = store.get(iid)
    return access.seeing(caller, inst, lambda: any(
        store.mail_about(uid, iid) for uid in access.mail_ids(caller, inst.template.name)))


async def visible_async(store: Store, caller: Caller, iid: str) -> Instance:
    """`visible` for an event loop: the instance's state is read on a thread, when needed."""
    inst = await store.peek_async(iid)
    if access.may_act(caller, inst):
        return inst
    return await asyncio.to_thread(visible, store, caller, iid, inst)


def step(store: Store, caller: Caller, iid: str, op: Op) -> Instance:
    """`op` as one durable step on this thread, for a caller who may see the instance."""
    visible(store, caller, iid)
    return store.apply(iid, returning(op))


async def step_async(store: Store, caller: Caller, iid: str, op: Op) -> Instance:
    """`step` for an event loop: the commit is awaited."""
    await visible_async(store, caller, iid)
    return await store.apply_async(iid, returning(op))
