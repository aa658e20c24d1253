"""Two processes racing on an approval's round on PostgreSQL: one adds a signer to ann's
mail while the other takes ann's decision; each race is applied once (SPEC §15)."""

from __future__ import annotations

import pytest

from bpflow.errors import Conflict
from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.worker import Worker
from tests.conftest import SECRET, raced
from tests.services.helpers import approval_flow, mark, users
from tests.services.test_rounds import PEOPLE, check_race

RACES = 6


def one_side(url: str, side: str, where: str, mails: list[int], go, out) -> None:
    """Add dan to each of ann's mails (`side` "add") or approve each ("decide")."""
    store = Store(url, secret=SECRET)
    mb, ann = Mailbox(store), store.user("ann")
    outcomes = []
    try:
        go.wait(60)
        for mail_id in mails:
            try:
                if side == "add":
                    mb.add_signers(mail_id, ann, ["dan"], where)
                else:
                    mb.decide(mail_id, ann, "approved")
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
                outcomes.append(type(exc).__name__)
    finally:
        store.close()
    out.put((side, outcomes))


@pytest.mark.parametrize("where", ["before", "after", "with"])
def test_two_processes_add_and_decide_once(db_url, store, where):
    if not db_url.startswith("postgresql"):
        pytest.skip("the two-process race runs on PostgreSQL (SQLite: the thread test)")
    people = users(store, *PEOPLE)
    store.put_template(approval_flow(["ann", "cid"], "any"))
    units, iids = Interactions(store), []
    for _ in range(RACES):
        iid = store.start("expense", {}, people["bob"]).id
        units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 120})
        iids.append(iid)
    Worker(store).run_once()
    by_instance = {m["instance"]: m["id"] for m in Mailbox(store).inbox(people["ann"],
                                                                        kind="approval")}
    mails = [by_instance[iid] for iid in iids]
    results = raced(one_side, {side: (db_url, side, where, mails) for side in ("add", "decide")})
    for i, iid in enumerate(iids):
        outcomes = {side: (Conflict("refused") if results[side][i] == "Conflict" else
                           RuntimeError(results[side][i]) if results[side][i] else {})
                    for side in ("add", "decide")}
        assert all(not isinstance(o, RuntimeError) for o in outcomes.values()), outcomes
        check_race(store, iid, outcomes, where)
