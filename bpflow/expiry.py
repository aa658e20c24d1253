"""Expiry (SPEC §11, Busybee's stopAt): a template version with `stop_at` takes no starts
after it (`Steps._startable_row` refuses them), and its instances still running, failed or
suspended then are terminated by the worker with the reason `expired`. A draft's sandbox
(SPEC §16 "Try it") is deleted a day after it started (`bpflow.sandbox.KEPT`).

`expire` is one of the worker's duties: each round it terminates a bounded batch of
expired instances of every tenant (the worker's store sees them all), each with the abort
of `bpflow.moves` (which closes its undecided approval mail).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from bpflow import moves
from bpflow.errors import NotFound
from bpflow.sandbox import KEPT
from engine.errors import TransitionError

if TYPE_CHECKING:
    from bpflow.store import Store

log = logging.getLogger("bpflow.expiry")

REASON = "expired"
BATCH = 100  # instances terminated per worker round


class Keeper(Protocol):
    """What the expiry duty needs of the worker running it (its store, every tenant's),
    so that this module need not know the worker."""

    @property
    def store(self) -> Store: ...


def expire(worker: Keeper, limit: int = BATCH) -> int:
    """Terminate up to `limit` instances past their template version's `stop_at`; how
    many were terminated."""
    done = 0
    for iid in worker.store.expired(limit):
        try:
            moves.expire(worker.store, iid, REASON)
        except (TransitionError, NotFound):  # completed or aborted meanwhile
            continue
        done += 1
    if done:
        log.info("terminated %d expired instance(s)", done)
    swept = worker.store.sweep_sandboxes(worker.store.clock() - KEPT)
    if swept:
        log.info("deleted %d sandbox(es) of drafts tried a day ago", swept)
    return done + swept
