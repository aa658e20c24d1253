"""The PostgreSQL driver (`PgDriver`): a step in one statement, group commit from the event
loop, crowds copied with COPY; the same outcomes as the SQLAlchemy writer."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError

from bpflow.errors import NotFound
from bpflow.store import Store
from bpflow.store import crowds as crowds_module
from bpflow.store.pg import pools, statements, wire
from bpflow.store.pg.driver import PgDriver
from bpflow.store.pg.loop import LANES, MIN_BATCH
from bpflow.store.pg.wire import Job, save_job
from bpflow.store.tables import batches_t, circles_t, events_t, instances_t
from engine.errors import TransitionError
from tests.conftest import SECRET, run_async

pytestmark = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)

FLOW = {"name": "pair", "circles": [
    {"uri": "a", "box": {"form": [{"name": "x", "type": "number"}]}},
    {"uri": "b", "deps": [["a"]]}]}
USER = {"id": 1, "username": "u", "roles": ["user"]}


@pytest.fixture
def pg(store):
    assert isinstance(store.driver, PgDriver)
    store.put_template(FLOW)
    store.add_user("u", "pw-u")
    return store


def complete(x):
    return lambda e, i: (e.complete(i, "a", e.bookmark(i, "a"), {"x": x}), i)[1]


def pending_write(store: Store, iid: str, x: int):
    """The write of completing `a` with `x` on the store's copy, not sent yet."""
    loaded = store._load(iid)
    store.engine.complete(loaded.inst, "a", store.engine.bookmark(loaded.inst, "a"), {"x": x})
    return store._step_write(loaded, loaded.inst.drain_events())


def count(store: Store, query) -> int:
    with store.reader() as conn:
        return conn.execute(query).scalar_one()


def test_steps_that_arrive_together_share_a_commit(pg, db_url):
    async def main():
        insts = await asyncio.gather(*(pg.start_async("pair", user=USER) for _ in range(30)))
        done = await asyncio.gather(*(pg.apply_async(i.id, complete(1)) for i in insts))
        return insts, done, pg.driver.loop_writer(asyncio.get_running_loop())

    insts, done, writer = run_async(main())
    assert {i.status for i in done} == {"completed"}
    assert writer.jobs == 60 and writer.commits < 60
    other = Store(db_url, secret=SECRET)
    try:
        assert {other.get(i.id).status for i in insts} == {"completed"}
        assert count(other, select(func.count()).select_from(events_t)
                      .where(events_t.c.tx.is_(None))) == 0  # the server's default
    finally:
        other.close()


def test_steps_that_arrive_together_are_shared_among_the_free_lanes(pg):
    """Shared, the batches of concurrent flows fall out of step, so the server writes one
    while the loop computes the steps of another's flows."""
    ids = [pg.start("pair", user=USER).id for _ in range(LANES * MIN_BATCH)]
    writes = [pending_write(pg, iid, 1) for iid in ids]

    async def main():
        answers = await asyncio.gather(*(pg.driver.run(save_job([w])) for w in writes))
        return answers, pg.driver.loop_writer(asyncio.get_running_loop())

    answers, writer = run_async(main())
    assert answers == [set()] * len(ids)
    assert (writer.commits, writer.jobs, len(writer.conns)) == (LANES, len(ids), LANES)
    pg._cache.clear()
    assert {pg.get(iid).status for iid in ids} == {"completed"}


def test_the_writers_connections_plan_once_in_the_stores_schema(pg):
    async def loop_side():
        await pg.start_async("pair", user=USER)  # the loop's first lane connects
        writer = pg.driver.loop_writer(asyncio.get_running_loop())
        return [(await (await c.execute(q)).fetchone())[0] for c in writer.conns
                for q in ("SHOW plan_cache_mode", "SHOW search_path")]

    thread = [pg.driver._own().execute(q).fetchone()[0]
              for q in ("SHOW plan_cache_mode", "SHOW search_path")]
    for mode, path in (thread, run_async(loop_side())):
        assert mode == "force_generic_plan" and path.startswith("bpflow_test_")


