"""The hub of changes (`bpflow.store.changes`): in-process fan-out to subscribers on their
own event loop, from any thread; on PostgreSQL, from one process's hub to another's; on an
SQLite file, another process's writes noticed by its data version."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bpflow.store.changes import (
    EVERYTHING,
    GATHER_S,
    PENDING_MAX,
    Change,
    Hub,
    PgHub,
    SqliteHub,
    instance_key,
    task_keys,
)
from tests.conftest import PG_URL, run_async

WAIT_S = 5.0  # a generous bound: a change arrives long before


def test_a_change_published_on_another_thread_wakes_its_subscriber():
    hub = Hub()

    async def main():
        with hub.subscribe([instance_key("i1")]) as sub:
            thread = threading.Thread(target=hub.publish, args=([Change("i1", 7, "t")],))
            thread.start()
            got = await sub.next(WAIT_S)
            thread.join()
            return got
    assert run_async(main()) == [Change("i1", 7, "t")]


def test_a_subscriber_hears_only_its_keys():
    hub = Hub()

    async def main():
        with hub.subscribe([instance_key("mine")]) as sub:
            hub.publish([Change("other", 3, "t")])
            assert await sub.next(0.2) == []
            hub.publish([Change("mine", 4, "t")])
            return await sub.next(WAIT_S)
    assert [c.instance for c in run_async(main())] == ["mine"]


def test_changes_reach_every_subscriber_of_their_keys_each_on_its_loop():
    hub = Hub()
    ready, results = threading.Barrier(3), []

    async def follow():
        with hub.subscribe([instance_key("i1")]) as sub:
            ready.wait()
            results.append(await sub.next(WAIT_S))

    threads = [threading.Thread(target=run_async, args=(follow(),)) for _ in range(2)]
    for t in threads:
        t.start()
    ready.wait()
    hub.publish([Change("i1", 1, "t")])
    for t in threads:
        t.join()
    assert results == [[Change("i1", 1, "t")]] * 2


def test_the_tasks_tab_hears_the_lists_of_its_person_and_roles():
    hub = Hub()
    keys = task_keys("acme", "fred", ["finance"])

    async def main():
        with hub.subscribe(keys) as sub:
            hub.publish([Change("i1", 2, "acme", frozenset({"r:sales"})),
                         Change("i2", 2, "other", frozenset({"r:finance"}))])
            assert await sub.next(0.2) == []  # neither his lists nor his tenant
            hub.publish([Change("i3", 5, "acme", frozenset({"r:finance", "u:gina"}))])
            first = await sub.next(WAIT_S)
            hub.publish([Change("", 0, "acme", frozenset({"*"}))])  # a crowd of starts
            return first, await sub.next(WAIT_S)
    first, crowd = run_async(main())
    assert [c.instance for c in first] == ["i3"] and len(crowd) == 1


def test_everything_wakes_every_subscriber_and_a_backlog_becomes_everything():
    hub = Hub()

    async def main():
        with hub.subscribe([instance_key("a")]) as a, hub.subscribe(task_keys("t", "u", [])) as b:
            hub.deliver([EVERYTHING])
            assert await a.next(WAIT_S) == [EVERYTHING] == await b.next(WAIT_S)
            hub.publish([Change("a", n, "t") for n in range(PENDING_MAX + 1)])
            return await a.next(WAIT_S)
    assert run_async(main()) == [EVERYTHING]


def test_a_closed_subscription_is_forgotten():
    hub = Hub()

    async def main():
        with hub.subscribe([instance_key("a")]):
            assert hub.subscribers() == 1
        hub.publish([Change("a", 1, "t")])
        return hub.subscribers()
    assert run_async(main()) == 0


@pytest.fixture
def pg_hubs(pg_available):
    """Two hubs on the PostgreSQL database: two processes' views."""
    if pg_available:
        pytest.skip(f"SKIPPING POSTGRESQL TESTS: {pg_available}")
    conninfo = make_url(PG_URL).set(drivername="postgresql").render_as_string(
        hide_password=False)
    hubs = PgHub(conninfo), PgHub(conninfo)
    yield hubs
    for hub in hubs:
        hub.close()


