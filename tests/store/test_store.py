"""The SQL store on SQLite and PostgreSQL: versions, atomic transitions, users, leases."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import text

from bpflow.store import NotFound, Store, statements
from engine.errors import BookmarkError, DefinitionError, TransitionError
from tests.conftest import SECRET

LINEAR = {"name": "chain", "circles": [
    {"uri": "a", "box": {"form": [{"name": "x", "type": "number"}]}},
    {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "y", "type": "string"}]}},
    {"uri": "end", "deps": [["b"]]}]}


def changed(body: dict, title: str) -> dict:
    return {**body, "title": title}


def finish(store: Store, iid: str, cid: str, result=None, other: Store | None = None):
    s = other or store
    inst = s.get(iid)
    return s.complete(iid, cid, s.engine.bookmark(inst, cid), result, actor="tester")


# ------------------------------------------------------------------ versions
def test_upload_creates_versions_only_when_the_body_changes(store):
    assert store.put_template(LINEAR) == (1, True)
    assert store.put_template(dict(LINEAR)) == (1, False)
    assert store.put_template(changed(LINEAR, "v2")) == (2, True)
    assert store.put_template(changed(LINEAR, "v2")) == (2, False)
    assert store.template_versions() == {"chain": [1, 2]}


def test_invalid_upload_is_refused_with_every_error(store):
    with pytest.raises(DefinitionError) as exc:
        store.put_template({"name": "bad", "circles": [{"uri": "a", "deps": [["zz"]]},
                                                       {"uri": "a"}]})
    assert {e["code"] for e in exc.value.errors} == {"unknown_dependency", "duplicate_uri"}
    assert store.template_versions() == {}


def test_start_uses_the_highest_version_unless_one_is_named(store):
    store.put_template(LINEAR)
    store.put_template(changed(LINEAR, "second"))
    assert store.start("chain").version == 2
    assert store.start("chain", version=1).version == 1
    with pytest.raises(NotFound):
        store.start("chain", version=9)
    with pytest.raises(NotFound):
        store.start("nothing")


def raw_connection(url: str):
    """A plain DB-API connection, bypassing bpflow and SQLAlchemy entirely."""
    if url.startswith("sqlite"):
        return sqlite3.connect(url.removeprefix("sqlite:///"))  # foreign keys off here
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    return psycopg.connect(plain)


@pytest.mark.parametrize("statement", [
    "UPDATE templates SET body = '{}' WHERE name = 'chain' AND version = 1",
    "UPDATE templates SET version = 7 WHERE name = 'chain' AND version = 1",
    "DELETE FROM templates WHERE name = 'chain' AND version = 1",
])
def test_raw_sql_cannot_change_or_delete_an_instantiated_version(store, db_url, statement):
    store.put_template(LINEAR)
    store.put_template(changed(LINEAR, "unused"))
    store.start("chain", version=1)
    conn = raw_connection(db_url)
    try:
        with pytest.raises(Exception, match="has instances"):
            conn.execute(statement)
            conn.commit()
        conn.rollback()
        # a version without instances is still the admin's to change or delete
        conn.execute("DELETE FROM templates WHERE name = 'chain' AND version = 2")
        conn.commit()
    finally:
        conn.close()
    assert store.template_versions() == {"chain": [1]}
    assert store.locked_versions("chain") == {1}


def test_foreign_key_refuses_deleting_a_version_through_sqlalchemy(store):
    store.put_template(LINEAR)
    store.start("chain")
    with pytest.raises(Exception), store.db.begin() as conn:  # noqa: B017 - any DB error
        conn.execute(text("DELETE FROM templates"))
    assert store.template_versions() == {"chain": [1]}


# -------------------------------------------------------------- transitions
def test_each_transition_is_persisted_with_its_events(store, db_url):
    store.put_template(LINEAR)
    inst = store.start("chain", {}, {"id": None, "username": "bob"})
    finish(store, inst.id, "a", {"x": 1})
    other = Store(db_url, secret=SECRET)  # another process: nothing cached
    try:
        seen = other.get(inst.id)
        assert seen.circles["a"].state == "success" and seen.circles["a"].result == {"x": 1}
        assert other.engine.ready(seen) == ["b"]
        history = other.history(inst.id)
        assert [e["seq"] for e in history] == list(range(1, len(history) + 1))
        assert history[0]["kind"] == "instance_started" and history[0]["actor"] == "bob"
        done = [e for e in history if e["kind"] == "circle_succeeded"]
        assert done[0]["actor"] == "tester" and done[0]["after"]["result"] == {"x": 1}
    finally:
        other.close()


def test_failure_between_state_and_events_leaves_neither(store, db_url, monkeypatch):
    store.put_template(LINEAR)
    inst = store.start("chain")
    before = store.history(inst.id)

    def broken(*args, **kwargs):
        raise RuntimeError("disk full (injected)")

    monkeypatch.setattr(statements, "event_rows", broken)
    with pytest.raises(RuntimeError, match="injected"):
        finish(store, inst.id, "a", {"x": 1})
    monkeypatch.undo()
    other = Store(db_url, secret=SECRET)
    try:
        assert other.get(inst.id).circles["a"].state == "waiting"
        assert other.history(inst.id) == before
    finally:
        other.close()
    finish(store, inst.id, "a", {"x": 2})  # the store is still usable and consistent
    assert store.get(inst.id).circles["a"].result == {"x": 2}


def test_two_stores_interleaving_lose_no_update(store, db_url):
    """Each store caches what it wrote; the compare-and-set catches the other's writes."""
    body = {"name": "wide", "circles": [
        *({"uri": f"c{i}", "box": {"form": [{"name": "v", "type": "integer"}]}}
          for i in range(6)),
        {"uri": "end", "deps": [[f"c{i}"] for i in range(6)]}]}
    store.put_template(body)
    inst = store.start("wide")
    other = Store(db_url, secret=SECRET)
    try:
        for i in range(6):
            finish(store, inst.id, f"c{i}", {"v": i}, other=other if i % 2 else None)
        final = store.get(inst.id)
        assert final.status == "completed"
        assert {cid: r.result for cid, r in final.circles.items() if cid != "end"} == {
            f"c{i}": {"v": i} for i in range(6)}
        kinds = [e["kind"] for e in store.history(inst.id)]
        assert kinds.count("circle_succeeded") == 7
    finally:
        other.close()


