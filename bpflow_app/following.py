"""How a list of work follows the store's changes (push, not poll): the one loop of the
inbox's follows (`MailState.follow`, `TasksState.follow`). A background event calls
`follow` with what its page shows: the keys it subscribes to, whether the page still shows
it, and how to read it again; the loop reads it once at the start (what committed before
the subscription), then after every change, checks every `alive` seconds (no query) that
the page is still shown and ends after `most` seconds. One follow per browser tab and
state (`_following`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from bpflow.access import Caller
from bpflow.backend import store_for
from bpflow.errors import Unauthorized
from bpflow.store.public import EVERYTHING

Keys = Callable[[Caller], list[Any]]


async def follow(state: Any, keys: Keys, shown: Callable[[], bool],
                 read: Callable[[Caller], Awaitable[None] | None], alive: float,
                 most: float) -> None:
    """Follow the changes of `keys(caller)` for `state` (a background event's state,
    with a `_following` flag), calling `read(caller)` (inside `async with state`) at the
    start and after each change while `shown()`."""
    async with state:
        if state._following:
            return
        state._following = True
        caller = state._visitor()
    loop = asyncio.get_running_loop()
    try:
        if caller is None:
            return
        hub = store_for(caller).changes
        with hub.subscribe(keys(caller)) as changes:
            await hub.heard()
            end, news = loop.time() + most, [EVERYTHING]  # first: what came before
            while loop.time() < end:
                news = news or await changes.next(alive)
                async with state:
                    if not shown():
                        break
                    if news:
                        caller = state._visitor()
                        if caller is None:
                            break
                        done = read(caller)
                        if done is not None:
                            await done
                news = []
    except Unauthorized:
        pass
    finally:
        async with state:
            state._following = False
