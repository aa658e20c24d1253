"""The round of an approval (SPEC §15): whom it asks, in which order, and when its quorum
is reached. Pure functions over the terms an attempt's mails are signed with; the
mailbox (`bpflow.mailbox`) reads and writes the mails.

The terms are the quorum, the addressees (`approvers`, everyone in the round) and their
seats: a seat is one vote of the quorum, held by a chain of people who decide in turn
(an addressee alone, or with the signers added before or after them). A seat is
approved once everyone in its chain approved, rejected once one of them rejected.

- `"all"` (会签): every seat approves; one rejection rejects.
- `"any"` (或签): the first seat decided settles the round, a rejection too.
- `N`: N seats approve; rejected once fewer than N can.
- `"sequence"` (依次): the seats in order, each asked once the one before approved.
- `{"ratio": r}` (票签): approved once approved seats / seats ≥ r; rejected once that
  can no longer be reached.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from engine.boxes import quorum_problem as quorum_problem  # the analysis's check

PLACES = ("before", "after", "with")  # where added signers go (加签)
MAX_SIGNERS = 50  # addressees of one round, added signers included
Seats = list[list[str]]


def seats_of(approvers: Sequence[str], seats: Any = None) -> Seats:
    """The seats signed (`seats`), else one per addressee (a round nobody changed)."""
    if isinstance(seats, list) and seats:
        return [[str(n) for n in chain] for chain in seats]
    return [[str(a)] for a in approvers]


def terms(quorum: Any, seats: Seats) -> dict[str, Any]:
    """What every mail of a round is signed over: the quorum, the addressees and, once
    someone's chain holds more than them, the seats."""
    out: dict[str, Any] = {"quorum": quorum, "approvers": [n for chain in seats for n in chain]}
    if any(len(chain) > 1 for chain in seats):
        out["seats"] = seats
    return out


def seat_outcome(chain: Sequence[str], decided: Mapping[str, str]) -> str | None:
    if any(decided.get(n) == "rejected" for n in chain):
        return "rejected"
    if all(decided.get(n) == "approved" for n in chain):
        return "approved"
    return None


def asked(quorum: Any, seats: Seats, decided: Mapping[str, str]) -> list[str]:
    """Who is asked by now: in each open seat (under "sequence" the seats up to the
    first not approved) its chain up to the first who has not approved."""
    out = []
    for chain in seats:
        for name in chain:
            out.append(name)
            if decided.get(name) != "approved":
                break
        if quorum == "sequence" and seat_outcome(chain, decided) != "approved":
            break
    return out


def waiting(quorum: Any, seats: Seats, decided: Mapping[str, str]) -> list[str]:
    """Who is asked and has not decided yet."""
    return [n for n in asked(quorum, seats, decided) if n not in decided]


def verdict(quorum: Any, seats: Seats, decisions: Iterable[tuple[str, str]]) -> str | None:
    """'approved', 'rejected' or None for the round, from (approver, decision) in the
    order they were taken (the first settled seat counts first: "any")."""
    decided: dict[str, str] = {}
    settled: list[str] = []
    done: set[int] = set()
    for name, decision in decisions:
        decided.setdefault(name, decision)
        for i, chain in enumerate(seats):
            if i not in done and name in chain:
                outcome = seat_outcome(chain, decided)
                if outcome is not None:
                    done.add(i)
                    settled.append(outcome)
    return quorum_verdict(quorum, len(seats), settled)


def quorum_verdict(quorum: Any, approvers: int, decisions: list[str]) -> str | None:
    """'approved', 'rejected' or None (undecided) for `approvers` seats of which
    `decisions` settled, in the order they settled."""
    yes, no = decisions.count("approved"), decisions.count("rejected")
    if quorum == "any":
        return decisions[0] if decisions else None
    if isinstance(quorum, dict):
        ratio = _ratio(quorum.get("ratio", 1))
        if yes >= ratio * approvers:
            return "approved"
        return "rejected" if approvers - no < ratio * approvers else None
    need = approvers if quorum in ("all", "sequence") else int(quorum)
    if yes >= need:
        return "approved"
    if approvers - no < need:
        return "rejected"
    return None


def _ratio(ratio: Any) -> Fraction:
    """A vote's ratio as an exact fraction (0.6 is 3/5, not the float nearest to it)."""
    return _fraction(type(ratio).__name__, ratio)  # by type too: True == 1 as a key


@lru_cache(maxsize=256)
def _fraction(kind: str, ratio: Any) -> Fraction:
    return Fraction(str(ratio))


def needed(quorum: Any, seats: int) -> int:
    """How many seats must approve."""
    if quorum == "any":
        return 1
    if isinstance(quorum, dict):
        ratio = _ratio(quorum.get("ratio", 1))
        return max(1, -(-ratio.numerator * seats // ratio.denominator))
    return seats if quorum in ("all", "sequence") else int(quorum)


def add(seats: Seats, addressee: str, names: list[str], where: str, quorum: Any) -> Seats:
    """The seats once `names` are added by `addressee` (`where`: before them in their
    chain, after them, or as seats of their own beside; under "sequence" right after the
    addressee's seat)."""
    out = [list(chain) for chain in seats]
    at = next(i for i, chain in enumerate(out) if addressee in chain)
    if where == "before":
        chain = out[at]
        j = chain.index(addressee)
        out[at] = chain[:j] + names + chain[j:]
    elif where == "after":
        chain = out[at]
        j = chain.index(addressee) + 1
        out[at] = chain[:j] + names + chain[j:]
    elif quorum == "sequence":
        out[at + 1:at + 1] = [[n] for n in names]
    else:
        out += [[n] for n in names]
    return out


def remove(seats: Seats, names: Iterable[str]) -> Seats:
    gone = set(names)
    out = [[n for n in chain if n not in gone] for chain in seats]
    return [chain for chain in out if chain]
