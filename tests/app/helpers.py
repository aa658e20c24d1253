"""Helpers for state-handler tests."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from tests.conftest import run_async


async def _drained(events: Any) -> list[Any]:
    return [item async for item in events]


def run(result: Any) -> list[Any]:
    """Drive a handler's result to the end (generators yield events; an async handler's
    coroutine or generator runs on an event loop); the events."""
    if inspect.iscoroutine(result):
        result = run_async(result)
    elif inspect.isasyncgen(result):
        result = iter(run_async(_drained(result)))
    if hasattr(result, "__next__"):
        out = []
        for item in result:
            out.extend(item if isinstance(item, list) else [item] if item else [])
        return out
    return result if isinstance(result, list) else [result] if result else []


WAIT_S = 5.0  # a generous bound for a pushed change to reach a page


def follow_while(page: Any, step: Callable[[], Any], until: Callable[[], bool],
                 leave: Callable[[], Any]) -> None:
    """Run `page`'s background follow; once it listens, make `step` on another thread
    (another request, another process's view); wait until the page shows it (`until`,
    within WAIT_S), then `leave` the page: the follow ends by itself."""
    from bpflow.backend import get_store
    hub = get_store().changes

    async def settle(done: Callable[[], bool], task: asyncio.Task) -> None:
        end = asyncio.get_running_loop().time() + WAIT_S
        while not done():
            if task.done():
                task.result()  # its error, if it failed
            assert asyncio.get_running_loop().time() < end, "the page did not follow"
            await asyncio.sleep(0.02)

    async def main() -> None:
        # what Reflex runs for `yield State.follow` (a background event)
        task = asyncio.create_task(type(page).follow.fn(page))
        await settle(lambda: hub.subscribers() > 0, task)
        await asyncio.to_thread(step)
        await settle(until, task)
        leave()
        await asyncio.wait_for(task, WAIT_S)
        assert hub.subscribers() == 0
    run_async(main())
