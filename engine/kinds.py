"""The action kinds a box may hold, each declared once with its traits.

Everything that asks "what kind of action is this?" reads it here: the analysis (which
kinds exist), who may complete a circle by hand (`bpflow.access.may_drive`: an automatic
kind is bpflow's to run, only an admin intervenes), which circles the worker runs (its
handlers, `bpflow.actions.HANDLERS`, cover exactly `WORKER_RUN`) and what a waiting
circle keeps in `CircleRun.pending` (read by `phase.py`). Adding a box kind starts with
one line in `KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass

ENGINE, WORKER, PERSON = "engine", "worker", "person"  # who moves a circle of the kind


@dataclass(frozen=True)
class Kind:
    """One action kind.

    `runner`: the engine runs it itself while settling an instance (`runtime._enter`), the
    worker runs it through a handler, or a person drives it (the sign-in of `auth`).
    `pending`: the key its action keeps in `CircleRun.pending` while it waits for the
    outside world (None: it keeps none), which `phase.box_phase` decodes.
    """

    name: str
    runner: str
    pending: str | None = None

    @property
    def automatic(self) -> bool:
        """Whether bpflow runs it (nobody completes it by hand but an admin)."""
        return self.runner != PERSON


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("http", WORKER),
    Kind("approval", WORKER, pending="approval"),
    Kind("mail", WORKER),
    Kind("timer", ENGINE),
    Kind("flow", ENGINE),
    Kind("auth", PERSON),
    Kind("compute", ENGINE),
    Kind("signal", ENGINE, pending="signal"),
)}
ACTION_TYPES = tuple(KINDS)
WORKER_RUN = frozenset(k.name for k in KINDS.values() if k.runner == WORKER)


def automatic(kind: str | None) -> bool:
    """Whether a box with this action kind is run by bpflow, not driven by a person. No
    action is not automatic; a kind this registry does not know is (never by hand)."""
    if kind is None:
        return False
    found = KINDS.get(kind)
    return found is None or found.automatic