def test_a_change_notified_by_one_process_reaches_the_subscribers_of_another(pg_hubs):
    sender, receiver = pg_hubs

    async def main():
        with receiver.subscribe([instance_key("far")]) as far, \
                sender.subscribe([instance_key("far")]) as near:
            assert await asyncio.to_thread(receiver.listening.wait, WAIT_S)
            assert await asyncio.to_thread(sender.listening.wait, WAIT_S)
            sender.publish([Change("far", 9, "t", frozenset({"r:finance"}))])
            got = await far.next(WAIT_S)
            mine = await near.next(WAIT_S)
            assert await near.next(0.5) == []  # its own notification is not heard twice
            return got, mine
    got, mine = run_async(main())
    assert got == mine == [Change("far", 9, "t", frozenset({"r:finance"}))]


def test_many_changes_travel_in_notifications_under_the_size_limit(pg_hubs):
    sender, _ = pg_hubs
    changes = [Change(f"{n:032d}", n, "tenant", frozenset({"r:finance", f"u:user{n}"}))
               for n in range(400)]
    payloads = sender.payloads(changes)
    assert len(payloads) > 1 and all(len(p.encode()) < 8000 for p in payloads)


def test_a_steady_stream_of_changes_is_gathered_into_few_notifications(pg_hubs):
    """One flow's steps publish one change each, ~1,000 a second: they go in at most one
    notification round trip every GATHER_S, and every one still arrives."""
    sender, receiver = pg_hubs
    sends = []
    send = sender._send
    sender._send = lambda conn, payloads: (sends.append(len(payloads)), send(conn, payloads))[1]
    count = 200  # under PENDING_MAX: the subscriber reads them after

    async def main():
        with receiver.subscribe([instance_key(f"s{n}") for n in range(count)]) as sub:
            assert await asyncio.to_thread(receiver.listening.wait, WAIT_S)
            start = time.monotonic()
            for n in range(count):
                sender.publish([Change(f"s{n}", 1, "t")])
                await asyncio.to_thread(time.sleep, 0.0005)
            elapsed = time.monotonic() - start
            got: list[Change] = []
            while len(got) < count and (more := await sub.next(WAIT_S)):
                got.extend(more)
            return elapsed, got
    elapsed, got = run_async(main())
    assert sorted(c.instance for c in got) == sorted(f"s{n}" for n in range(count))
    assert len(sends) <= elapsed / GATHER_S + 2, (len(sends), elapsed)


def test_another_process_writing_the_sqlite_file_tells_every_subscriber(tmp_path):
    path = str(tmp_path / "shared.db")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (v INTEGER)")
    hub = SqliteHub(path)

    def write():  # a connection of its own, as another process has
        with contextlib.closing(sqlite3.connect(path)) as other, other:
            other.execute("INSERT INTO t VALUES (1)")

    async def main():
        with hub.subscribe([instance_key("a")]) as sub:
            assert await asyncio.to_thread(hub.listening.wait, WAIT_S)
            await asyncio.to_thread(write)
            return await sub.next(WAIT_S)
    try:
        assert run_async(main()) == [EVERYTHING]
    finally:
        hub.close()


def test_after_losing_its_connection_the_listener_tells_everyone_to_look_again(pg_hubs):
    _, receiver = pg_hubs

    async def main():
        with receiver.subscribe([instance_key("a")]) as sub:
            assert await asyncio.to_thread(receiver.listening.wait, WAIT_S)
            admin = create_engine(PG_URL)
            with admin.connect() as conn:  # the server drops the listening session
                conn.execute(text("SELECT pg_terminate_backend(:pid)"),
                             {"pid": receiver.listener_pid})
            admin.dispose()
            return await sub.next(WAIT_S)
    assert run_async(main()) == [EVERYTHING]


def test_a_notifications_transaction_does_not_wait_for_the_disk(pg_hubs):
    """The sending connection commits without waiting for its WAL to be flushed (a
    notification is a hint kept nowhere), and what it sends still arrives."""
    sender, receiver = pg_hubs

    async def main():
        with receiver.subscribe([instance_key("quick")]) as sub:
            assert await asyncio.to_thread(receiver.listening.wait, WAIT_S)
            conn = await asyncio.to_thread(
                sender._send, None, sender.payloads([Change("quick", 1, "t")]))
            try:
                setting = conn.execute("SHOW synchronous_commit").fetchone()[0]
            finally:
                conn.close()
            return setting, await sub.next(WAIT_S)
    setting, got = run_async(main())
    assert setting == "off"
    assert [c.instance for c in got] == ["quick"]
