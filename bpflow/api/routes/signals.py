"""Signals (SPEC §11): POST /api/signals/{name} `{"key", "data"}` completes every circle of
the caller's tenant waiting for the signal `name` with that key, `data` as its result,
and answers how many it completed (`{"delivered": n}`; a signal nobody waits for
delivers 0 and changes nothing).

Sent by admins and `integration` users (`bpflow.access.require_signaller`). The waiting
circles are found through the signal column's index, then each is completed with its own
atomic step, awaited on the event loop (`Store.signal_async`). The short path
(`bpflow.api.hot`) serves this route too, calling `signal` by keyword.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from bpflow.access import require_signaller
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.event_schemas import SIGNAL_NAME_PATTERN, SignalIn, SignalOut
from bpflow.api.schemas import json_answer

router = APIRouter(prefix="/api", tags=["signals"])


@router.post("/signals/{name}", response_model=SignalOut,
             responses=responses(401, 403, 413, 422))
async def signal(name: Annotated[str, Path(pattern=SIGNAL_NAME_PATTERN,
                                           description="1 to 100 letters, digits and _ . : -")],
                 body: SignalIn, store: StoreDep, caller: CallerDep) -> Response:
    """Deliver a signal: every circle of the caller's tenant waiting for `name` and `key`
    completes with `data` as its result (the caller recorded as its actor). Admins and
    integration users only (403)."""
    require_signaller(caller)
    delivered = await store.signal_async(name, body.key, body.data, caller.username)
    return json_answer({"delivered": delivered})
