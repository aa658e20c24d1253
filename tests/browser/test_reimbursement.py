"""Journeys 1-3: a claim is filled in, approved from the approver's inbox, and the
claimant's open page follows to the end without a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
CLAIM_SUBJECT = "Expense claim of 42.5 by alice"


@pytest.fixture(scope="module")
def claimant(new_page, sign_in):
    """Alice's page on her new reimbursement flow, left open for the whole module."""
    page = new_page()
    sign_in(page, "alice")
    page.get_by_role("button", name="Start reimbursement").click()
    page.wait_for_url("**/flow/**")
    page.evaluate("window.__noReload = true")
    return page


def test_1_user_starts_the_claim_and_sees_the_approval_pending(claimant, screenshot) -> None:
    page = claimant
    claim = page.locator('.circle-box[data-circle="claim"]')
    expect(claim).to_be_visible()
    claim.get_by_label("Amount").fill("")
    claim.get_by_label("What was it for?").fill("Train tickets")
    claim.get_by_label("Manager (username)").fill("bob")
    claim.get_by_role("button", name="Submit claim").click()
    expect(claim.get_by_text("Amount is required")).to_be_visible()  # per-field error

    claim.get_by_label("Amount").fill("42.5")
    claim.get_by_role("button", name="Submit claim").click()

    approve = page.locator('.circle-box[data-circle="approve"]')
    expect(approve.get_by_text("Waiting for approval").first).to_be_visible()
    expect(approve.get_by_text("bob", exact=True)).to_be_visible()
    expect(page.locator('.flow-node[data-circle="claim"]')).to_have_attribute(
        "data-state", "success")
    expect(page.locator('.flow-node[data-circle="approve"]')).to_have_attribute(
        "data-state", "ready")
    screenshot(page, "journey1_approval_pending")


def test_2_approver_approves_from_the_inbox(claimant, new_page, sign_in, screenshot) -> None:
    page = new_page()
    sign_in(page, "bob", path="/inbox")
    expect(page.get_by_role("tab", name="Approvals")).to_contain_text("1")
    page.get_by_role("button", name=f"Open {CLAIM_SUBJECT}").click()
    mail = page.locator(".mail", has_text=CLAIM_SUBJECT)
    expect(mail.get_by_text("Signature verified")).to_be_visible()
    mail.get_by_text("Signed payload").click()
    expect(mail.locator(".signed-payload")).to_contain_text('"approver": "bob"')
    mail.get_by_label("Comment").fill("Fine, thanks")
    mail.get_by_role("button", name="Approve").click()
    expect(mail.get_by_text("Decided: approved — Fine, thanks")).to_be_visible()
    screenshot(page, "journey2_approved_in_inbox")
    mail.get_by_role("link", name="Open the flow").click()  # the approver may look
    expect(page.locator("#read-only")).to_be_visible()
    expect(page.locator('.flow-node[data-circle="approve"]')).to_have_attribute(
        "data-state", "success")
    expect(page.locator(".circle-box")).to_have_count(0)


def test_3_user_sees_the_flow_complete_without_reloading(claimant, screenshot) -> None:
    page = claimant  # the page opened in journey 1, never reloaded since
    review = page.locator('.circle-box[data-circle="review"]')
    expect(review.get_by_text("Pay 42.5 to alice for: Train tickets?")).to_be_visible()
    expect(page.locator('.flow-node[data-circle="approve"]')).to_have_attribute(
        "data-state", "success")
    review.get_by_role("button", name="Accept review").click()
    pay = page.locator('.circle-box[data-circle="pay"]')
    pay.get_by_label("Payment reference").fill("TX-1001")
    pay.get_by_role("button", name="Submit pay").click()
    expect(page.locator("#flow-status")).to_contain_text("completed")
    expect(page.locator("#flow-banner")).to_contain_text("This flow is complete.")
    assert page.evaluate("window.__noReload") is True
    screenshot(page, "journey3_completed_live")
