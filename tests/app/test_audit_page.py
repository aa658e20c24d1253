"""The audit log page's state (SPEC §18): an admin reads the tenant's entries newest
first a page at a time, filtered by actor, kind and time typed in the browser's zone,
each entry's before and after field by field; nobody else reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bpflow import audit
from bpflow_app.pages.audit import FIELD_WORDS, KIND_WORDS
from bpflow_app.pages.audit_state import PAGE_SIZE, AuditState, Change, changes
from tests.app.helpers import run


def fill(store, n: int) -> None:
    root = store.user("root")
    for i in range(n):
        store.add_audit(root["id"], "root", "user_roles_changed", f"user{i}",
                        {"roles": ["approver"]}, {"roles": ["admin", "approver"]})


def test_pages_go_newest_first_and_back(make_state, web_store):
    fill(web_store, PAGE_SIZE + 10)
    state = make_state(AuditState, user="root")
    state.load()
    targets = [e.target for e in state.entries]
    assert targets[0] == f"user{PAGE_SIZE + 9}" and len(targets) == PAGE_SIZE
    assert state.older and not state.newer
    state.older_page()
    assert [e.target for e in state.entries] == [f"user{i}" for i in range(9, -1, -1)]
    assert not state.older and state.newer
    state.newer_page()
    assert [e.target for e in state.entries] == targets and not state.newer
    assert state.entries[0].changes == [Change("roles", "approver", "admin, approver")]


def test_filters_by_actor_kind_and_local_time(make_state, web_store):
    fill(web_store, 3)
    web_store.add_audit(None, None, "tenant_added", "acme", None, {"admin": "boss"})
    state = make_state(AuditState, user="root")
    state.load()
    assert [e.actor for e in state.entries][:2] == ["", "root"]  # "": the operator
    run(state.apply({"actor": "root", "kind": "any"}))
    assert len(state.entries) == 3
    run(state.apply({"kind": "tenant_added"}))
    assert [e.target for e in state.entries] == ["acme"]
    # "from" an hour ahead of now in a browser 8 hours east of UTC (offset -480)
    ahead = datetime.now(UTC) + timedelta(hours=9)
    run(state.apply({"since": ahead.strftime("%Y-%m-%dT%H:%M"), "tz": "-480"}))
    assert state.entries == []
    behind = datetime.now(UTC) + timedelta(hours=7)
    run(state.apply({"since": behind.strftime("%Y-%m-%dT%H:%M"), "tz": "-480"}))
    assert len(state.entries) == 4
    events = run(state.apply({"until": "not a time"}))
    assert state.errors == {"until": "Enter a date and time"} and "check" in str(events)
    run(state.clear())
    assert len(state.entries) == 4 and state.errors == {}


def test_only_admins_read_the_log(make_state, web_store):
    fill(web_store, 2)
    state = make_state(AuditState, user="alice")
    events = run(state.load())
    assert state.entries == [] and "administrators" in str(events).lower()


def test_before_and_after_read_field_by_field():
    assert changes({"retired": False}, {"retired": True}) == [
        Change("retired", "false", "true")]
    assert changes(None, {"url": "https://x", "events": ["a", "b"]}) == [
        Change("url", "", "https://x"), Change("events", "", "a, b")]
    assert changes(None, None) == []
    assert changes([1], None) == [Change("", "1", "")]


def test_every_kind_has_its_words():
    assert set(KIND_WORDS) == set(audit.KINDS)
    assert {"roles", "retired", "version", "url"} <= set(FIELD_WORDS)