def test_a_lost_compare_and_set_in_a_group_writes_nothing_of_it(pg, db_url):
    ids = [pg.start("pair", user=USER).id for _ in range(3)]
    writes = [pending_write(pg, iid, 1) for iid in ids]
    other = Store(db_url, secret=SECRET)
    try:
        other.apply(ids[1], complete(2))  # the middle one's copy is now stale
    finally:
        other.close()
    events_before = count(pg, select(func.count()).select_from(events_t)
                          .where(events_t.c.instance_id == ids[1]))

    async def main():
        answers = await asyncio.gather(*(pg.driver.run(save_job([w])) for w in writes))
        return answers, pg.driver.loop_writer(asyncio.get_running_loop())

    answers, writer = run_async(main())
    assert answers == [set(), {ids[1]}, set()]
    assert writer.commits == 1  # the three in one transaction
    pg._cache.clear()
    assert [pg.get(iid).circles["a"].result for iid in ids] == [{"x": 1}, {"x": 2}, {"x": 1}]
    assert count(pg, select(func.count()).select_from(events_t)
                 .where(events_t.c.instance_id == ids[1])) == events_before


def test_a_failing_job_in_a_group_fails_alone(pg):
    ids = [pg.start("pair", user=USER).id for _ in range(2)]
    writes = [pending_write(pg, iid, 5) for iid in ids]
    bad = Job([("INSERT INTO users (username) VALUES (NULL)", {})], lambda _: None)

    async def main():
        return await asyncio.gather(pg.driver.run(save_job([writes[0]])), pg.driver.run(bad),
                                    pg.driver.run(save_job([writes[1]])),
                                    return_exceptions=True)

    outcomes = run_async(main())
    assert outcomes[0] == set() and outcomes[2] == set()
    assert isinstance(outcomes[1], IntegrityError)
    pg._cache.clear()
    assert {pg.get(iid).circles["a"].result["x"] for iid in ids} == {5}
    assert pg.apply(pg.start("pair", user=USER).id, complete(6)).status == "completed"


def test_a_failing_thread_write_leaves_its_connection_usable(pg):
    with pytest.raises(IntegrityError):
        pg.driver.write(Job([("INSERT INTO users (username) VALUES (NULL)", {})],
                            lambda _: None))
    assert pg.apply(pg.start("pair", user=USER).id, complete(1)).status == "completed"


