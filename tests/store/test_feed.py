"""The event feed (SPEC §11) read from the history, on SQLite and PostgreSQL: while two
writers (each with its own store on the same database) apply random steps, a reader
paging with small limits ends with exactly the history's rows of the feed's kinds, none
skipped, none twice, in the order a full read gives; on PostgreSQL a transaction that
commits after a later one is not skipped; `enter` and `leave` come verbatim; every
tenant reads its own."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, select, text

from bpflow.errors import Conflict
from bpflow.store import Store
from bpflow.store.feed import KINDS, BadCursor
from bpflow.store.tables import events_t
from engine.errors import TransitionError
from tests.conftest import SECRET

FLOW = {"name": "flow", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "t", "type": "string"}]}},
    {"uri": "c", "deps": [["b"]]}]}
ENTER_LEAVE = {"name": "marked", "circles": [
    {"uri": "a", "enter": {"say": "hello", "n": [1, 2.5, None, True]},
     "leave": "bye \u00e9\u00e8", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "b", "deps": [["a"]], "enter": 0, "leave": {"nested": {"deep": []}}}]}
TENANTS = itertools.count()
OP = st.sampled_from(["start", "complete", "complete", "fail", "reset", "abort"])


def read_all(store: Store, limit: int, after: str | None = None, wait_for: int = 0
             ) -> tuple[list[dict], str]:
    """Every item after `after`, page by page; on PostgreSQL a page holds back rows of
    transactions newer than the oldest one running anywhere on the server (other tests'
    too), so this reads on until `wait_for` items came (at most 60 s)."""
    items, cursor = [], after
    deadline = time.monotonic() + 60
    while True:
        page, nxt = store.feed(cursor, limit)
        items += page
        if nxt == cursor:
            if len(items) >= wait_for or time.monotonic() > deadline:
                return items, nxt
            time.sleep(0.05)
        cursor = nxt


def feed_rows(store: Store) -> list[int]:
    """The ids of the tenant's history rows of the feed's kinds, in commit order."""
    order = (events_t.c.tx, events_t.c.id) if store.postgres else (events_t.c.id,)
    with store.reader() as conn:
        return list(conn.execute(select(events_t.c.id).where(
            events_t.c.tenant == store.tenant, events_t.c.kind.in_(list(KINDS)))
            .order_by(*order)).scalars())


def apply(store: Store, ops: list[str], started: list[str]) -> None:
    user = store.user("writer-" + store.tenant)
    for op in ops:
        try:
            if op == "start" or not started:
                started.append(store.start("flow", {}, user).id)
                continue
            iid = started[-1]
            inst = store.get(iid)
            ready = store.engine.ready(inst)
            if op == "abort":
                store.apply(iid, lambda e, i: e.abort(i, "enough", actor="writer"))
            elif op == "reset":
                store.apply(iid, lambda e, i: e.reset(i, "a", actor="writer"))
            elif ready:
                mark = store.engine.bookmark(inst, ready[0])
                if op == "fail":
                    store.fail(iid, ready[0], mark, "no", actor="writer")
                else:
                    result = {"n": 1} if ready[0] == "a" else {"t": "x"}
                    store.complete(iid, ready[0], mark, result, actor="writer")
        except (TransitionError, Conflict):  # refused (e.g. reset of a finished one)
            pass


def writer(store: Store, ops: list[str], errors: list[BaseException]) -> None:
    try:
        apply(store, ops, [])
    except BaseException as exc:  # handed to the test
        errors.append(exc)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(first=st.lists(OP, min_size=1, max_size=12), second=st.lists(OP, min_size=1,
                                                                     max_size=12),
       limit=st.integers(1, 5))
def test_a_reader_paging_during_two_writers_sees_every_row_once(db_url, first, second,
                                                                limit):
    tenant = f"t{next(TENANTS)}"
    base = Store(db_url, secret=SECRET)
    other = Store(db_url, secret=SECRET)
    try:
        base.add_tenant(tenant)
        here = base.of(tenant)
        here.add_user("writer-" + tenant, "pw-writer-1", ["user"])
        here.put_template(FLOW)
        seen, cursor, errors = [], None, []
        writers = [threading.Thread(target=writer, args=(s.of(tenant), ops, errors))
                   for s, ops in ((base, first), (other, second))]
        for w in writers:
            w.start()

        def writing() -> bool:
            return any(w.is_alive() for w in writers)
        while writing():
            page, cursor = here.feed(cursor, limit)
            seen += page
        for w in writers:
            w.join()
        assert not errors, errors
        expected = feed_rows(here)
        rest, cursor = read_all(here, limit, cursor, len(expected) - len(seen))
        seen += rest
        ids = [i["id"] for i in seen]
        assert len(ids) == len(set(ids)), "an event was read twice"
        assert ids == expected, "the feed is not the history's feed rows in order"
        assert [i["id"] for i in read_all(here, 1000, wait_for=len(ids))[0]] == ids  # stable
        assert here.feed(cursor, limit) == ([], cursor)  # nothing new: next is after
        cursors = [i["cursor"] for i in seen]
        assert all(here.feed(c, 1)[0][0]["id"] == n for c, n in zip(cursors, ids[1:],
                                                                    strict=False))
    finally:
        other.close()
        base.close()


def test_enter_and_leave_come_verbatim_in_the_circles_events(store):
    store.add_user("admin", "pw-admin-1", ["admin"])
    store.put_template(ENTER_LEAVE)
    iid = store.start("marked", {}, store.user("admin")).id
    inst = store.get(iid)
    store.complete(iid, "a", store.engine.bookmark(inst, "a"), {"n": 3}, actor="admin")
    items, _ = read_all(store, 100, wait_for=6)
    got = [(i["type"], i["uri"], i["data"].get("enter"), i["data"].get("leave"))
           for i in items]
    assert got == [
        ("instance.started", None, None, None),
        ("circle.entered", "a", ENTER_LEAVE["circles"][0]["enter"], None),
        ("circle.left", "a", None, "bye \u00e9\u00e8"),
        ("circle.entered", "b", 0, None),
        ("circle.left", "b", None, {"nested": {"deep": []}}),
        ("instance.completed", None, None, None)]
    left = items[2]
    assert left["data"]["state"] == "success" and left["data"]["result"] == {"n": 3}
    assert left["instance"] == iid and left["template"] == "marked"
    assert items[0]["data"]["status"] == "running"
    assert all(i["cursor"] and i["at"].endswith("+00:00") for i in items)


def test_every_tenant_reads_its_own_events_only(store):
    store.add_tenant("acme")
    ids = {}
    for tenant in ("default", "acme"):
        s = store.of(tenant)
        s.add_user(f"w-{tenant}", "pw-writer-1", ["user"])
        s.put_template(FLOW)
        ids[tenant] = {s.start("flow", {}, s.user(f"w-{tenant}")).id for _ in range(3)}
    for tenant in ("default", "acme"):
        items, _ = read_all(store.of(tenant), 2, wait_for=6)
        assert {i["instance"] for i in items} == ids[tenant]


def test_a_cursor_not_handed_out_is_refused(store):
    for bad in ("x", "1.2.3", "-1", "1e5", " 1", "9" * 25, "٣"):
        with pytest.raises(BadCursor):
            store.feed(bad, 10)
    with pytest.raises(BadCursor):  # the other database's form
        store.feed("5" if store.postgres else "5.5", 10)


def test_a_transaction_committing_late_is_not_skipped(db_url):
    """PostgreSQL: transaction A takes its id first, B after; B commits, the reader reads,
    A commits: the reader still gets A's row (before B's, in (tx, id) order)."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer at a time: ids are in commit order")
    store = Store(db_url, secret=SECRET)
    raw = create_engine(db_url)
    try:
        store.add_user("w", "pw-writer-1", ["user"])
        store.put_template(FLOW)
        iid = store.start("flow", {}, store.user("w")).id
        items, cursor = read_all(store, 100, wait_for=2)  # the start's

        def event(seq: int) -> Any:
            return text("INSERT INTO events (tenant, instance_id, seq, at, kind, data)"
                        f" VALUES ('default', '{iid}', {seq}, now(), 'circle_ready',"
                        f" '{{\"attempt\": {seq}}}') RETURNING id, tx")
        a, b = raw.connect(), raw.connect()
        ta, tb = a.begin(), b.begin()
        a_id, a_tx = a.execute(event(100)).one()
        b_id, b_tx = b.execute(event(101)).one()
        assert a_tx < b_tx
        tb.commit()
        page, after_b = store.feed(cursor, 100)
        assert page == [] and after_b == cursor  # B waits for A, which may still commit
        ta.commit()
        page, _ = read_all(store, 100, cursor, wait_for=2)
        assert [i["id"] for i in page] == [a_id, b_id]
        a.close()
        b.close()
    finally:
        raw.dispose()
        store.close()
