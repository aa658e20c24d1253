"""Who and what starts, in the store (SQLite and PostgreSQL): retired templates start no
more while their instances go on, idempotent starts (a keyed instance id) start once even
when sent at the same moment, the start-up import adds only unknown templates, and users'
custom roles."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from bpflow.errors import Conflict, Forbidden, NotFound
from bpflow.store import Store
from bpflow.store.steps import AlreadyStarted
from tests.conftest import SECRET, run_async

FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["a"]]}]}
OTHER = {"name": "other", "starters": ["finance"], "circles": [{"uri": "a"}]}


@pytest.fixture
def alice(store) -> dict:
    store.add_user("alice", "alice-password")
    return store.user("alice")


def finish(store: Store, iid: str, cid: str) -> None:
    inst = store.get(iid)
    store.complete(iid, cid, store.engine.bookmark(inst, cid), {"n": 1})


# ---------------------------------------------------------------- retirement
def test_a_retired_template_starts_no_more_and_its_instances_go_on(store, alice):
    store.put_template(FORM)
    running = store.start("simple", user=alice)
    assert store.retire_template("simple", "root") is True
    assert store.retire_template("simple") is False  # already
    assert store.retired_templates() == {"simple"} and store.is_retired("simple")
    with pytest.raises(Conflict, match="retired"):
        store.start("simple", user=alice)
    with pytest.raises(Conflict, match="retired"):
        run_async(store.start_async("simple", user=alice))
    finish(store, running.id, "a")
    assert store.get(running.id).status == "completed"
    assert store.restore_template("simple") is True
    assert store.restore_template("simple") is False
    assert not store.is_retired("simple")
    assert store.start("simple", user=alice).status == "running"


def test_only_known_templates_are_retired(store):
    with pytest.raises(NotFound):
        store.retire_template("nothing")
    with pytest.raises(NotFound):
        store.restore_template("nothing")
    assert store.retired_templates() == frozenset()


def test_another_process_sees_a_retirement_within_its_ttl(db_url, store):
    store.put_template(FORM)
    other = Store(db_url, secret=SECRET)
    try:
        other.retired_ttl = 0
        assert not other.is_retired("simple")
        store.retire_template("simple")
        assert other.is_retired("simple")
    finally:
        other.close()


def test_startable_templates_leave_out_retired_and_refused_ones(store):
    store.put_template(FORM)
    store.put_template(OTHER)
    assert [n for n, _, _ in store.startable_templates()] == ["other", "simple"]
    assert [n for n, _, _ in store.startable_templates(lambda b: "starters" not in b)] == \
        ["simple"]
    store.retire_template("simple")
    names = [(n, v, t.name) for n, v, t in store.startable_templates()]
    assert names == [("other", 1, "other")]


def test_admit_refuses_a_start_before_anything_is_stored(store, alice):
    store.put_template(OTHER)

    def refuse(body):
        assert body["starters"] == ["finance"]
        raise Forbidden("only finance may start 'other'")
    with pytest.raises(Forbidden):
        store.start("other", user=alice, admit=refuse)
    with pytest.raises(Forbidden):
        run_async(store.start_async("other", user=alice, admit=refuse))
    assert store.list_instances(None)[1] == 0


# ------------------------------------------------------------- idempotent starts
def test_a_keyed_id_is_per_user_and_key(store):
    one = store.keyed_id(1, "k")
    assert len(one) == 32 and int(one, 16) >= 0
    assert store.keyed_id(1, "k") == one
    assert len({one, store.keyed_id(2, "k"), store.keyed_id(1, "k2")}) == 3
    other = Store("sqlite://", secret=b"another-secret")
    try:
        assert other.keyed_id(1, "k") != one
    finally:
        other.close()


def test_a_keyed_start_starts_once(store, alice):
    store.put_template(FORM)
    iid = store.keyed_id(alice["id"], "click-1")
    first = store.start("simple", {}, alice, instance_id=iid)
    assert first.id == iid
    with pytest.raises(AlreadyStarted) as again:
        store.start("simple", {}, alice, instance_id=iid)
    assert again.value.instance.id == iid and again.value.instance.user["id"] == alice["id"]
    with pytest.raises(AlreadyStarted):
        run_async(store.start_async("simple", {}, alice, instance_id=iid))
    assert store.list_instances(None)[1] == 1
    assert len(store.history(iid)) == len(store.history(first.id))


def test_keyed_starts_at_the_same_moment_start_once_on_threads(db_url, store, alice):
    store.put_template(FORM)
    stores = [store] + [Store(db_url, secret=SECRET) for _ in range(3)]
    iid = store.keyed_id(alice["id"], "double-click")
    barrier, outcomes = threading.Barrier(len(stores)), []

    def start(s: Store) -> None:
        barrier.wait()
        try:
            outcomes.append(("started", s.start("simple", {}, alice, instance_id=iid).id))
        except AlreadyStarted as exc:
            outcomes.append(("first", exc.instance.id))
    threads = [threading.Thread(target=start, args=(s,)) for s in stores]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for s in stores[1:]:
            s.close()
    assert sorted(kind for kind, _ in outcomes) == ["first", "first", "first", "started"]
    assert {i for _, i in outcomes} == {iid}
    assert store.list_instances(None)[1] == 1


def test_keyed_starts_at_the_same_moment_start_once_on_an_event_loop(store, alice):
    """On SQLite the loop's writer puts both inserts in one transaction: the second is
    undone alone and answered with the first."""
    store.put_template(FORM)
    iid = store.keyed_id(alice["id"], "double-click")

    async def both():
        return await asyncio.gather(
            *[store.start_async("simple", {}, alice, instance_id=iid) for _ in range(2)],
            return_exceptions=True)
    outcomes = run_async(both())
    started = [o for o in outcomes if not isinstance(o, BaseException)]
    again = [o for o in outcomes if isinstance(o, AlreadyStarted)]
    assert len(started) == 1 and len(again) == 1, outcomes
    assert again[0].instance.id == started[0].id == iid
    assert store.list_instances(None)[1] == 1


# ------------------------------------------------------------------- import
def test_the_start_up_import_only_adds_unknown_templates(store, tmp_path):
    (tmp_path / "simple.json").write_text(json.dumps(FORM))
    assert store.import_dir(tmp_path, only_new=True) == [("simple", 1, True)]
    uploaded = {**FORM, "title": "what an admin uploaded"}
    assert store.put_template(uploaded) == (2, True)
    (tmp_path / "other.json").write_text(json.dumps(OTHER))
    done = store.import_dir(tmp_path, only_new=True)  # a restart
    assert sorted(done) == [("other", 1, True), ("simple", 2, False)]
    assert store.template_versions() == {"other": [1], "simple": [1, 2]}
    assert store.latest_body("simple")["title"] == "what an admin uploaded"
    store.retire_template("simple")
    store.import_dir(tmp_path, only_new=True)
    assert store.is_retired("simple")
    # `bpflow import DIR` still loads every file as a version
    assert sorted(store.import_dir(tmp_path)) == [("other", 1, False), ("simple", 3, True)]


def test_the_start_up_import_checks_new_templates_against_known_ones(store, tmp_path):
    store.put_template(FORM)
    nested = {"name": "outer", "circles": [
        {"uri": "inner", "box": {"action": {"type": "flow", "template": "simple"}}}]}
    (tmp_path / "outer.json").write_text(json.dumps(nested))
    (tmp_path / "simple.json").write_text("{not json")
    with pytest.raises(ValueError, match="not readable JSON"):
        store.import_dir(tmp_path, only_new=True)
    (tmp_path / "simple.json").write_text(json.dumps({**FORM, "title": "file"}))
    assert sorted(store.import_dir(tmp_path, only_new=True)) == [
        ("outer", 1, True), ("simple", 1, False)]


# -------------------------------------------------------------------- users
def test_custom_roles_are_stored_changed_and_listed(store):
    store.add_user("fay", "fay-password", ["finance", "user"])
    store.add_user("gus", "gus-password", ["finance"])
    store.add_user("hal", "hal-password", ["user"])
    store.add_user("ivy", "ivy-password", ["finance"])
    store.disable_user("ivy")
    assert store.user("fay")["roles"] == ["finance", "user"]
    assert store.list_users(role="finance") == ["fay", "gus"]  # enabled ones only
    assert store.usernames() == ["fay", "gus", "hal"]
    assert store.list_users(role="nobody") == []
    assert [u["username"] for u in store.list_users()] == ["fay", "gus", "hal", "ivy"]
    assert store.set_roles("hal", ["finance", "finance", "approver"]) == ["approver", "finance"]
    assert store.list_users(role="finance") == ["fay", "gus", "hal"]
    assert store.account(store.user("hal")["id"]).roles == ("approver", "finance")
    with pytest.raises(ValueError):
        store.set_roles("hal", [])
    with pytest.raises(ValueError):
        store.set_roles("hal", ["Finance"])
    with pytest.raises(NotFound):
        store.set_roles("nobody", ["user"])
    assert store.user("hal")["roles"] == ["approver", "finance"]