def test_two_stores_completing_the_same_circle_apply_it_once(pg, db_url):
    iid = pg.start("pair", user=USER).id
    stores = [pg, Store(db_url, secret=SECRET)]
    mark = pg.engine.bookmark(pg.get(iid), "a")
    for s in stores:
        s.get(iid)  # both hold a copy in their caches
    outcomes: list = []
    barrier = threading.Barrier(2)

    def race(s: Store, x: int) -> None:
        barrier.wait()
        try:
            outcomes.append(s.complete(iid, "a", mark, {"x": x}))
        except TransitionError as exc:
            outcomes.append(exc)
    threads = [threading.Thread(target=race, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stores[1].close()
    assert sum(isinstance(o, TransitionError) for o in outcomes) == 1
    moves = [e for e in pg.history(iid) if e["circle"] == "a"
             and (e.get("after") or {}).get("state") == "success"]
    assert len(moves) == 1


def test_a_crowd_is_copied_all_or_nothing(pg, monkeypatch):
    for n in range(7):
        pg.add_user(f"c{n}", "pw-crowd", roles=["crowd"])
    monkeypatch.setattr(crowds_module, "CHUNK", 3)
    copy = pg.driver.insert_many

    def failing(chunks, batch):
        def broken():
            for n, chunk in enumerate(chunks):
                if n == 2:
                    raise RuntimeError("the build failed")
                yield chunk
        copy(broken(), batch)
    monkeypatch.setattr(pg.driver, "insert_many", failing)
    with pytest.raises(RuntimeError):
        pg.start_batch("pair", role="crowd")
    assert count(pg, select(func.count()).select_from(instances_t)) == 0
    assert count(pg, select(func.count()).select_from(batches_t)) == 0
    monkeypatch.setattr(pg.driver, "insert_many", copy)
    batch, started = pg.start_batch("pair", role="crowd")
    assert started == 7
    assert count(pg, select(func.count()).select_from(instances_t)
                 .where(instances_t.c.batch == batch)) == 7
    assert count(pg, select(func.count()).select_from(circles_t)) == 14
    with pg.reader() as conn:  # the events' transaction ids are the server's
        assert conn.execute(text("SELECT count(*) FROM events WHERE tx IS NULL")).scalar() == 0


def test_rows_read_the_same_as_the_sqlalchemy_writer_writes_them(pg, db_url, monkeypatch):
    monkeypatch.setenv("BPFLOW_PG_WRITER", "sqlalchemy")
    old = Store(db_url, secret=SECRET)
    try:
        ids = [s.apply(s.start("pair", user=USER).id, complete(1)).id for s in (pg, old)]
    finally:
        old.close()

    def rows(table, key, iid):
        with pg.reader() as conn:
            return [{k: "set" if isinstance(v, datetime) else v  # times: whether set
                     for k, v in r._mapping.items() if k not in ("instance_id", "id", "tx")}
                    for r in conn.execute(select(table).where(key == iid)
                                          .order_by(*table.primary_key.columns))]
    for table, key in ((circles_t, circles_t.c.instance_id), (events_t, events_t.c.instance_id)):
        assert rows(table, key, ids[0]) == rows(table, key, ids[1])
    with pg.reader() as conn:  # JSON nulls stored as JSON, as SQLAlchemy stores them
        nulls = conn.execute(text("SELECT instance_id, count(*) FROM circle_states WHERE"
                                  " result IS NULL GROUP BY instance_id")).all()
    assert nulls == []


def test_a_read_first_planned_on_nearly_empty_tables_finds_rows_by_key_once_they_grew(pg):
    """A new database: the first read is planned while the tables hold one instance. Kept,
    that plan read `circle_states` whole for every later read; each read is planned
    again, so once the tables have grown it goes by the key (the plans actually run,
    from auto_explain on the writer's own connection)."""
    every = pg.of(None)
    first = pg.start("pair", user=USER)
    every._load_many([first.id])
    [(_, conn, _)] = pg.driver._readers  # the connection reads go through (one thread)
    plans: list[str] = []
    conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
    for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                    "SET client_min_messages = log",
                    "SET random_page_cost = 4"):  # the server's default, not the writer's
        conn.execute(setting)
    every._load_many([first.id])
    assert any("Seq Scan on circle_states" in p for p in plans)  # nearly empty: cheapest
    with pg.db.begin() as db:  # 5,000 copies of it, as if started since
        for table, key in (("instances", "id"), ("circle_states", "instance_id")):
            db.execute(text(
                f"INSERT INTO {table} SELECT (jsonb_populate_record(NULL::{table}, to_jsonb(t)"
                f" || jsonb_build_object('{key}', 'copy' || g))).* FROM {table} t,"
                f" generate_series(1, 5000) g"))
    plans.clear()
    assert list(every._load_many([first.id])) == [first.id]
    read = "\n".join(p for p in plans if "FROM circle_states" in p)
    assert "Index Cond" in read and "circle_states_pkey" in read and "Seq Scan" not in read


def ri_plans(conn) -> list[str]:
    """The plans auto_explain reports from now on for `conn`'s statements and the
    foreign-key checks inside them (a list that fills)."""
    plans: list[str] = []
    conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
    for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                    "SET auto_explain.log_nested_statements = on",
                    "SET client_min_messages = log"):
        conn.execute(setting)
    return plans


