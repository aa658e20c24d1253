"""The templates page's part of SPEC §11, without a browser: a per-circle count opens the
instances it counts (each with its flow page), and migrating instances to another version
runs only after a dry run of the very same request was shown; errors are messages."""

from __future__ import annotations

import copy
import json

from bpflow_app.pages.migration_state import MigrationState
from bpflow_app.pages.templates_state import TemplatesState
from bpflow_app.templatesview import parse_map
from tests.app.helpers import run
from tests.conftest import run_async


def go(handler) -> list:
    """Drive an async handler to its end: its events."""
    return run(run_async(handler))


def chosen(make_state, name: str, version: int) -> tuple[TemplatesState, MigrationState]:
    """The templates page of root with `name` `version` chosen: its state, and the
    migration panel's (offered the choice in the same event)."""
    state = make_state(TemplatesState, user="root")
    run(state.load())
    run(state.choose(name, version))
    return state, run_async(state.get_state(MigrationState))

CLAIM = {"amount": 12, "reason": "train", "manager": "bob"}


def v2(store) -> dict:
    """reimbursement with `review` renamed `check` and a new `notify` before `done`."""
    body = copy.deepcopy(store.latest_body("reimbursement"))
    for c in body["circles"]:
        if c["uri"] == "review":
            c["uri"] = "check"
        if c["uri"] == "pay":
            c["deps"] = [["check"]]
        if c["uri"] == "done":
            c["deps"] = [["notify"]]
    body["circles"].insert(4, {"uri": "notify", "deps": [["pay"]], "box": {"confirm": "Ok?"}})
    return body


def started(store, n: int = 2) -> list[str]:
    alice = store.user("alice")
    ids = [store.start("reimbursement", {}, alice).id for _ in range(n)]
    inst = store.get(ids[0])
    store.complete(ids[0], "claim", store.engine.bookmark(inst, "claim"), CLAIM, "alice")
    return ids


def versions(store, ids) -> list[int]:
    return [store.get(i).version for i in ids]


def test_a_circle_count_opens_the_instances_it_counts(make_state, web_store):
    ids = started(web_store)
    state, _ = chosen(make_state, "reimbursement", 1)
    counts = {s.circle: s for s in state.stats}
    assert counts["claim"].success == 1 and counts["claim"].waiting == 1
    state.show_at("claim", "success")
    assert [i.id for i in state.at_items] == [ids[0]] and state.at_total == 1
    assert state.at_items[0].href == f"/flow/{ids[0]}"
    assert state.at_items[0].user == "alice" and state.at_items[0].status == "running"
    state.show_at("claim", "waiting")
    assert [i.id for i in state.at_items] == [ids[1]]
    state.close_at()
    assert state.at_circle == "" and state.at_items == []


def test_migrating_needs_a_dry_run_of_the_same_request_first(make_state, web_store):
    ids = started(web_store)
    web_store.put_template(v2(web_store))
    state, mig = chosen(make_state, "reimbursement", 2)
    assert mig.versions == ["1", "2"] and (mig.mig_from, mig.mig_to) == ("1", "2")
    assert mig.template == "reimbursement" and not mig.can_migrate
    events = go(mig.migrate())
    assert "dry run" in str(events) and versions(web_store, ids) == [1, 1]

    mig.set_mig_map("review -> check")
    go(mig.dry_run())
    assert mig.mig_shown and mig.mig_dry and mig.can_migrate
    assert {i.id for i in mig.mig_migrated} == set(ids) and mig.mig_refused == []
    assert versions(web_store, ids) == [1, 1]  # a dry run changes nothing

    mig.set_mig_map("review -> check\n")  # the same map: the dry run still holds
    assert mig.can_migrate
    mig.set_mig_map("")  # another request: dry run it first
    assert not mig.can_migrate and not mig.mig_shown
    mig.set_mig_map("review = check")
    go(mig.dry_run())
    events = go(mig.migrate())
    assert "Migrated 2 flows to version 2; 0 refused" in str(events)
    assert versions(web_store, ids) == [2, 2]
    run(state.choose(state.name, state.version))  # what the Migrate button runs next
    assert mig.mig_shown and not mig.mig_dry and not mig.can_migrate
    assert {i.id for i in mig.mig_migrated} == set(ids)
    assert {s.circle for s in state.stats} >= {"check", "notify"}

    # nothing left at v1: a dry run says so; from v2 to v1 `notify` would be removed
    go(mig.dry_run())
    assert mig.mig_migrated == [] and mig.mig_refused == []
    mig.set_mig_from("2")
    mig.set_mig_to("1")
    mig.set_mig_map("check -> review")
    go(mig.dry_run())
    assert {i.id for i in mig.mig_migrated} == set(ids)


