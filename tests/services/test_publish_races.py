"""Two designers publishing the same template at the same moment from two processes
(SPEC §16, scaled out: two backends on one database), SQLite and PostgreSQL: both
publishes succeed, the version is made once, and the template's layout is one row
holding one side's positions whole, never refused because the other side wrote it."""

from __future__ import annotations

import pytest

from bpflow import drafts
from bpflow.access import Caller
from bpflow.store import Store
from tests.conftest import SECRET, raced
from tests.services.test_drafts import SIMPLE, moved, people

ROUNDS = 12  # templates raced, one publish of each per side


def body(i: int) -> dict:
    return {**SIMPLE, "name": f"race-{i}"}


def placed(i: int, side: str, change: bool) -> dict:
    """Round `i`'s body as `side` arranged it (each side its own positions), its first
    circle described when `change` (a new version)."""
    x = 100 if side == "dee" else 700
    out = moved(body(i), a=(x, i), end=(x + 200, i))
    if change:
        out["circles"][0] = {**out["circles"][0], "description": "changed"}
    return out


def one_side(url: str, side: str, ids: list[int], go, out) -> None:
    """Publish each of `side`'s drafts, all sides meeting at the barrier before each."""
    store = Store(url, secret=SECRET)
    caller = Caller.of(store.user(side))
    outcomes: list[object] = []
    try:
        for draft_id in ids:
            go.wait(60)
            try:
                outcomes.append(drafts.publish(store, caller, draft_id))
            except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
                outcomes.append(f"{type(exc).__name__}: {exc}")
    finally:
        store.close()
    out.put((side, outcomes))


@pytest.mark.parametrize("dan", ["moves", "changes"])
def test_two_processes_publish_one_template_at_once(store, db_url, dan):
    """Version 1 was uploaded without positions (no layout row yet); dee moves its
    circles, and at the same moment dan moves them too ("moves") or also changes a
    circle ("changes": a new version, made in the transaction that keeps the layout)."""
    who = people(store)
    for i in range(ROUNDS):
        store.put_template(body(i))
    ids = {side: [drafts.create_draft(store, who[side], placed(
        i, side, side == "dan" and dan == "changes")).id for i in range(ROUNDS)]
        for side in ("dee", "dan")}
    results = raced(one_side, {side: (db_url, side, ids[side]) for side in ids})
    for i in range(ROUNDS):
        got = {side: results[side][i] for side in ids}
        name = f"race-{i}"
        versions = store.template_versions()[name]
        if dan == "moves":
            assert got == dict.fromkeys(ids, (name, 1, False)), got
            assert versions == [1]
        else:  # dan's change is version 2; dee's positions alone, unless they came after
            # it: then dee's body (version 1's meaning) differs from the latest, version 3
            assert got["dan"] == (name, 2, True), got
            assert got["dee"] in ((name, 1, False), (name, 3, True)), got
            assert versions == [1, 2] + ([3] if got["dee"][2] else [])
        assert store.layout(name) in ({"a": {"x": x, "y": i}, "end": {"x": x + 200, "y": i}}
                                      for x in (100, 700))