def test_a_bookmark_used_by_one_store_is_refused_by_another(store, db_url):
    store.put_template(LINEAR)
    inst = store.start("chain")
    mark = store.engine.bookmark(inst, "a")
    other = Store(db_url, secret=SECRET)
    try:
        other.get(inst.id)  # warm the other store's view
        store.complete(inst.id, "a", mark, {"x": 1})
        with pytest.raises(TransitionError):
            other.complete(inst.id, "a", mark, {"x": 2})
    finally:
        other.close()
    assert store.get(inst.id).circles["a"].result == {"x": 1}
    assert [e["kind"] for e in store.history(inst.id)].count("circle_succeeded") == 1


def test_refusals_come_from_the_engine(store):
    store.put_template(LINEAR)
    inst = store.start("chain")
    with pytest.raises(BookmarkError):
        store.complete(inst.id, "a", "0.forged")
    with pytest.raises(NotFound):
        store.complete("nope", "a", "0.x")


def test_reset_suspend_resume_abort_are_durable(store):
    store.put_template(LINEAR)
    iid = store.start("chain").id
    finish(store, iid, "a", {"x": 1})
    store.reset(iid, "a", "self", actor="ann")
    assert store.get(iid).circles["a"].state == "waiting"
    store.suspend(iid)
    assert store.get(iid).status == "suspended"
    store.resume(iid)
    store.abort(iid, "no longer needed")
    final = store.get(iid)
    assert final.status == "terminated" and final.reason == "no longer needed"
    kinds = [e["kind"] for e in store.history(iid)]
    assert {"circle_reset", "instance_suspended", "instance_resumed",
            "instance_terminated"} <= set(kinds)


def test_nested_templates_are_pinned_at_start(store, tmp_path):
    import json
    from pathlib import Path
    src = Path(__file__).resolve().parents[2] / "upload" / "workflow"
    (tmp_path / "reimbursement.json").write_text((src / "reimbursement.json").read_text())
    (tmp_path / "trip.json").write_text(json.dumps({"name": "trip", "kind": "linear", "circles": [
        {"uri": "book"}, {"uri": "main", "box": {"action": {"type": "flow",
                                                            "template": "reimbursement"}}}]}))
    imported = store.import_dir(tmp_path)
    assert {(n, v) for n, v, _ in imported} == {("reimbursement", 1), ("trip", 1)}
    inst = store.start("trip")
    body = json.loads((src / "reimbursement.json").read_text())
    body["circles"][0]["uri"] = "claim2"
    body["circles"][1]["deps"] = [["claim2"]]
    for c in body["circles"]:
        for key in ("box", "weak", "assign"):
            if key in c:
                c[key] = json.loads(json.dumps(c[key]).replace("${claim.", "${claim2."))
        if c.get("weak") == ["claim"]:
            c["weak"] = ["claim2"]
    assert store.put_template(body) == (2, True)
    fresh = Store(str(store.db.url.render_as_string(hide_password=False)), secret=SECRET)
    try:
        assert "main.claim" in fresh.get(inst.id).circles  # still version 1 inside
        assert "main.claim2" in fresh.start("trip").circles  # new starts use version 2
    finally:
        fresh.close()