def test_an_upload_offers_its_new_version_to_the_migration_panel(make_state, web_store):
    state, mig = chosen(make_state, "reimbursement", 1)
    assert mig.versions == ["1"] and (mig.mig_from, mig.mig_to) == ("1", "1")
    run(state.paste({"body": json.dumps(v2(web_store))}))
    assert (state.name, state.version) == ("reimbursement", 2)
    assert mig.versions == ["1", "2"] and (mig.mig_from, mig.mig_to) == ("1", "2")


def test_refusals_are_listed_with_their_reasons(make_state, web_store):
    ids = started(web_store, 3)
    approved = ids[0]
    inst = web_store.get(approved)
    web_store.complete(approved, "approve", web_store.engine.bookmark(inst, "approve"),
                       {"approved": True}, "root")
    web_store.abort(ids[2])
    body = web_store.latest_body("reimbursement")  # v2: no approval any more
    body = {**body, "circles": [c for c in body["circles"] if c["uri"] != "approve"]}
    body["circles"][1] = {**body["circles"][1], "deps": [["claim"]]}
    web_store.put_template(body)
    _, mig = chosen(make_state, "reimbursement", 2)
    go(mig.dry_run())
    assert [i.id for i in mig.mig_migrated] == [ids[1]]  # the terminated one is not asked
    [refused] = mig.mig_refused
    assert refused.id == approved and refused.href == f"/flow/{approved}"
    assert refused.reasons == ("circle 'approve' is removed and its result is progress no"
                               " kept circle carries on")
    assert (refused.version, refused.status) == (1, "running")
    go(mig.migrate())
    assert [web_store.get(i).version for i in ids] == [1, 2, 1]
    assert [i.id for i in mig.mig_refused] == [approved]


def test_errors_are_messages(make_state, web_store):
    started(web_store)
    web_store.put_template(v2(web_store))
    _, mig = chosen(make_state, "reimbursement", 2)
    mig.set_mig_map("nope -> check")
    go(mig.dry_run())
    assert "'nope' is no circle of the old version" in mig.mig_error
    assert not mig.mig_shown and not mig.can_migrate
    mig.set_mig_map("just words")
    go(mig.dry_run())
    assert mig.mig_error == "Line 1 of the map is not “old -> new”: just words"
    mig.set_mig_map('{"review": ')
    go(mig.dry_run())
    assert mig.mig_error.startswith("The map is not JSON")
    mig.set_mig_map("")
    mig.set_mig_to("2")
    mig.set_mig_from("2")
    go(mig.dry_run())
    assert "already" in mig.mig_error
    other = make_state(MigrationState, user="alice")
    assert "Only administrators" in str(go(other.dry_run()))


def test_the_map_is_typed_as_lines_or_json():
    assert parse_map("") == {}
    assert parse_map(" a -> b \n\n c.d = e.f ") == {"a": "b", "c.d": "e.f"}
    assert parse_map('{"a": "b"}') == {"a": "b"}


def test_the_panels_messages_are_in_the_pages_language(make_state, web_store):
    ids = started(web_store)
    web_store.put_template(v2(web_store))
    state, mig = chosen(make_state, "reimbursement", 2)
    state.choice = "zh-CN"  # the language menu's (shared by the page's states)
    assert mig.lang == "zh-CN"
    assert "请先预演这次迁移" in str(go(mig.migrate()))
    mig.set_mig_map("just words")
    go(mig.dry_run())
    assert mig.mig_error == "对照表第 1 行不是“旧 -> 新”：just words"
    mig.set_mig_map('{"review": ')
    go(mig.dry_run())
    assert mig.mig_error.startswith("对照表不是 JSON：第 1 行")
    mig.set_mig_map("review -> check")
    go(mig.dry_run())
    assert "已将 2 个流程迁移到版本 2，0 个被拒绝" in str(go(mig.migrate()))
    assert versions(web_store, ids) == [2, 2]


def test_the_templates_page_shows_where_flows_wait(make_state, web_store):
    """SPEC §18's heat map: once the worker folded the history, the chosen template's
    circles carry their waits (in the reader's words) and the page offers the map."""
    from bpflow import operations
    from bpflow.worker import Worker
    root = web_store.user("root")
    web_store.put_template({"name": "slow", "circles": [
        {"uri": "fill", "box": {"form": [{"name": "n", "type": "integer"}]}}]})
    for n in range(3):
        inst = web_store.start("slow", {}, root)
        web_store.complete(inst.id, "fill", web_store.engine.bookmark(inst, "fill"), {"n": n})
    assert operations.fold_waits(Worker(web_store)) > 0
    state, _ = chosen(make_state, "slow", 1)
    assert state.waited and not state.heat
    (node,) = [n for n in state.waits.nodes if n.id == "fill"]
    assert node.tip.startswith("3 waits: median ") and node.fill != state.preview.nodes[0].fill
    state.show_heat(True)
    assert state.heat
