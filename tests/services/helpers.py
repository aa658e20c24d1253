"""Helpers of the service tests: users, bookmarks, a worker driven until a condition
holds, and the templates several modules use."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.worker import Worker

ROOT = Path(__file__).resolve().parents[2]


def users(store: Store, *specs: str) -> dict[str, dict[str, Any]]:
    """Users from `name` or `name:role:role` specs, each with the password `pw-name`."""
    out = {}
    for spec in specs:
        name, *roles = spec.split(":")
        store.add_user(name, f"pw-{name}", roles or ["user"])
        out[name] = store.user(name)
    return out


def mark(store: Store, iid: str, cid: str) -> str:
    return store.engine.bookmark(store.get(iid), cid)


def drain(worker: Worker, until, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worker.run_once()
        if until():
            return
        time.sleep(0.05)
    raise AssertionError("the worker did not get there in time")


def http_flow(url, name="call", retry=None, circle_timeout=None, **action):
    circle = {"uri": "call", "box": {"action": {"type": "http", "method": "POST", "url": url,
                                                "json": {"n": "${workflow.input.n}"},
                                                **action}}}
    if retry is not None:
        circle["retry"] = retry
    if circle_timeout is not None:
        circle["timeout"] = circle_timeout
    return {"name": name, "circles": [circle, {"uri": "end", "deps": [["call"]]}]}


def approval_flow(to, quorum):
    return {"name": "expense", "circles": [
        {"uri": "claim", "box": {"form": [{"name": "amount", "type": "number"}]}},
        {"uri": "approve", "deps": [["claim"]],
         "box": {"action": {"type": "approval", "to": to, "quorum": quorum,
                            "subject": "Claim of ${claim.amount}"}}},
        {"uri": "end", "deps": [["approve"]]}]}


def start_approval(store: Store, units: Interactions, to, quorum):
    """bob's claim of 120 waiting for approval by `to` (ann, cid, dan are approvers)."""
    people = users(store, "bob", "ann:approver", "cid:approver", "dan:approver")
    store.put_template(approval_flow(to, quorum))
    iid = store.start("expense", {}, people["bob"]).id
    units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 120})
    Worker(store).run_once()
    return iid, people


def mail_of(store: Store, people, name):
    box = Mailbox(store).inbox(people[name], kind="approval")
    assert len(box) == 1, box
    return box[0]


# A claim whose first step fails as an HTTP action would: what bulk retries are tried on
FAILING = {"name": "claim", "kind": "linear", "circles": [
    {"uri": "a", "box": {"form": [{"name": "v", "type": "integer"}]}},
    {"uri": "b", "box": {"form": [{"name": "v", "type": "integer"}]}}]}


def failed(store: Store, n: int, reason: str = "HTTP 503") -> list[str]:
    """`n` instances of FAILING, each failed at `a` with `reason`."""
    ids = []
    for _ in range(n):
        inst = store.start("claim", {})
        store.fail(inst.id, "a", store.engine.bookmark(inst, "a"), reason, actor="t")
        ids.append(inst.id)
    return ids


def retried_exactly_once(store: Store, op_id: str, ids: list[str]) -> None:
    """The bulk retry `op_id` of the failed instances `ids` (and of no other) finished:
    a result `done` for each, one reset and one mark of the operation each."""
    from sqlalchemy import func, select

    from bpflow import operations
    from bpflow.store.tables import events_t
    op = store.operation(op_id)
    assert op["finished_at"] is not None
    assert (op["matched"], op["done"], op["refused"]) == (len(ids), len(ids), 0)
    items = store.operation_items(op_id, limit=2 * len(ids))
    assert sorted(i["instance_id"] for i in items) == sorted(ids)
    assert {i["state"] for i in items} == {"done"}
    with store.reader() as conn:
        counts = dict(conn.execute(select(events_t.c.kind, func.count()).where(
            events_t.c.kind.in_(["circle_reset", operations.MARKER]),
            events_t.c.instance_id.in_(ids)).group_by(events_t.c.kind)).all())
        per = select(func.count().label("n")).where(
            events_t.c.kind == "circle_reset", events_t.c.instance_id.in_(ids)).group_by(
            events_t.c.instance_id).subquery()
        most = conn.execute(select(func.max(per.c.n))).scalar()
    assert counts == {"circle_reset": len(ids), operations.MARKER: len(ids)}
    assert most == 1
    assert {store.get(i).circles["a"].state for i in ids[:20]} == {"waiting"}
