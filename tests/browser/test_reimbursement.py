"""Journeys 1 and 6: the shipped expense claim walked by a team, at desktop and at phone
width (390 px). Alice fills in the claim and picks her manager (`approver`), the manager
approves it in his inbox, someone in finance claims the review on the flow page and
accepts it, the manager records the payment, and alice's flow page, open all along in her
own browser and never reloaded, follows every step to "completed"."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from tests.browser.people import team  # noqa: F401 (a fixture)

pytestmark = pytest.mark.browser
BOUND_S = 90
RUNS = {"journey1": ((1280, 800), "42.5"), "journey6_phone": ((390, 844), "17.25")}


def _box(page, cid: str):
    return page.locator(f'.circle-box[data-circle="{cid}"]')


def _tap(page, target) -> None:
    """Click `target`; on a phone the toasts cover the bottom of the screen until they go
    (a pointer resting on them keeps them), so move away and let them go first."""
    if page.viewport_size["width"] < 600:
        page.mouse.move(1, 1)
        expect(page.locator("[data-sonner-toast]")).to_have_count(0)
    target.click()


@pytest.mark.parametrize("run", list(RUNS))
def test_a_team_walks_an_expense_claim_and_alice_sees_it_complete_live(
        run, new_page, team, screenshot) -> None:  # noqa: F811
    (width, height), amount = RUNS[run]
    subject = f"Expense claim of {amount} by alice"
    started = time.monotonic()

    alice = new_page(width, height)
    team(alice, "alice")
    alice.get_by_role("button", name="Start reimbursement").click()
    alice.wait_for_url("**/flow/**")
    flow = alice.url
    alice.evaluate("window.__noReload = true")
    claim = _box(alice, "claim")
    expect(claim.locator(".waits-for")).to_have_text("Waits for you")
    # a picker of the approvers, the form's default chosen
    expect(claim.get_by_label("Manager")).to_have_text("approver")
    claim.get_by_label("Amount").fill(amount)
    claim.get_by_label("What was it for?").fill("Train tickets")
    _tap(alice, claim.get_by_role("button", name="Submit claim"))
    approve = _box(alice, "approve")
    expect(approve.locator(".waits-for")).to_have_text("Waits for approver")
    expect(approve.get_by_role("button", name="Take back approve")).to_be_visible()
    screenshot(alice, f"{run}_approval_pending")

    manager = new_page(width, height)
    team(manager, "approver", path="/inbox")
    _tap(manager, manager.get_by_role("button", name=f"Open {subject}"))
    mail = manager.locator(".mail", has_text=subject)
    expect(mail.get_by_text("Signature verified")).to_be_visible()
    _tap(manager, mail.get_by_role("button", name="Approve"))
    expect(mail.get_by_text("Decided: approved")).to_be_visible()
    screenshot(manager, f"{run}_approved_in_inbox")

    review = _box(alice, "review")  # alice's page follows: finance's turn
    expect(review.locator(".waits-for")).to_have_text("Waits for someone in finance")
    expect(review.locator(".due-at")).to_contain_text("due ")
    expect(review.get_by_role("button", name="Accept review")).to_have_count(0)

    finance = new_page(width, height)
    team(finance, "finance", path=flow)
    review = _box(finance, "review")
    expect(finance.locator("#read-only")).to_be_visible()
    expect(review.get_by_text(f"Pay {amount} to alice for: Train tickets?")).to_be_visible()
    _tap(finance, review.get_by_role("button", name="Claim review"))
    expect(review.locator(".waits-for")).to_have_text("Held by you")
    expect(review.get_by_role("button", name="Unclaim review")).to_be_visible()
    expect(_box(alice, "review").locator(".waits-for")).to_have_text("Held by finance")
    screenshot(finance, f"{run}_review_claimed")
    _tap(finance, review.get_by_role("button", name="Accept review"))
    expect(finance.locator('.flow-node[data-circle="review"]')).to_have_attribute(
        "data-state", "success")

    pay = _box(alice, "pay")
    expect(pay.locator(".waits-for")).to_have_text("Held by approver")
    expect(pay.get_by_label("Payment reference")).to_have_count(0)  # not hers to fill in
    manager.goto(flow)
    pay = _box(manager, "pay")
    expect(pay.locator(".waits-for")).to_have_text("Waits for you")
    pay.get_by_label("Payment reference").fill("TX-1001")
    screenshot(manager, f"{run}_payment")
    _tap(manager, pay.get_by_role("button", name="Submit pay"))
    expect(manager.locator("#flow-status")).to_contain_text("completed")

    expect(alice.locator("#flow-status")).to_contain_text("completed")
    expect(alice.locator("#flow-banner")).to_contain_text("This flow is complete.")
    assert alice.evaluate("window.__noReload") is True  # followed live, never reloaded
    screenshot(alice, f"{run}_completed_live")

    manager.goto("/flows")  # the manager takes part in alice's flow
    row = manager.locator(f'.taking-part-row[data-instance="{flow.rsplit("/", 1)[-1]}"]')
    expect(row).to_contain_text("started by alice")
    expect(row).to_contain_text("completed")
    for page in (alice, manager, finance):
        page.context.close()
    assert time.monotonic() - started < BOUND_S
