"""Journey: an admin moves running instances to a new template version (SPEC §11). Two
trips run at v1 (one past its first circle); the admin uploads v2 (the first circle
renamed, a check added before the end), opens the instances at a circle from the
per-circle counts, runs a dry run, sees what would happen with nothing changed yet,
migrates, opens a migrated instance's flow page and finishes it on v2 through the new
circle."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
V1 = {"name": "trip", "title": "Business trip", "circles": [
    {"uri": "ask", "box": {"form": [{"name": "where", "type": "string", "label": "Where",
                                     "required": True}]}},
    {"uri": "book", "deps": [["ask"]],
     "box": {"form": [{"name": "ref", "type": "string", "label": "Booking reference",
                       "required": True}]}},
    {"uri": "done", "deps": [["book"]]}]}
V2 = {**V1, "circles": [
    {**V1["circles"][0], "uri": "request"},
    {**V1["circles"][1], "deps": [["request"]]},
    {"uri": "check", "deps": [["book"]], "box": {"confirm": "Booked ${book.ref}?"}},
    {"uri": "done", "deps": [["check"]]}]}


def _box(page, cid: str):
    return page.locator(f'.circle-box[data-circle="{cid}"]')


def test_an_admin_dry_runs_then_migrates_and_a_moved_flow_goes_on_at_v2(
        page, sign_in, app_store, screenshot) -> None:
    app_store.put_template(V1)
    root = app_store.user("root")
    waiting = app_store.start("trip", {}, root).id
    asked = app_store.start("trip", {}, root)
    app_store.complete(asked.id, "ask", app_store.engine.bookmark(asked, "ask"),
                       {"where": "Rome"}, "root")

    sign_in(page, "root", path="/templates")
    page.get_by_label("Template JSON").fill(json.dumps(V2, indent=1))
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#upload-outcome")).to_contain_text("Stored trip version 2")
    expect(page.locator("#template-preview")).to_contain_text("trip v2")

    # the per-circle counts open the instances they count
    page.get_by_role("button", name="1 flow at ask: success").click()
    listed = page.locator("#circle-instances .instance-line")
    expect(listed).to_have_count(1)
    expect(listed.first).to_have_attribute("data-instance", asked.id)

    migration = page.locator("#migration")
    expect(migration).to_contain_text("Migrate flows of v1 to v2")
    run = page.locator("#migrate-run")
    expect(run).to_be_disabled()
    page.get_by_label("Map of renamed circles").fill("ask -> request")
    page.locator("#migrate-dry-run").click()
    expect(page.locator("#migration-outcome")).to_contain_text(
        "Dry run: 2 flows would be migrated, 0 refused. Nothing was changed.")
    expect(page.locator("#migration-migrated .instance-line")).to_have_count(2)
    expect(run).to_be_enabled()
    screenshot(page, "migration_dry_run")
    assert [app_store.get(i).version for i in (waiting, asked.id)] == [1, 1]

    run.click()
    expect(page.locator("#migration-outcome")).to_contain_text(
        "Migrated 2 flows; 0 refused.")
    expect(run).to_be_disabled()
    assert [app_store.get(i).version for i in (waiting, asked.id)] == [2, 2]
    screenshot(page, "migration_done")

    page.locator(f'#migration-migrated .instance-line[data-instance="{asked.id}"] a').click()
    page.wait_for_url(f"**/flow/{asked.id}")
    expect(page.locator('.flow-node[data-circle="check"]')).to_be_visible()
    expect(page.locator('.flow-node[data-circle="request"]')).to_have_attribute(
        "data-state", "success")
    book = _box(page, "book")
    book.get_by_label("Booking reference").fill("B-42")
    book.get_by_role("button", name=re.compile("^Submit")).click()
    check = _box(page, "check")
    expect(check.get_by_text("Booked B-42?")).to_be_visible()
    check.get_by_role("button", name=re.compile("^Accept")).click()
    expect(page.locator('.flow-node[data-circle="done"]')).to_have_attribute(
        "data-state", "success")
    screenshot(page, "migration_flow_goes_on_at_v2")
    assert app_store.get(asked.id).status == "completed"