def test_a_new_databases_tables_are_analyzed_as_instances_are_started(pg):
    """Never analyzed, the tables have the foreign keys to `instances` checked through
    one of its (tenant, ...) indexes: every instance of the tenant read for each new row,
    and a connection keeps that plan. At each of ANALYZE_AT's starts the writer analyzes
    the tables whose statistics are missing or out of date (on a thread), and the checks
    of a connection that was already running are planned again, by the key (the
    writer's connections cost a page read as cached: `PLANS`)."""
    plans = ri_plans(pg.driver._own())

    def checks() -> set[str]:
        found = {line.split(" on ")[0].strip(" ->") for p in plans if "FROM ONLY" in p
                 and '"instances" x WHERE "tenant"' in p for line in p.splitlines()
                 if "Scan" in line}
        plans.clear()
        return found

    def analyzed() -> float:
        with pg.db.connect() as conn:
            return conn.execute(text(
                "SELECT reltuples FROM pg_class WHERE relname = 'instances'"
                " AND relnamespace = current_schema()::regnamespace")).scalar()

    def started_until(mark: int) -> None:
        """Starts up to the mark, then waits for the analysis the mark set off."""
        while pg.driver._started < mark:
            pg.start("pair", user=USER)
        deadline = time.monotonic() + 10
        while analyzed() < mark and time.monotonic() < deadline:
            time.sleep(0.05)
        assert analyzed() >= mark
        checks()
    first, last = pools.ANALYZE_AT
    pg.start("pair", user=USER)
    before = checks()  # through one of the (tenant, ...) indexes, not the key
    assert before and before != {"Index Scan using uq_instances_tenant_id"}, before
    while pg.driver._started < first - 1:
        pg.start("pair", user=USER)
    assert analyzed() < 0  # never
    started_until(first)
    pg.start("pair", user=USER)
    assert checks() == {"Index Scan using uq_instances_tenant_id"}
    started_until(last)
    pg.start("pair", user=USER)
    assert checks() == {"Index Scan using uq_instances_tenant_id"}
    assert pg.driver.analyze_stale_tables() == []  # up to date: autovacuum keeps them so


def test_reads_from_many_threads_share_a_few_connections(pg):
    """A web server's thread pool reads through the writer: its reads share READERS
    connections (one per thread ran the server out of connections)."""
    every = pg.of(None)
    ids = [pg.start("pair", user=USER).id for _ in range(3)]
    before = len(pg.driver._conns)
    barrier = threading.Barrier(20)
    errors: list[BaseException] = []

    def reads() -> None:
        try:
            barrier.wait()
            for _ in range(5):
                assert sorted(every._load_many(ids)) == sorted(ids)
        except BaseException as exc:  # handed to the test
            errors.append(exc)
    threads = [threading.Thread(target=reads) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert 1 <= len(pg.driver._conns) - before <= pools.READERS


def test_a_read_connection_the_server_dropped_is_replaced(pg, monkeypatch):
    """An idle read connection is checked before use: one the server closed meanwhile
    (a restart, an idle timeout) is replaced, and the read answers."""
    every = pg.of(None)
    iid = pg.start("pair", user=USER).id
    every._load_many([iid])
    [(_, conn, _)] = pg.driver._readers
    with pg.db.connect() as admin:
        admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": conn.info.backend_pid})
    monkeypatch.setattr(pools, "IDLE_CHECK_S", 0.0)
    assert list(every._load_many([iid])) == [iid]
    [(_, again, _)] = pg.driver._readers
    assert again is not conn


def test_a_stale_copy_is_read_again_on_the_event_loop(pg, db_url, monkeypatch):
    """A step served by a process whose cached copy is stale (another process stepped
    since) reads the instance again on its event loop's own connections, not on a
    thread, and the step is applied once, on the stored state."""
    pg.put_template({"name": "forms", "circles": [
        {"uri": "a", "box": {"form": [{"name": "x", "type": "number"}]}},
        {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "y", "type": "number"}]}}]})
    other = Store(db_url, secret=SECRET)
    try:
        iid = pg.start("forms", user=USER).id
        other.peek(iid)  # the other process's copy: `a` waiting
        pg.complete(iid, "a", pg.engine.bookmark(pg.get(iid), "a"), {"x": 1})

        def on_a_thread(*_args):
            raise AssertionError("read on a thread")
        monkeypatch.setattr(other, "_load", on_a_thread)

        async def step():
            inst = await other.apply_async(
                iid, lambda e, i: (e.complete(i, "b", e.bookmark(i, "b"), {"y": 2}), i)[1])
            writer = other.driver.loop_writer(asyncio.get_running_loop())
            return inst, len(writer.readers)
        inst, readers = run_async(step())
        assert inst.status == "completed" and readers == 1
        assert pg.get(iid).status == "completed"
        assert [e["circle"] for e in pg.history(iid)
                if (e.get("after") or {}).get("state") == "success"] == ["a", "b"]
    finally:
        other.close()


