"""Reads straight through the driver (sqlite3 on an SQLite file, psycopg on PostgreSQL)
are exactly what the SQLAlchemy read gives. Instances (`Instances._load_many`): every JSON
value (numbers SQLite keeps as numbers, text that looks like one, null, nested), every
time, every circle, the lock version. The small reads of `Store._rows` (a template's id,
a user by name): every column, none of another tenant's."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpflow.store import Store
from bpflow.store.pg.driver import PgDriver
from bpflow.store.sqlite.driver import SqliteDriver
from tests.conftest import SECRET, pg_schema, sqlite_database

TEMPLATE = {"name": "any", "inputs": {"v": "any"}, "circles": [
    {"uri": "a", "box": {"action": {"type": "signal", "name": "s", "key": "k"}}},
    {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "v", "type": "string"}]}}]}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False,
                                                                      allow_infinity=False)
    | st.text(max_size=8) | st.sampled_from(["0", "1.5", "null", "true", "[]", "{}"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8)


def both(store: Store, ids: list[str]):
    every = store.of(None)
    with every.reader() as conn:
        through_sqlalchemy = every._load_many(ids, conn)
    return every._load_many(ids), through_sqlalchemy


def shape(loaded) -> tuple:
    return loaded.inst.to_dict(), loaded.lock_version, loaded.circles, loaded.listed


@pytest.fixture(scope="module")
def pg_store(pg_available):
    """One PostgreSQL store for every example (each starts instances of its own)."""
    if pg_available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI requires PostgreSQL: {pg_available}")
        pytest.skip(f"SKIPPING POSTGRESQL TESTS: {pg_available}")
    with pg_schema() as url:
        store = Store(url, secret=SECRET)
        assert isinstance(store.driver, PgDriver)
        store.put_template(TEMPLATE)
        store.add_user("ann", "pw-ann-123456")
        yield store
        store.close()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=JSON, first=JSON, complete=st.booleans())
def test_sqlite3_reads_what_sqlalchemy_reads(tmp_path_factory, inputs, first, complete):
    url = sqlite_database(tmp_path_factory.mktemp("reads") / "r.db")
    store = Store(url, secret=SECRET)
    try:
        store.put_template(TEMPLATE)
        store.add_user("ann", "pw-ann-123456")
        check(store, inputs, first, complete)
    finally:
        store.close()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=JSON, first=JSON, complete=st.booleans())
def test_psycopg_reads_what_sqlalchemy_reads(pg_store, inputs, first, complete):
    check(pg_store, inputs, first, complete)


def check(store: Store, inputs, first, complete) -> None:
    inst = store.start("any", {"v": inputs}, store.user("ann"))
    other = store.start("any", {"v": first}, store.user("ann"))
    if complete:  # both wait for the signal: each gets `first` as its result
        assert store.signal("s", "k", first) == 2
    fast, slow = both(store, [inst.id, other.id, "missing"])
    assert sorted(fast) == sorted(slow) == sorted([inst.id, other.id])
    for iid in fast:
        assert shape(fast[iid]) == shape(slow[iid])
    assert fast[inst.id].inst.inputs == {"v": inputs}
    if not complete:  # no instance of this example is left waiting for the next one's signal
        assert store.signal("s", "k", None) == 2


def test_the_small_reads_read_what_sqlalchemy_reads(store):
    from bpflow.store import statements as sql
    from bpflow.store.templates import TEMPLATE_ID
    from bpflow.store.users import USER
    assert isinstance(store.driver, SqliteDriver | PgDriver)  # straight
    store.put_template(TEMPLATE)
    store.put_template({**TEMPLATE, "circles": TEMPLATE["circles"][:1]})  # version 2
    store.add_user("ann", "pw-ann-123456", ["user", "finance"])
    store.of(store.add_tenant("acme")).add_user("zed", "pw-zed-123456")
    cases = [
        (TEMPLATE_ID[False], {"name": "any", "tenant": "default"}),  # the latest
        (TEMPLATE_ID[True], {"name": "any", "version": 1, "tenant": "default"}),
        (TEMPLATE_ID[True], {"name": "any", "version": 3, "tenant": "default"}),
        (TEMPLATE_ID[False], {"name": "any", "tenant": "acme"}),
        (USER[True], {"username": "ann", "tenant": "default"}),
        (USER[True], {"username": "zed", "tenant": "default"}),  # another tenant's
        (USER[False], {"username": "zed", "tenant": None}),
        (USER[False], {"username": "nobody", "tenant": None})]
    found = []
    for read, values in cases:
        with store.reader() as conn:
            slow = [tuple(r) for r in conn.execute(read.query, sql.prefixed(values))]
        assert [tuple(r) for r in store._rows(read, values)] == slow, values
        found.append(len(slow))
    assert found == [1, 1, 0, 0, 1, 0, 1, 0]