# -------------------------------------------------------------------- users
def test_users_have_salted_slow_hashes_and_authenticate(store):
    store.add_user("ann", "s3cret pass", ["approver"])
    store.add_user("bob", "s3cret pass")
    with store.reader() as conn:
        hashes = [r[0] for r in conn.execute(text("SELECT password_hash FROM users"))]
    assert all(h.startswith("scrypt$") and "s3cret" not in h for h in hashes)
    assert hashes[0] != hashes[1]
    assert store.authenticate("ann", "s3cret pass") == {"id": 1, "username": "ann",
                                                         "roles": ["approver"],
                                                         "tenant": "default",
                                                         "generation": 0}
    assert store.authenticate("ann", "wrong") is None
    assert store.authenticate("nobody", "s3cret pass") is None
    with pytest.raises(ValueError, match="already exists"):
        store.add_user("ann", "x")
    with pytest.raises(ValueError, match="not a role name"):
        store.add_user("eve", "x", ["Root"])


def test_an_unknown_name_costs_one_password_check_as_a_known_one(store, monkeypatch):
    """No answer sooner or later for a name nobody has: one scrypt, like a real account's
    wrong password (it used to be two: a hash made, then checked)."""
    import hashlib
    store.add_user("ann", "s3cret pass")
    calls = []
    real = hashlib.scrypt

    def counted(*args, **kwargs):
        calls.append(kwargs["n"])
        return real(*args, **kwargs)

    monkeypatch.setattr(hashlib, "scrypt", counted)
    store.authenticate("nobody", "s3cret pass")  # the first one makes no one's hash too
    del calls[:]
    for name in ("ann", "nobody", "ann", "nobody2"):
        store.authenticate(name, "wrong")
    assert len(calls) == 4 and len(set(calls)) == 1


def test_passwords_are_hashed_at_the_real_cost_outside_the_tests():
    """This suite's processes hash at a lower cost (tests/conftest.py); a process of
    bpflow's own hashes at scrypt N=2**14, r=8, p=1."""
    import subprocess
    import sys
    code = "from bpflow.store.accounts import hash_password; print(hash_password('x'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.startswith("scrypt$16384$8$1$")


# ------------------------------------------------------------------- leases
def test_due_work_is_leased_to_one_claimant_until_released_or_expired(store, db_url):
    timer = {"name": "wait", "circles": [
        {"uri": "t", "box": {"action": {"type": "timer", "delay": 0}}},
        {"uri": "h", "deps": [["t"]], "box": {"action": {"type": "http",
                                                          "url": "http://127.0.0.1:9/x"}}}]}
    store.put_template(timer)
    ids = {store.start("wait").id for _ in range(5)}
    other = Store(db_url, secret=SECRET)
    try:
        first = store.claim_due("w1", limit=3, lease=30)
        second = other.claim_due("w2", limit=10, lease=30)
        assert len(first) == 3 and set(first) | set(second) == ids
        assert not set(first) & set(second)
        assert store.claim_due("w3") == []
        store.release(first[0], "w1")
        assert other.claim_due("w2") == [first[0]]
        store.clock = lambda: other.clock() + timedelta(seconds=31)  # leases expired
        assert set(store.claim_due("w4", limit=10)) == ids
    finally:
        other.close()


def test_nested_versions_pinned_by_an_instance_are_locked_too(store, db_url):
    inner = {"name": "inner", "circles": [{"uri": "x", "box": {"form": [{"name": "v"}]}}]}
    store.put_template(inner)
    store.put_template({"name": "outer", "circles": [
        {"uri": "sub", "box": {"action": {"type": "flow", "template": "inner"}}}]})
    store.start("outer")
    assert store.locked_versions("inner") == {1}
    conn = raw_connection(db_url)
    try:
        with pytest.raises(Exception, match="has instances"):
            conn.execute("DELETE FROM templates WHERE name = 'inner'")
            conn.commit()
    finally:
        conn.close()
    assert store.template_versions()["inner"] == [1]
