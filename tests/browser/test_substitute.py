"""Journey: the manager is away. Before leaving he names bob his substitute ("My
substitute" in the user menu: who, from, until); alice's claim then asks the manager for
approval, and bob finds it in his inbox, says he stands in for the manager, and approves
it: the claim goes on, and the card and the history say "bob for approver"."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.people import team  # noqa: F401 (a fixture)

pytestmark = pytest.mark.browser
SUBJECT = "Expense claim of 77 by alice"
SUBMIT = re.compile("^Submit")


def _local(page, hours: float) -> str:
    """A `datetime-local` value `hours` from now in the browser's time zone."""
    offset = page.evaluate("new Date().getTimezoneOffset()")
    at = datetime.now(UTC) + timedelta(hours=hours) - timedelta(minutes=offset)
    return at.strftime("%Y-%m-%dT%H:%M")


def test_a_substitute_approves_for_the_manager_who_is_away(new_page, team,  # noqa: F811
                                                           app_store, screenshot) -> None:
    started = time.monotonic()
    manager = new_page()
    team(manager, "approver")
    manager.locator("#user-menu").click()
    manager.locator("#my-substitute").click()
    manager.wait_for_url("**/substitute")
    expect(manager.locator("#substitute-none")).to_have_text("You have no substitute.")
    manager.locator("#substitute-to").click()
    manager.get_by_role("option", name="bob", exact=True).click()
    manager.get_by_label("From").fill(_local(manager, -1))
    manager.get_by_label("Until").fill(_local(manager, 72))
    screenshot(manager, "substitute_form")
    manager.locator("#save-substitute").click()
    expect(manager.locator("#substitute-status")).to_have_text("Active now")
    expect(manager.locator("#substitute-current")).to_contain_text("bob stands in from")
    screenshot(manager, "substitute_active")
    manager.context.close()

    alice = new_page()
    team(alice, "alice")
    alice.get_by_role("button", name="Start reimbursement").click()
    alice.wait_for_url("**/flow/**")
    iid = alice.url.rsplit("/", 1)[-1]
    claim = alice.locator('.circle-box[data-circle="claim"]')
    claim.get_by_label("Amount").fill("77")
    claim.get_by_label("What was it for?").fill("Taxi to the airport")
    claim.get_by_role("button", name=SUBMIT).click()
    expect(alice.locator('.circle-box[data-circle="approve"]')).to_be_visible()

    bob = new_page()
    team(bob, "bob", path="/inbox")
    mail = bob.locator(".mail", has_text=SUBJECT)
    expect(mail).to_be_visible()
    bob.get_by_role("button", name=f"Open {SUBJECT}").click()
    expect(mail.locator(".mail-for")).to_have_text("You stand in for approver")
    screenshot(bob, "substitute_inbox_offers_it")
    mail.get_by_role("button", name="Approve").click()
    expect(mail.locator(".mail-decided-by")).to_have_text("By bob for approver")
    expect(mail.get_by_role("button", name="Approve")).to_have_count(0)
    screenshot(bob, "substitute_approved_for_the_manager")

    expect(alice.locator('.circle-box[data-circle="approve"]')).to_have_count(0)
    screenshot(alice, "substitute_claim_goes_on")
    actors = [e["actor"] for e in app_store.history(iid) if e["circle"] == "approve"
              and e["kind"] == "circle_succeeded"]
    assert actors == ["bob for approver"]
    for page in (alice, bob):
        page.context.close()
    assert time.monotonic() - started < 120
