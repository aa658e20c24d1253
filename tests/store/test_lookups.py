"""What a start and a form reuse of this process's lookups: a template's latest version
(`Templates._latest_row`, `latest_ttl`) and a user by name (`Users.user`, `account_ttl`).
A change through this process counts at once; one through another process (another Store
on the database) within the time given; within it, nothing is read again."""

from __future__ import annotations

import time

from bpflow.store import Store
from tests.conftest import SECRET

V1 = {"name": "t", "circles": [{"uri": "a"}]}
V2 = {"name": "t", "circles": [{"uri": "a"}, {"uri": "b", "deps": [["a"]]}]}
ANN = {"id": None, "username": "ann"}


def counting(store: Store) -> list[int]:
    """How many small reads `store` made (a list that counts)."""
    reads = [0]
    rows = store._rows

    def counted(read, values):
        reads[0] += 1
        return rows(read, values)
    store._rows = counted
    return reads


def test_a_start_takes_the_latest_version_an_upload_here_at_once_elsewhere_in_time(
        store, db_url):
    store.latest_ttl = 0.5
    store.put_template(V1)
    reads = counting(store)
    assert store.start("t", {}, ANN).version == 1
    assert store.start("t", {}, ANN).version == 1
    assert reads[0] == 1  # the second start reused the lookup
    assert store.put_template(V2) == (2, True)
    assert store.start("t", {}, ANN).version == 2  # uploaded here: at once
    other = Store(db_url, secret=SECRET)
    try:
        other.put_template({**V2, "circles": V2["circles"] + [{"uri": "c", "deps": [["b"]]}]})
    finally:
        other.close()
    time.sleep(store.latest_ttl)
    assert store.start("t", {}, ANN).version == 3  # uploaded elsewhere: within latest_ttl


def test_a_user_looked_up_by_name_changes_here_at_once_elsewhere_in_time(store, db_url):
    store.account_ttl = 0.5
    assert store.user("bo") is None
    store.add_user("bo", "pw-bo-12345678", ["user"])
    assert store.user("bo")["roles"] == ["user"]  # added here: at once
    reads = counting(store)
    store.user("bo")["roles"].append("admin")  # a copy: the reused lookup stays as it was
    assert store.user("bo")["roles"] == ["user"] and reads[0] == 0
    store.set_roles("bo", ["user", "finance"])
    assert sorted(store.user("bo")["roles"]) == ["finance", "user"]
    other = Store(db_url, secret=SECRET)
    try:
        other.disable_user("bo")
    finally:
        other.close()
    time.sleep(store.account_ttl)
    assert store.user("bo") is None  # disabled elsewhere: within account_ttl
    assert store.of(store.add_tenant("acme")).user("bo") is None  # another tenant's view
