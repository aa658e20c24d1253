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


def test_an_incident_opens_all_its_instances_whatever_its_reason(make_state, web_store):
    """A reason is matched whole: one ending in a newline (an HTTP answer's body) or longer
    than a filter typed by hand still opens every instance of its incident."""
    web_store.put_template(FLOW)
    reasons = ["HTTP 503: down\n", "HTTP 500: " + "x" * 450, "  spaced  "]
    for reason in reasons:
        for _ in range(2):
            inst = web_store.start("claim", {})
            web_store.fail(inst.id, "a", web_store.engine.bookmark(inst, "a"), reason,
                           actor="t")
    state = make_state(OperationsState, user="root")
    state.load()
    assert sorted((i.reason, i.count) for i in state.incidents) == sorted(
        (r, 2) for r in reasons)
    for incident in list(state.incidents):
        state.open_incident(incident.template, incident.circle, incident.reason)
        assert state.total == 2, repr(incident.reason)


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


SLOW = {"name": "refund", "circles": [
    {"uri": "review", "box": {"form": [{"name": "ok", "type": "boolean"}]}},
    {"uri": "pay", "deps": [["review"]], "box": {"form": [{"name": "v", "type": "integer"}]}}]}


def _failed_after_a_slow_review(web_store, n: int) -> list[str]:
    """`n` refunds started three hours ago, reviewed now (a wait of three hours), then
    failed at `pay` at once; the history folded into the durations."""
    from datetime import timedelta

    from bpflow import operations
    from engine.runtime import utcnow
    earlier = lambda: utcnow() - timedelta(hours=3)  # noqa: E731
    web_store.put_template(SLOW)
    web_store.clock = web_store.engine.clock = earlier
    try:
        started = [web_store.start("refund", {}) for _ in range(n)]
    finally:
        web_store.clock = web_store.engine.clock = utcnow
    ids = []
    for inst in started:
        inst = web_store.complete(inst.id, "review", web_store.engine.bookmark(inst, "review"),
                                  {"ok": True})
        web_store.fail(inst.id, "pay", web_store.engine.bookmark(inst, "pay"), "HTTP 503",
                       actor="t")
        ids.append(inst.id)
    while operations.fold_waits(Worker(web_store)):
        pass
    return ids


def test_an_incident_draws_where_its_template_keeps_flows_waiting(make_state, web_store):
    """SPEC §18: the operations page draws the filter's template as a heat map, the
    slow step the hottest, each step's figures in the reader's words."""
    from bpflow_app.drawing import HEAT
    _failed_after_a_slow_review(web_store, 3)
    state = make_state(OperationsState, user="root")
    state.load()
    assert state.template == ""  # no template named: nothing drawn
    state.open_incident("refund", "pay", "HTTP 503")
    assert (state.template, state.template_version, state.waited) == ("refund", 1, True)
    nodes = {n.id: n for n in state.heat.nodes}
    assert nodes["review"].fill == HEAT[-1] and nodes["pay"].fill == HEAT[0]
    assert nodes["review"].tip.startswith("3 waits: median 3 h")
    assert nodes["pay"].tip.startswith("3 waits: median ")
    state.search({"template": "nothing-of-the-kind"})
    assert state.template == "" and state.heat.nodes == []


def test_a_bulk_migration_runs_once_its_dry_run_of_the_same_request_finished(
        make_state, web_store):
    ids = _failed_after_a_slow_review(web_store, 2)
    web_store.put_template({**SLOW, "title": "Refund v2"})
    state = make_state(OperationsState, user="root")
    state.open_incident("refund", "pay", "HTTP 503")
    assert (state.versions, state.mig_from, state.mig_to) == (["1", "2"], "1", "2")
    state.choose_everything(True)
    assert "dry run" in str(run(state.migrate(False)))
    assert state.operation == ""
    run(state.migrate(True))
    assert state.dry_run and state.matched == 2 and not state.can_migrate
    Worker(web_store).run_duties()
    state._guarded(state._progress, admin=True)
    assert (state.done, state.refused, state.finished) == (2, 0, True)
    assert {web_store.get(i).version for i in ids} == {1}  # a dry run changes nothing
    assert state.can_migrate
    state.set_mig_map("pay -> review")  # another request: its own dry run first
    assert not state.can_migrate
    state.set_mig_map("")
    assert state.can_migrate
    run(state.migrate(False))
    assert not state.dry_run and state.matched == 2
    Worker(web_store).run_duties()
    state._guarded(state._progress, admin=True)
    assert (state.done, state.finished) == (2, True)
    assert {web_store.get(i).version for i in ids} == {2}
