"""Instances read through sqlite3 straight (`Instances._load_many` on an SQLite file) are
exactly what the SQLAlchemy read gives: every JSON value (numbers SQLite keeps as numbers,
text that looks like one, null, nested), every time, every circle, the lock version."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpflow.store import Store
from bpflow.store.migrate import upgrade
from tests.conftest import SECRET

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


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=JSON, first=JSON, complete=st.booleans())
def test_sqlite3_reads_what_sqlalchemy_reads(tmp_path_factory, inputs, first, complete):
    url = f"sqlite:///{tmp_path_factory.mktemp('reads') / 'r.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET)
    try:
        store.put_template(TEMPLATE)
        store.add_user("ann", "pw-ann-123456")
        inst = store.start("any", {"v": inputs}, store.user("ann"))
        other = store.start("any", {"v": first}, store.user("ann"))
        if complete:  # both wait for the signal: each gets `first` as its result
            assert store.signal("s", "k", first) == 2
        fast, slow = both(store, [inst.id, other.id, "missing"])
        assert sorted(fast) == sorted(slow) == sorted([inst.id, other.id])
        for iid in fast:
            assert shape(fast[iid]) == shape(slow[iid])
        assert fast[inst.id].inst.inputs == {"v": inputs}
    finally:
        store.close()
