"""SQLite group commit from the event loop (`LoopWriter`) and the async store operations
the API uses."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest

from bpflow.store import NotFound, Store
from bpflow.store.migrate import upgrade
from engine.errors import TransitionError
from tests.conftest import SECRET, run_async

FLOW = {"name": "pair", "circles": [
    {"uri": "a", "box": {"form": [{"name": "x", "type": "number"}]}},
    {"uri": "b", "deps": [["a"]]}]}


@pytest.fixture
def sqlite_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'bpflow.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET)
    store.put_template(FLOW)
    store.add_user("u", "pw-u")
    yield store
    store.close()


USER = {"id": 1, "username": "u", "roles": ["user"]}


def path_of(store: Store) -> str:
    return store.db.url.database


def writer(store: Store, loop: asyncio.AbstractEventLoop):
    return store.driver.loop_writer(loop)


def test_concurrent_steps_share_commits_and_are_all_durable(sqlite_store):
    async def main():
        insts = await asyncio.gather(*(sqlite_store.start_async("pair", user=USER)
                                       for _ in range(60)))
        done = await asyncio.gather(*(sqlite_store.apply_async(
            i.id, lambda e, inst: (e.complete(inst, "a", e.bookmark(inst, "a"), {"x": 1}),
                                   inst)[1]) for i in insts))
        return insts, done, writer(sqlite_store, asyncio.get_running_loop())

    insts, done, w = run_async(main())
    assert all(i.status == "completed" for i in done)
    assert w.jobs == 120 and w.commits < 120  # steps that arrived together shared a commit
    other = Store(f"sqlite:///{path_of(sqlite_store)}", secret=SECRET)  # another reader
    try:
        assert {other.get(i.id).status for i in insts} == {"completed"}
    finally:
        other.close()


def test_a_failing_job_is_undone_alone(sqlite_store):
    def insert(value):
        return lambda conn: conn.execute("INSERT INTO users (username, password_hash, roles,"
                                         " created_at) VALUES (?, 'x', '[]', '2026-01-01')",
                                         (value,))

    def boom(conn):
        conn.execute("INSERT INTO users (username, password_hash, roles, created_at)"
                     " VALUES ('doomed', 'x', '[]', '2026-01-01')")
        raise RuntimeError("this job fails after writing")

    async def main():
        return await asyncio.gather(sqlite_store.driver.run(insert("u1")),
                                    sqlite_store.driver.run(boom),
                                    sqlite_store.driver.run(insert("u2")),
                                    return_exceptions=True)

    outcomes = run_async(main())
    assert isinstance(outcomes[1], RuntimeError)
    assert not isinstance(outcomes[0], Exception) and not isinstance(outcomes[2], Exception)
    assert sqlite_store.user("u1") and sqlite_store.user("u2")
    assert sqlite_store.user("doomed") is None


def test_a_held_write_lock_delays_the_step_without_blocking_the_loop(sqlite_store):
    inst = sqlite_store.start("pair", user=USER)
    blocker = sqlite3.connect(path_of(sqlite_store), isolation_level=None,
                              check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    seen = {"ticks": 0, "began": time.monotonic()}

    def release() -> None:
        """COMMIT once the step has waited 0.3 s and the loop ticked 15 times meanwhile (a
        busy machine slows the ticks), or after 10 s (a blocked loop: too few ticks)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (
                seen["ticks"] >= 15 and time.monotonic() - seen["began"] >= 0.3):
            time.sleep(0.01)
        blocker.execute("COMMIT")

    async def main():
        async def ticker():
            while True:
                seen["ticks"] += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        seen["began"] = time.monotonic()
        threading.Thread(target=release).start()
        done = await sqlite_store.apply_async(inst.id, lambda e, i: (
            e.complete(i, "a", e.bookmark(i, "a"), {"x": 2}), i)[1])
        task.cancel()
        return done, time.monotonic() - seen["began"], seen["ticks"]

    done, waited, ticks = run_async(main())
    blocker.close()
    assert done.status == "completed"
    assert waited >= 0.25  # it did wait for the lock ...
    assert ticks >= 15  # ... while the loop kept running other work


def test_a_write_lock_never_released_fails_the_step_in_time(sqlite_store, monkeypatch):
    monkeypatch.setattr("bpflow.store.connection.WRITE_LOCK_TIMEOUT_S", 0.3)
    inst = sqlite_store.start("pair", user=USER)
    blocker = sqlite3.connect(path_of(sqlite_store), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            run_async(sqlite_store.apply_async(inst.id, lambda e, i: (
                e.complete(i, "a", e.bookmark(i, "a"), {"x": 2}), i)[1]))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert sqlite_store.get(inst.id).circles["a"].state == "waiting"


def test_the_same_bookmark_twice_at_once_completes_once(sqlite_store):
    inst = sqlite_store.start("pair", user=USER)
    mark = sqlite_store.engine.bookmark(inst, "a")

    async def main():
        return await asyncio.gather(*(sqlite_store.apply_async(inst.id, lambda e, i: (
            e.complete(i, "a", mark, {"x": 3}), i)[1]) for _ in range(8)),
            return_exceptions=True)

    outcomes = run_async(main())
    assert sum(not isinstance(o, Exception) for o in outcomes) == 1
    assert all(isinstance(o, TransitionError) for o in outcomes if isinstance(o, Exception))
    moves = [e for e in sqlite_store.history(inst.id) if e["circle"] == "a"
             and (e.get("after") or {}).get("state") == "success"]
    assert len(moves) == 1
    assert sqlite_store.get(inst.id).circles["a"].result == {"x": 3}


def test_async_operations_refuse_what_does_not_exist(sqlite_store):
    async def main():
        with pytest.raises(NotFound):
            await sqlite_store.apply_async("missing", lambda e, i: i)
        with pytest.raises(NotFound):
            await sqlite_store.peek_async("missing")
        with pytest.raises(NotFound):
            await sqlite_store.start_async("no-such-template")
    run_async(main())



def test_loop_writers_one_a_loop_and_none_inherited_through_a_fork():
    """A loop's writer is made once; a closed loop's is closed when another loop comes;
    a forked child (Granian forks its workers) makes its own instead of using the
    parent's, whose threads did not come with it."""
    import os

    from bpflow.store.writing import LoopWriters

    class Made:
        closed = False

        def close(self):
            self.closed = True
    writers: LoopWriters[Made] = LoopWriters()
    old, loop = asyncio.new_event_loop(), asyncio.new_event_loop()
    first = writers.of(old, Made)
    assert writers.of(old, Made) is first and writers.get(loop) is None
    old.close()
    mine = writers.of(loop, Made)
    assert first.closed and writers.get(old) is None and writers.get(loop) is mine
    pid = os.fork()
    if pid == 0:  # the child: only this check, then out without the parent's cleanup
        os._exit(0 if writers.of(loop, Made) is not mine and not mine.closed else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert writers.of(loop, Made) is mine
    writers.close()
    loop.close()
    assert mine.closed
