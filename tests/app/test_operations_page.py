"""The operations page's state (SPEC §18): an admin finds failed instances as one
incident, opens its instances, retries all that match, and sees the progress and a result
per instance; the filter form's fields become the filter the lists are read by."""

from __future__ import annotations

from datetime import UTC, datetime

from bpflow.worker import Worker
from bpflow_app.pages.operations_state import OperationsState, filter_of
from tests.app.helpers import run

FLOW = {"name": "claim", "kind": "linear", "circles": [
    {"uri": "a", "box": {"form": [{"name": "v", "type": "integer"}]}}]}


def test_an_admin_retries_an_incidents_instances_and_follows_the_results(make_state,
                                                                           web_store):
    web_store.put_template(FLOW)
    failed = []
    for _ in range(3):
        inst = web_store.start("claim", {})
        web_store.fail(inst.id, "a", web_store.engine.bookmark(inst, "a"), "HTTP 503",
                       actor="t")
        failed.append(inst.id)
    web_store.start("claim", {})  # running: not in the incident
    state = make_state(OperationsState, user="root")
    state.load()
    [incident] = state.incidents
    assert (incident.template, incident.circle, incident.reason, incident.count) == (
        "claim", "a", "HTTP 503", 3)
    state.open_incident("claim", "a", "HTTP 503")
    assert state.total == 3 and {r.id for r in state.rows} == set(failed)
    state.choose_everything(True)
    events = run(state.run("retry"))
    assert state.matched == 3 and "3" in str(events)
    Worker(web_store).run_duties()
    state._guarded(state._progress, admin=True)
    assert (state.done, state.refused, state.finished) == (3, 0, True)
    assert sorted((r.instance, r.state) for r in state.results) == [
        (i, "done") for i in sorted(failed)]
    assert {web_store.get(i).status for i in failed} == {"running"}


def test_nothing_chosen_runs_nothing_and_a_user_sees_no_list(make_state, web_store):
    web_store.put_template(FLOW)
    web_store.start("claim", {})
    state = make_state(OperationsState, user="root")
    state.load()
    assert "Choose instances" in str(run(state.run("abort")))
    assert state.operation == ""
    user = make_state(OperationsState, user="alice")
    user.load()
    assert user.rows == [] and user.incidents == []


def test_the_filter_form_becomes_the_filter():
    assert filter_of({"template": " claim ", "status": "failed", "version": "2",
                      "waiting_hours": "1.5", "started_after": "2026-03-01",
                      "updated_before": "not a date", "circle": ""}) == {
        "template": "claim", "status": "failed", "version": 2, "waiting_hours": 1.5,
        "started_after": datetime(2026, 3, 1, tzinfo=UTC)}
    assert filter_of({"status": "sleeping", "version": "-1"}) == {}
