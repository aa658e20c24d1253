"""The audit log (SPEC §18), on SQLite and PostgreSQL: every admin action over the API
is one entry with who, what, to what, before and after; `GET /api/audit` reads it by
cursor and filters; the log is append-only (no statement in the code changes or removes
an entry, and the database refuses both)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import exc, text

from bpflow import audit
from tests.api.test_events import Client
from tests.conftest import SECRET

FORM = {"form": [{"name": "n", "type": "integer"}]}
FLOW = {"name": "flow", "circles": [{"uri": "a", "box": FORM}]}
FLOW2 = {"name": "flow", "circles": [{"uri": "a", "box": FORM},
                                     {"uri": "b", "deps": [["a"]]}]}


@pytest.fixture
def call(db_url):
    from bpflow.store import Store
    store = Store(db_url, secret=SECRET)
    for name, roles in {"admin": ["admin"], "alice": ["user"], "bob": ["user"]}.items():
        store.add_user(name, f"pw-{name}", roles)
    yield Client(store)
    store.close()


def test_every_admin_action_is_one_entry_with_before_and_after(call):
    store = call.store
    assert call("admin", "POST", "/api/templates", FLOW).status_code == 201
    assert call("admin", "POST", "/api/templates", FLOW).status_code == 200  # unchanged
    iid = store.start("flow", {}, store.user("alice")).id
    assert call("admin", "POST", "/api/templates", FLOW2).status_code == 201
    assert call("admin", "POST", "/api/templates/flow/migrate",
                {"from": 1, "to": 2}).status_code == 200
    assert call("admin", "POST", "/api/templates/flow/retire").status_code == 200
    assert call("admin", "POST", "/api/templates/flow/restore").status_code == 200
    hook = call("admin", "POST", "/api/webhooks", {
        "url": "http://127.0.0.1:9/h", "events": ["circle.left"], "secret": "s" * 16}).json()
    assert call("admin", "DELETE", f"/api/webhooks/{hook['id']}").status_code == 200
    assert call("admin", "POST", "/api/users/bob/password",
                {"password": "a-new-password"}).status_code == 200
    now = datetime.now(UTC)
    period = {"from": now.isoformat(), "until": (now + timedelta(days=1)).isoformat()}
    assert call("admin", "PUT", "/api/users/bob/substitute",
                {"to": "alice", **period}).status_code == 200
    assert call("alice", "PUT", "/api/me/substitute",  # one's own: not an admin's act
                {"to": "admin", **period}).status_code == 200

    r = call("admin", "GET", "/api/audit")
    assert r.status_code == 200
    items = r.json()["items"]
    got = [(e["actor"], e["kind"], e["target"], e["before"], e["after"]) for e in items]
    assert got[:7] == [
        ("admin", "template_uploaded", "flow", None, {"version": 1}),
        ("admin", "template_uploaded", "flow", {"version": 1}, {"version": 2}),
        ("admin", "instances_migrated", "flow", {"version": 1, "instances": [iid]},
         {"version": 2, "map": {}, "refused": []}),
        ("admin", "template_retired", "flow", {"retired": False}, {"retired": True}),
        ("admin", "template_restored", "flow", {"retired": True}, {"retired": False}),
        ("admin", "webhook_added", str(hook["id"]), None,
         {"url": "http://127.0.0.1:9/h", "events": ["circle.left"]}),
        ("admin", "webhook_deleted", str(hook["id"]),
         {"url": "http://127.0.0.1:9/h", "events": ["circle.left"]}, None),
    ]
    assert got[7] == ("admin", "password_reset", "bob", None, None)
    assert got[8][:4] == ("admin", "substitute_set", "bob", None)
    assert got[8][4]["to"] == "alice"
    assert len(got) == 9
    assert all(e["actor_id"] == store.user("admin")["id"] for e in items)
    assert "s" * 16 not in r.text and "a-new-password" not in r.text  # no secrets


def test_the_log_is_read_by_cursor_and_filters_for_admins_only(call):
    store = call.store
    admin, alice = store.user("admin"), store.user("alice")
    for i in range(5):
        store.add_audit(admin["id"], "admin", "template_retired", f"t{i}")
    store.add_audit(None, None, "quotas_changed", "default")
    first = call("admin", "GET", "/api/audit", limit=2).json()
    assert [e["target"] for e in first["items"]] == ["t0", "t1"]
    rest = call("admin", "GET", "/api/audit", after=first["next"]).json()
    assert [e["target"] for e in rest["items"]] == ["t2", "t3", "t4", "default"]
    assert call("admin", "GET", "/api/audit", after=rest["next"]).json() == {
        "items": [], "next": rest["next"]}
    assert [e["target"] for e in call("admin", "GET", "/api/audit",
                                      kind="quotas_changed").json()["items"]] == ["default"]
    assert len(call("admin", "GET", "/api/audit", actor="admin").json()["items"]) == 5
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    assert call("admin", "GET", "/api/audit", since=later).json()["items"] == []
    assert len(call("admin", "GET", "/api/audit", until=later).json()["items"]) == 6
    assert call("admin", "GET", "/api/audit", kind="no_such_kind").status_code == 422
    assert call("alice", "GET", "/api/audit").status_code == 403
    assert alice is not None


def test_the_database_refuses_to_change_or_remove_an_entry(call):
    store = call.store
    entry = store.add_audit(None, None, "tenant_added", "default")
    for statement in ("UPDATE audit SET target = 'x' WHERE id = :i",
                      "DELETE FROM audit WHERE id = :i"):
        with pytest.raises(exc.DatabaseError), store.db.begin() as conn:
            conn.execute(text(statement), {"i": entry})
    assert [e["target"] for e in store.audit_entries()] == ["default"]


def test_no_statement_in_the_code_changes_or_removes_an_entry():
    root = Path(__file__).resolve().parents[2]
    sources = [p for d in ("bpflow", "bpflow_app", "engine") for p in (root / d).rglob("*.py")]
    writes = re.compile(r"(update|delete)\(\s*audit_t|audit_t\.(update|delete)|"
                        r"(UPDATE|DELETE FROM)\s+audit\b")
    found = [str(p) for p in sources if writes.search(p.read_text(encoding="utf-8"))
             and "migrations" not in p.parts]
    assert found == []
    assert len(sources) > 100  # the tree was read


def test_a_kind_not_in_the_one_list_is_refused(call):
    with pytest.raises(ValueError):
        audit.record(call.store, None, "made_up", "x")
