"""Steps and starts publish what they changed once committed (`bpflow.store.changes`), so
open pages re-read on a push instead of polling: through any Store object on the database,
the worker's steps included, and on PostgreSQL from another process as well."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

from bpflow.store import Store
from bpflow.store.changes import EVERYTHING, Change, instance_key, task_keys, tasks_key
from bpflow.worker import Worker
from tests.conftest import SECRET, run_async

WAIT_S = 5.0  # a generous bound: a change arrives long before
PLAIN = {"name": "plain", "kind": "linear", "circles": [
    {"uri": "a", "box": {"form": [{"name": "v", "type": "integer"}]}}, {"uri": "b"}]}
TASK = {"name": "task", "kind": "linear", "circles": [
    {"uri": "review", "assign": {"roles": ["finance"]},
     "box": {"form": [{"name": "v", "type": "integer"}]}}]}
TIMER = {"name": "timer", "kind": "linear", "circles": [
    {"uri": "wait", "box": {"action": {"type": "timer", "delay": 60}}}, {"uri": "b"}]}
ANN = {"id": None, "username": "ann"}


def follow(store: Store, keys, step) -> list[Change]:
    """The changes of `keys` a subscriber of `store`'s hub hears while `step` runs on
    another thread (as a request or the worker would)."""
    async def main():
        with store.changes.subscribe(keys) as sub:
            thread = threading.Thread(target=step)
            thread.start()
            got = await sub.next(WAIT_S)
            await asyncio.to_thread(thread.join)
            return got + await sub.next(0.2)
    return run_async(main())


def test_a_step_through_another_store_reaches_this_ones_subscribers(store, db_url):
    store.put_template(PLAIN)
    inst = store.start("plain", {}, ANN)
    other = Store(db_url, secret=SECRET)  # another view of the same database
    try:
        got = follow(store, [instance_key(inst.id)], lambda: other.complete(
            inst.id, "a", other.engine.bookmark(other.get(inst.id), "a"), {"v": 1}))
    finally:
        other.close()
    assert got and got[-1].instance == inst.id and got[-1].seq == store.get(inst.id).seq


def test_a_task_opened_claimed_and_done_tells_the_lists_it_touched(store):
    store.put_template(TASK)
    started = follow(store, task_keys("default", "fred", ["finance"]),
                     lambda: store.start("task", {}, ANN))
    assert started and "r:finance" in started[0].tokens
    iid = started[0].instance
    claimed = follow(store, [tasks_key("default", "a:fred")], lambda: store.apply(
        iid, lambda e, i: e.claim(i, "review", "fred")))
    assert claimed and {"a:fred", "r:finance"} <= claimed[0].tokens


def test_the_workers_steps_publish_too(db_url):
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    store = Store(db_url, secret=SECRET, clock=lambda: now[0])
    try:
        store.put_template(TIMER)
        inst = store.start("timer", {}, ANN)
        now[0] += timedelta(minutes=2)  # the timer is due
        got = follow(store, [instance_key(inst.id)], lambda: Worker(store).run_once())
        after = store.get(inst.id)
    finally:
        store.close()
    assert after.circles["wait"].state == "success"
    assert got and got[-1].seq == after.seq


def test_a_step_of_another_process_reaches_this_ones_subscribers(store, db_url):
    """On PostgreSQL: NOTIFY from the other process, LISTEN in this one. On SQLite: the
    file's data version moved while this process wrote nothing: everything may have
    changed."""
    store.put_template(PLAIN)
    inst = store.start("plain", {}, ANN)
    script = ("import sys; from bpflow.store import Store; "
              "s = Store(sys.argv[1], secret=sys.argv[2].encode()); i = s.get(sys.argv[3]); "
              "s.complete(i.id, 'a', s.engine.bookmark(i, 'a'), {'v': 1}); s.close()")

    async def main():
        with store.changes.subscribe([instance_key(inst.id)]) as sub:
            # what a page does before its catch-up read: from here on, nothing is missed
            assert await store.changes.heard(WAIT_S)
            await asyncio.to_thread(subprocess.run, [
                sys.executable, "-c", script, db_url, SECRET.decode(), inst.id],
                check=True, timeout=120)
            return await sub.next(WAIT_S)
    got = run_async(main())
    if store.postgres:
        assert [(c.instance, c.seq) for c in got] == [(inst.id, store.get(inst.id).seq)]
    else:
        assert got == [EVERYTHING]


def test_installations_in_schemas_of_their_own_hear_only_their_own_changes(store):
    """Two PostgreSQL schemas of one database (as the tests and shared servers use them):
    a change published in one reaches the other processes of that schema, not those of
    the other schema (each schema has its own channel)."""
    if not store.postgres:
        return  # SQLite: a hub per file
    from sqlalchemy import create_engine

    from bpflow.store.changes import PgHub
    from bpflow.store.pg.pools import conninfo
    from tests.conftest import pg_schema

    def address(url: str) -> str:
        db = create_engine(url)
        try:
            return conninfo(db)
        finally:
            db.dispose()
    ours = address(str(store.db.url.render_as_string(hide_password=False)))
    with pg_schema() as elsewhere:
        sender, same, other = PgHub(ours), PgHub(ours), PgHub(address(elsewhere))
        change = Change("i1", 3, "default", frozenset({"r:finance"}))

        async def main():
            keys = [instance_key("i1")]
            with same.subscribe(keys) as near, other.subscribe(keys) as far:
                for hub in (same, other):
                    assert await asyncio.to_thread(hub.listening.wait, WAIT_S)
                sender.publish([change])
                return await near.next(WAIT_S), await far.next(1.0)
        try:
            heard, overheard = run_async(main())
        finally:
            for hub in (sender, same, other):
                hub.close()
    assert heard == [change] and overheard == []
    assert same._channel != other._channel


def test_mail_sent_read_and_decided_tells_its_addressees_inbox(store, db_url):
    """The inbox follows its mail: a mail sent to ann (through another view of the
    database: on PostgreSQL another process's NOTIFY), read, and a guest's note, each
    reach the subscribers of her mail (and the guest messages' readers)."""
    from bpflow.mailbox import Mailbox
    from bpflow.store.changes import mail_keys
    store.add_user("ann", "pw-ann-12345", ["approver"])
    ann = store.user("ann")
    keys = mail_keys(store.tenant, ann["id"])
    other = Store(db_url, secret=SECRET)
    try:
        sent: list[int] = []
        got = follow(store, keys, lambda: sent.extend(Mailbox(other).send(
            "message", {"id": None, "username": "bpflow"}, ["ann"], "Hello", "Hi")))
        assert got and any(c.instance == "" for c in got)
        assert follow(store, keys, lambda: other.mark_mail_read(sent[0]))
        assert follow(store, mail_keys(store.tenant, 0, guests=True),
                      lambda: Mailbox(other).guest_message("Eve", "Hours", "Open?", "1.2.3.4"))
    finally:
        other.close()
