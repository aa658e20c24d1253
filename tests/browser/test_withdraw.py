"""Journey 3: alice takes back a pending approval from her flow page (after a
confirmation) and the manager's inbox no longer offers it: no Approve or Reject, no
"waiting for you", nothing pending for him. And the starter's other controls: suspend,
resume and abort (with a reason), each after a confirmation; My flows finds the flow by
its status and by text."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from bpflow.access import Caller
from bpflow.mailbox import Mailbox
from tests.browser.people import team  # noqa: F401 (a fixture)

pytestmark = pytest.mark.browser
SUBJECT = "Expense claim of 99 by alice"
SUBMIT = re.compile("^Submit")  # "Submit: Fill in the claim"


def _confirm(page, title: str, reason: str | None = None, before=None) -> None:
    """Answer the confirmation dialog titled `title` (with a reason, if given; `before()`
    is called just before, a screenshot)."""
    dialog = page.get_by_role("alertdialog")
    expect(dialog).to_contain_text(title)
    if reason is not None:
        dialog.get_by_label("Reason").fill(reason)
    if before is not None:
        before()
    page.locator("#confirm-control").click()
    expect(dialog).to_have_count(0)


def test_3_alice_withdraws_a_pending_approval(new_page, team, app_store,  # noqa: F811
                                             screenshot) -> None:
    started = time.monotonic()
    alice = new_page()
    team(alice, "alice")
    alice.get_by_role("button", name="Start reimbursement").click()
    alice.wait_for_url("**/flow/**")
    claim = alice.locator('.circle-box[data-circle="claim"]')
    claim.get_by_label("Amount").fill("99")
    claim.get_by_label("What was it for?").fill("Conference dinner")  # manager: the default
    claim.get_by_role("button", name=SUBMIT).click()
    approve = alice.locator('.circle-box[data-circle="approve"]')
    expect(approve.locator(".waits-for")).to_have_text("Waits for approver")

    manager = new_page()
    team(manager, "approver", path="/inbox")
    mail = manager.locator(".mail", has_text=SUBJECT)
    expect(mail).to_be_visible()  # asked: the request is in his inbox

    expect(approve.get_by_text("get the step before it back to change it")).to_be_visible()
    approve.get_by_role("button", name="Take it back").click()
    _confirm(alice, "Take this step back?", "Wrong amount",
             lambda: screenshot(alice, "journey3_withdraw_confirmation"))
    expect(alice.get_by_text("Took back “The manager approves”")).to_be_visible()  # the toast
    expect(alice.locator('.circle-box[data-circle="approve"]')).to_have_count(0)
    expect(claim.get_by_role("button", name=SUBMIT)).to_be_visible()  # to amend
    screenshot(alice, "journey3_withdrawn")

    manager.reload()
    mail = manager.locator(".mail", has_text=SUBJECT)
    expect(mail).to_be_visible()
    expect(mail.get_by_text("waiting for you")).to_have_count(0)
    manager.get_by_role("button", name=f"Open {SUBJECT}").click()
    expect(mail.get_by_text("withdrawn").first).to_be_visible()
    expect(mail.get_by_role("button", name="Approve")).to_have_count(0)
    expect(mail.get_by_role("button", name="Reject")).to_have_count(0)
    screenshot(manager, "journey3_inbox_no_longer_offers_it")
    approver = Caller.of(app_store.user("approver"))
    [row] = [m for m in Mailbox(app_store).inbox(approver, "approval")
             if m["subject"] == SUBJECT]
    assert row["decision"] == "withdrawn"
    for page in (alice, manager):
        page.context.close()
    assert time.monotonic() - started < 90


def test_alice_suspends_resumes_and_aborts_her_flow(new_page, team,  # noqa: F811
                                                    screenshot) -> None:
    started = time.monotonic()
    alice = new_page()
    team(alice, "alice")
    alice.get_by_role("button", name="Start reimbursement").click()
    alice.wait_for_url("**/flow/**")
    iid = alice.url.rsplit("/", 1)[-1]
    status = alice.locator("#flow-status")

    # each control says what it does (its description, read with it)
    expect(alice.locator("#suspend-flow-hint")).to_contain_text("nobody is asked anything")
    expect(alice.locator("#suspend-flow")).to_have_accessible_description(
        alice.locator("#suspend-flow-hint").inner_text())
    alice.locator("#suspend-flow").click()
    alice.get_by_role("alertdialog").get_by_role("button", name="Cancel").click()
    expect(alice.get_by_role("alertdialog")).to_have_count(0)
    expect(status).to_contain_text("running")  # cancelled: nothing changed
    alice.locator("#suspend-flow").click()
    _confirm(alice, "Suspend this flow?")
    expect(status).to_contain_text("suspended")
    alice.locator("#resume-flow").click()
    _confirm(alice, "Resume this flow?")
    expect(status).to_contain_text("running")

    alice.locator("#abort-flow").click()
    alice.locator("#confirm-control").click()  # no reason yet
    expect(alice.get_by_role("alertdialog")).to_contain_text("Say why the flow is aborted")
    screenshot(alice, "abort_asks_for_a_reason")
    _confirm(alice, "Abort this flow?", "Ordered twice")
    expect(status).to_contain_text("terminated")
    expect(alice.locator("#flow-banner")).to_contain_text("Ordered twice")
    expect(alice.locator("#flow-controls button")).to_have_count(0)

    alice.goto("/flows")  # My flows: filtered by status, then searched by id
    alice.locator("#flows-status").click()
    alice.get_by_role("option", name="terminated").click()
    expect(alice.locator(f'.instance-row:has(a[href="/flow/{iid}"])')).to_be_visible()
    expect(alice.locator(".instance-row", has_text="running")).to_have_count(0)
    alice.locator("#flows-search").fill(iid[:10])
    expect(alice.locator(".instance-row")).to_have_count(1)
    screenshot(alice, "my_flows_filtered")
    alice.locator("#flows-search").fill("no such flow at all")
    expect(alice.get_by_text("No flow matches")).to_be_visible()
    alice.locator("#flows-clear").click()
    expect(alice.locator(".instance-row").first).to_be_visible()
    alice.context.close()
    assert time.monotonic() - started < 90