def test_reads_on_an_event_loop_share_a_few_connections_and_keep_to_their_tenant(pg):
    """Reads that arrive together on a loop wait for one of READERS connections; each
    gets its own instance; a store of another tenant finds none of them."""
    every = pg.of(None)
    ids = [pg.start("pair", user=USER).id for _ in range(6)]
    before = len(pg.driver._conns)

    async def reads():
        loaded = await asyncio.gather(*(every._load_async(iid) for iid in ids * 5))
        writer = pg.driver.loop_writer(asyncio.get_running_loop())
        return [got.inst.id for got in loaded], len(writer.conns)
    got, conns = run_async(reads())
    assert got == ids * 5
    assert 1 <= conns <= pools.READERS
    assert len(pg.driver._conns) == before  # no thread's connection was used
    with pytest.raises(NotFound):
        run_async(pg.of("elsewhere")._load_async(ids[0]))


def test_an_event_loops_read_connection_the_server_dropped_is_replaced(pg, monkeypatch):
    every = pg.of(None)
    iid = pg.start("pair", user=USER).id
    monkeypatch.setattr(pools, "IDLE_CHECK_S", 0.0)

    async def reads():
        first = await every._load_async(iid)
        [(conn, _)] = pg.driver.loop_writer(asyncio.get_running_loop()).readers
        with pg.db.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"),
                          {"pid": conn.info.backend_pid})
        again = await every._load_async(iid)
        [(other, _)] = pg.driver.loop_writer(asyncio.get_running_loop()).readers
        return first.inst.id, again.inst.id, other is not conn
    assert run_async(reads()) == (iid, iid, True)


def test_a_step_or_start_below_the_cursors_reports_a_refusal_and_keeps_its_connection(pg):
    """A start refused by the server (its id taken) raises what SQLAlchemy would, on a
    thread and on a loop, and the same connection then starts and steps as before; the
    step's compare-and-set answers 1 or 0 as through psycopg's cursors."""
    iid = pg.start("pair", user=USER).id
    _, new = pg._new_instance(pg._latest_row("pair"), {}, USER, instance_id=iid)
    with pytest.raises(IntegrityError):
        pg.driver.insert(new)

    async def on_a_loop():
        with pytest.raises(IntegrityError):
            await pg.driver.insert_async(new)
        write = pending_write(pg, iid, 3)
        won = await pg.driver.save_async([write])
        lost = await pg.driver.save_async([write])  # the same lock version again
        return won, lost
    assert run_async(on_a_loop()) == (set(), {iid})
    assert pg.apply(pg.start("pair", user=USER).id, complete(1)).status == "completed"
    assert set(wire.PREPARED[statements.STEP].names) >= {"b_id", "b_lock", "cu", "ev"}
    assert "%" not in wire.PREPARED[statements.START].query.decode()
