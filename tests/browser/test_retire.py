"""Journey 5: an admin retires a template (after a confirmation) and alice is no longer
offered it on My flows; restored, it is offered again. And the users page: an admin gives
alice a custom role in the roles dialog."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
LEAVE = {"name": "leave", "title": "Leave request", "circles": [
    {"uri": "ask", "box": {"form": [{"name": "days", "type": "integer", "required": True}]}},
    {"uri": "done", "deps": [["ask"]]}]}


def test_5_an_admin_retires_a_template_and_alice_is_no_longer_offered_it(
        page, new_page, sign_in, app_store, screenshot) -> None:
    app_store.put_template(LEAVE)
    alice = new_page()
    sign_in(alice, "alice")
    expect(alice.get_by_role("button", name="Start leave")).to_be_visible()

    sign_in(page, "root", path="/templates")
    line = page.locator('.template-line[data-template="leave"]')
    line.get_by_role("button", name="Retire leave").click()
    dialog = page.get_by_role("alertdialog")
    expect(dialog).to_contain_text("Retire leave?")
    expect(dialog).to_contain_text("Flows already running go on")
    screenshot(page, "journey5_retire_confirmation")
    page.locator("#confirm-retirement").click()
    expect(dialog).to_have_count(0)
    expect(line.locator(".retired-badge")).to_be_visible()
    expect(line.get_by_role("button", name="Restore leave")).to_be_visible()
    screenshot(page, "journey5_retired")

    alice.reload()
    expect(alice.get_by_role("button", name="Start reimbursement")).to_be_visible()
    expect(alice.get_by_role("button", name="Start leave")).to_have_count(0)
    screenshot(alice, "journey5_alice_not_offered")

    line.get_by_role("button", name="Restore leave").click()
    page.locator("#confirm-retirement").click()
    expect(line.locator(".retired-badge")).to_have_count(0)
    alice.reload()
    expect(alice.get_by_role("button", name="Start leave")).to_be_visible()


def test_an_admin_gives_a_user_a_custom_role(page, sign_in, app_store, screenshot) -> None:
    app_store.add_user("dora", "dora-pass-1", ["user"])
    sign_in(page, "root", path="/users")
    row = page.locator('tr[data-user="dora"]')
    row.get_by_role("button", name="Change the roles of dora").click()
    dialog = page.get_by_role("alertdialog")
    expect(dialog).to_contain_text("Roles of dora")
    dialog.get_by_label("Roles").fill("user, finance")
    screenshot(page, "users_roles_dialog")
    page.locator("#confirm-roles").click()
    expect(dialog).to_have_count(0)
    expect(row).to_contain_text("finance, user")
    assert app_store.user("dora")["roles"] == ["finance", "user"]
    expect(page.locator('tr[data-user="root"]')).to_contain_text("you")
