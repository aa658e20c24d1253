"""Copies and urges in a real browser (SPEC §15): alice urges the manager from her flow
page (the button is then disabled and says when she may urge again) and the manager finds
the urge in his inbox's Reminders; alice copies someone in finance, who opens the flow from
"Copied to me", and alice's flow page then shows that it was read."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.people import team  # noqa: F401 (a fixture)

pytestmark = pytest.mark.browser
SUBMIT = re.compile("^Submit")  # "Submit: Fill in the claim"


def _claim(alice, amount: str) -> None:
    alice.get_by_role("button", name="Start reimbursement").click()
    alice.wait_for_url("**/flow/**")
    claim = alice.locator('.circle-box[data-circle="claim"]')
    claim.get_by_label("Amount").fill(amount)
    claim.get_by_label("What was it for?").fill("Train tickets")  # manager: the default
    claim.get_by_role("button", name=SUBMIT).click()
    approve = alice.locator('.circle-box[data-circle="approve"]')
    expect(approve.locator(".waits-for")).to_have_text("Waits for approver")


def test_an_urge_reaches_the_manager_and_the_button_waits(new_page, team,  # noqa: F811
                                                           screenshot) -> None:
    alice = new_page()
    team(alice, "alice")
    _claim(alice, "41")
    urge = alice.locator("#urge-flow")
    expect(urge).to_be_enabled()
    urge.click()
    expect(alice.get_by_text("Urged approver")).to_be_visible()  # the toast
    expect(urge).to_be_disabled()
    expect(alice.locator("#urge-flow-hint")).to_contain_text("you may urge again in")
    screenshot(alice, "nudges_urged_button_waits")

    manager = new_page()
    team(manager, "approver", path="/inbox")
    manager.get_by_role("tab", name=re.compile("^Reminders")).click()
    mail = manager.locator('.mail[data-kind="urge"]').first
    expect(mail).to_contain_text("Reminder: Expense claim waits for you")
    screenshot(manager, "nudges_urge_in_the_inbox")
    for page in (alice, manager):
        page.context.close()


def test_a_copy_read_by_its_reader_shows_as_read(new_page, team, screenshot) -> None:  # noqa: F811
    alice = new_page()
    team(alice, "alice")
    _claim(alice, "42")
    alice.locator("#copy-flow").click()
    dialog = alice.get_by_role("alertdialog")
    dialog.locator("#copy-users").fill("finance")
    dialog.get_by_label("Comment").fill("FYI")
    screenshot(alice, "nudges_copy_dialog")
    alice.locator("#confirm-copy").click()
    expect(dialog).to_have_count(0)
    row = alice.locator('#flow-copies [data-copied="finance"]')
    expect(row).to_contain_text("not read yet")
    flow_url = alice.url

    finance = new_page()
    team(finance, "finance", path="/inbox")
    tab = finance.get_by_role("tab", name=re.compile("^Copied to me"))
    expect(tab.locator(".unread").first).to_have_text("1")
    tab.click()
    mail = finance.locator('.mail[data-kind="cc"]').first
    expect(mail).to_contain_text("Copy: Expense claim")
    finance.goto(flow_url)
    expect(finance.locator("#read-only")).to_be_visible()  # follows it, read-only

    alice.reload()
    row = alice.locator('#flow-copies [data-copied="finance"]')
    expect(row.locator(".copy-read")).to_be_visible()
    expect(row).to_contain_text("read")
    screenshot(alice, "nudges_copy_read")
    for page in (alice, finance):
        page.context.close()
