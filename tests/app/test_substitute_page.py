"""The substitute page's states (`/substitute`): none, set and active, set for later,
refused (a cycle, oneself, missing fields), cleared; an admin's view of someone's; the
inbox offering the user's task to the substitute."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bpflow import substitutes
from bpflow.access import Caller
from bpflow_app.pages.substitute_state import SubstituteState, local_time, template_list
from bpflow_app.pages.tasks_state import TasksState
from tests.app.helpers import run


def local(hours: float) -> str:
    """A `datetime-local` value `hours` from now, in UTC (an offset of 0)."""
    return (datetime.now(UTC) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


def test_times_of_the_browser_zone_and_the_template_list():
    assert local_time("2026-12-01T09:00", "-480") == datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
    assert local_time("2026-12-01T09:00", "60") == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert local_time("", "0") is None and local_time("2026-12-01T09:00", "x") is None
    assert local_time("2026-12-01T09:00", "99999") is None
    assert template_list(" a, b  c,") == ["a", "b", "c"] and template_list(" ") is None


def test_none_then_set_active_then_cleared(make_state, web_store):
    state = make_state(SubstituteState, user="alice", path="/substitute")
    state.load()
    assert (state.whose, state.mine, state.status) == ("alice", True, "none")
    assert "alice" not in state.people and "carol" in state.people
    run(state.save({"to": "", "from": "", "until": "", "tz": "0"}))
    assert set(state.errors) == {"to", "from", "until"}
    events = run(state.save({"to": "carol", "from": local(-1), "until": local(48),
                             "tz": "0", "templates": ""}))
    assert state.errors == {} and "carol is the substitute now" in str(events)
    assert (state.status, state.to, state.templates, state.set_by) == \
        ("active", "carol", [], "alice")
    assert state.starts.endswith("+00:00") and state.until > state.starts
    events = run(state.save({"to": "alice", "from": local(-1), "until": local(48),
                             "tz": "0"}))
    assert "a user cannot be their own substitute" in str(events)
    assert state.to == "carol"  # unchanged
    events = run(state.clear())
    assert state.status == "none" and "The substitute was cleared" in str(events)


def test_set_for_later_and_refused_cycle(make_state, web_store):
    carol = make_state(SubstituteState, user="carol", path="/substitute")
    carol.load()
    run(carol.save({"to": "alice", "from": local(24), "until": local(48), "tz": "0"}))
    assert carol.status == "upcoming"
    alice = make_state(SubstituteState, user="alice", path="/substitute")
    alice.load()
    events = run(alice.save({"to": "carol", "from": local(-1), "until": local(48),
                             "tz": "0"}))
    assert "substitutes may not form a cycle" in str(events) and alice.status == "none"


def test_an_admin_sees_and_sets_someones_and_others_may_not(make_state, web_store):
    root = make_state(SubstituteState, user="root", path="/substitute?user=carol")
    root.load()
    assert (root.whose, root.mine, root.status) == ("carol", False, "none")
    run(root.save({"to": "alice", "from": local(-1), "until": local(10), "tz": "0",
                   "templates": "reimbursement"}))
    assert (root.status, root.templates, root.set_by) == ("active", ["reimbursement"], "root")
    alice = make_state(SubstituteState, user="alice", path="/substitute?user=carol")
    events = alice.load()
    assert "only admins may set another user's substitute" in str(events)
    assert alice.status == "none"


def test_the_inbox_offers_the_users_task_to_the_substitute(make_state, web_store):
    template = {"name": "errand", "circles": [
        {"uri": "do", "description": "Run the errand", "assign": {"users": ["bob", "root"]},
         "box": {"confirm": "Done?"}}, {"uri": "end", "deps": [["do"]]}]}
    web_store.put_template(template)
    web_store.start("errand", {}, web_store.user("alice"))
    now = datetime.now(UTC)
    substitutes.put(web_store, Caller.of(web_store.user("bob")), "bob", "carol",
                    now - timedelta(hours=1), now + timedelta(days=1))
    tasks = make_state(TasksState, user="carol", path="/inbox?tab=tasks")
    tasks.load()
    assert [t.uri for t in tasks.tasks["candidate"]] == ["do"] and tasks.tasks["me"] == []
    assert "bob" in tasks.tasks["candidate"][0].waits
