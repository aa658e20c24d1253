"""What a migration writes (SPEC §11), on SQLite and PostgreSQL: the instance row moves
to the other version and its pinned nested versions, removed circles lose their rows and
their open tasks' audience, new circles get rows, and a cold store reads back exactly what
the writing store holds."""

from __future__ import annotations

from sqlalchemy import select

from bpflow.store import Store
from bpflow.store.tables import audience_t, circles_t, pinned_t, templates_t
from tests.conftest import SECRET

INNER = {"name": "inner", "circles": [
    {"uri": "x", "box": {"form": [{"name": "v", "type": "string"}]}},
    {"uri": "end", "deps": [["x"]]}]}
INNER_2 = {"name": "inner", "circles": [
    {"uri": "x", "box": {"form": [{"name": "v", "type": "string"}]}},
    {"uri": "y", "deps": [["x"]], "box": {"confirm": "Sure?"}},
    {"uri": "end", "deps": [["y"]]}]}
OUTER = {"name": "outer", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "review", "deps": [["a"]], "assign": {"roles": ["finance"]},
     "box": {"confirm": "Ok?"}},
    {"uri": "sub", "deps": [["a"]], "box": {"action": {"type": "flow", "template": "inner"}}},
    {"uri": "done", "deps": [["review"], ["sub"]]}]}
OUTER_2 = {"name": "outer", "title": "without the review", "circles": [
    OUTER["circles"][0], OUTER["circles"][2], {"uri": "done", "deps": [["sub"]]}]}


def circles_of(store: Store, table, iid: str) -> set[str]:
    """The circles of an instance that have rows in `table`."""
    with store.reader() as conn:
        return set(conn.execute(select(table.c.circle).where(table.c.instance_id == iid))
                   .scalars())


def test_a_migration_moves_the_rows_and_a_cold_store_reads_the_same(store, db_url):
    store.add_user("alice", "pw-alice", ["user"])
    store.put_template(INNER)
    store.put_template(OUTER)
    alice = store.user("alice")
    inst = store.start("outer", {}, alice)
    inst = store.complete(inst.id, "a", store.engine.bookmark(inst, "a"), {"n": 1}, "alice")
    assert inst.circles["review"].task["roles"] == ["finance"]
    assert "review" in circles_of(store, audience_t, inst.id)  # offered to finance
    store.put_template(INNER_2)  # the nested flow's next version ...
    store.put_template(OUTER_2)  # ... which the outer one's next version pins

    out = store.migrate_instances("outer", 1, 2, {}, actor="root")
    assert out == {"migrated": [inst.id], "refused": []}
    moved = store.get(inst.id)
    assert moved.version == 2 and "review" not in moved.circles
    assert {"sub.y"} <= set(moved.circles) and moved.circles["sub.y"].pristine
    assert set(moved.circles) == {"a", "sub", "sub.x", "sub.y", "sub.end", "done"}
    # the rows: no review (nor its open task's audience), a row for sub.y, inner v2 pinned
    assert circles_of(store, circles_t, inst.id) == set(moved.circles)
    assert "review" not in circles_of(store, audience_t, inst.id)
    with store.reader() as conn:
        pinned = conn.execute(select(templates_t.c.name, templates_t.c.version)
                              .join(pinned_t, pinned_t.c.template_id == templates_t.c.id)
                              .where(pinned_t.c.instance_id == inst.id)).all()
    assert [tuple(p) for p in pinned] == [("inner", 2)]
    assert store.locked_versions("inner") == {2}
    assert store.locked_versions("outer") == {2}

    cold = Store(db_url, secret=SECRET)
    try:
        again = cold.get(inst.id)
        assert again.version == 2 and again.to_dict() == moved.to_dict()
        assert cold.engine.ready(again) == ["sub.x"]
        again = cold.complete(inst.id, "sub.x", cold.engine.bookmark(again, "sub.x"),
                              {"v": "1"}, "alice")
        assert cold.engine.ready(again) == ["sub.y"]  # the new nested circle, from v2
    finally:
        cold.close()


def test_another_process_sees_the_migration(store, db_url, monkeypatch):
    """Two stores on one database stand for two processes: the one that did not migrate
    steps the instance on v2 at once (its stale copy loses the compare-and-set) and its
    `peek` (owner and template, for access checks) follows once its copy is no longer
    fresh."""
    from bpflow.store import instances

    store.add_user("alice", "pw-alice", ["user"])
    store.put_template(INNER)
    store.put_template(OUTER)
    other = Store(db_url, secret=SECRET)
    try:
        inst = store.start("outer", {}, store.user("alice"))
        assert other.peek(inst.id).version == 1  # cached over there
        store.put_template(OUTER_2)
        store.migrate_instances("outer", 1, 2, {})
        a = other.get(inst.id)
        moved = other.complete(inst.id, "a", other.engine.bookmark(a, "a"), {"n": 2}, "alice")
        assert moved.version == 2 and "review" not in moved.circles
        assert other.peek(inst.id).version == 2  # the step's copy is kept
        # a copy older than PEEK_FRESH_S is read again
        store.peek(inst.id)
        monkeypatch.setattr(instances, "PEEK_FRESH_S", -1.0)
        fresh = store.peek(inst.id)
        assert fresh.version == 2 and fresh.circles["a"].state == "success"
    finally:
        other.close()


def test_a_later_step_never_changes_an_instance_already_answered(store):
    """What a step answers (and what `peek` gives) is the instance as it then was, for
    good: a later step of the same instance, a migration to another version among them,
    works on a copy of its own (an answer still being made on another thread once
    paired v1's circles with v2's runs)."""
    store.add_user("alice", "pw-alice", ["user"])
    store.put_template(INNER)
    store.put_template(OUTER)
    started = store.start("outer", {}, store.user("alice"))
    at_start = started.to_dict()
    peeked = store.peek(started.id)
    stepped = store.complete(started.id, "a", store.engine.bookmark(started, "a"), {"n": 1},
                             "alice")
    assert started.to_dict() == at_start and peeked.to_dict() == at_start
    after_step = stepped.to_dict()
    assert after_step["circles"]["a"]["state"] == "success"
    store.put_template(OUTER_2)
    assert store.migrate_instances("outer", 1, 2, {}) == {"migrated": [started.id],
                                                          "refused": []}
    assert stepped.to_dict() == after_step and stepped.version == 1
    assert "review" in stepped.template.plan.nodes and "review" in stepped.circles
    moved = store.peek(started.id)
    assert moved.version == 2 and "review" not in moved.circles
