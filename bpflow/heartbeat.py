"""A worker's heartbeat (SPEC §14a): the leases it holds are renewed while it works on them,
so a long action (an HTTP call that takes a minute) keeps its instance, while a worker that
dies stops renewing and its work passes to another within one lease.

A lease lasts `lease_seconds()` (`BPFLOW_LEASE_SECONDS`, default 15 s). While a worker holds
leases, a thread renews all of them every third of a lease in one statement
(`Store.renew_all`); a lease found taken by another worker is marked lost (`lost`), and
the worker leaves that instance's results to its new holder.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line reads `seconds` without loading the store
    from bpflow.store import Store

log = logging.getLogger("bpflow.worker")

LEASE_ENV = "BPFLOW_LEASE_SECONDS"
DEFAULT_LEASE_S = 15.0


def lease_seconds() -> float:
    """A worker's lease: `BPFLOW_LEASE_SECONDS`, else DEFAULT_LEASE_S; ValueError when the
    variable is not a positive number of seconds."""
    raw = os.environ.get(LEASE_ENV, "").strip()
    return seconds(raw, LEASE_ENV) if raw else DEFAULT_LEASE_S


def seconds(text: str, what: str = "a duration") -> float:
    """`text` as a positive, finite number of seconds; ValueError naming `what` if not."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a positive number of seconds, not {text!r}")
    return value


class Heartbeat:
    """Renews `owner`'s leases (each `lease` seconds long) while it holds them: `hold`
    when claimed, `drop` when released. The thread that renews them starts with the first
    lease held and ends once none has been held for a whole lease."""

    def __init__(self, store: Store, owner: str, lease: float):
        self.store, self.owner, self.lease = store, owner, lease
        self._held: set[str] = set()
        self._lost: set[str] = set()
        self._changed = threading.Condition()
        self._beating = False

    def hold(self, ids: Iterable[str]) -> None:
        with self._changed:
            for iid in ids:
                self._held.add(iid)
                self._lost.discard(iid)  # held again: claimed anew
            self._changed.notify_all()
            if not self._beating:
                self._beating = True
                threading.Thread(target=self._beat, daemon=True,
                                 name=f"bpflow-heartbeat-{self.owner}").start()

    def drop(self, ids: Iterable[str]) -> None:
        with self._changed:
            for iid in ids:
                self._held.discard(iid)
                self._lost.discard(iid)
            self._changed.notify_all()

    def lost(self, instance_id: str) -> bool:
        """Whether a renewal found the instance's lease taken by another worker."""
        with self._changed:
            return instance_id in self._lost

    def _beat(self) -> None:
        while True:
            with self._changed:
                if not self._changed.wait_for(lambda: self._held, self.lease):
                    self._beating = False  # idle for a whole lease
                    return
                # a third of a lease from now (nothing to renew if all were released)
                self._changed.wait_for(lambda: not self._held, self.lease / 3)
                ids = sorted(self._held - self._lost)
            if ids:
                self._renew(ids)

    def _renew(self, ids: list[str]) -> None:
        try:
            kept = self.store.renew_all(ids, self.owner, self.lease)
        except Exception:  # the database may be briefly away: try again next beat
            log.exception("renewing %d lease(s) failed", len(ids))
            return
        gone = set(ids) - kept
        if not gone:
            return
        with self._changed:
            gone &= self._held  # a lease released meanwhile is not lost
            self._lost |= gone
        for iid in sorted(gone):
            log.warning("instance %s: lease lost to another worker; its results are left "
                        "to the new holder", iid)
