"""Journeys of returns and of the inbox following new mail (SPEC §15, issue #30):

(1) bob has the inbox open on Approvals; a claim sent for his approval by another process
    (a worker run here) appears without a reload within a few seconds, with the header's
    unread badge and the tab's counting it.
(2) bob returns a claim to the first step with a comment from the approval card of the
    flow page ("Return to…": the steps listed by their descriptions, a comment, a
    confirmation); alice finds the claim form filled in with her answers and the comment
    above it, a sentence in the history and a mail in her inbox; she amends it and sends
    it again, and bob gets a new approval.

Screenshots under test-output/browser/returns_*.png.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from bpflow.mailbox import Mailbox
from tests.browser.test_tasks_inbox import claim_waiting_for_bob, wait_for

pytestmark = pytest.mark.browser


def test_1_a_new_approval_appears_in_the_open_inbox_without_a_reload(
        new_page, sign_in, app_store, screenshot) -> None:
    bob = new_page()
    sign_in(bob, "bob", path="/inbox?tab=approval")
    expect(bob.get_by_role("tab", name=re.compile("^Approvals"))).to_have_attribute(
        "data-state", "active")
    tab = bob.get_by_role("tab", name=re.compile("^Approvals")).locator(".unread").first
    header = bob.locator("#nav-inbox-badge")
    expect(bob.locator("#mail-list, #inbox-empty")).to_be_visible()

    def count(badge) -> int:
        return int(badge.text_content()) if badge.count() else 0
    in_tab, in_header = count(tab), count(header)
    bob.evaluate("window.__noReload = true")
    time.sleep(1.5)  # the inbox follows its mail from now on
    sent = time.monotonic()
    claim_waiting_for_bob(app_store, 77.25, "Train to the customer")
    subject = "Expense claim of 77.25 by alice"
    mail = bob.locator(".mail", has_text=subject)
    expect(mail).to_be_visible(timeout=8_000)
    assert time.monotonic() - sent < 8, "the inbox took too long to follow"
    expect(mail.locator(".row-badge", has_text="waiting for you")).to_be_visible()
    expect(tab).to_have_text(str(in_tab + 1))
    expect(header).to_have_text(str(in_header + 1))
    assert bob.evaluate("window.__noReload") is True
    screenshot(bob, "returns_journey1_new_approval_pushed")


def test_2_return_to_the_first_step_and_the_requester_amends(
        new_page, sign_in, app_store, screenshot) -> None:
    iid = claim_waiting_for_bob(app_store, 120, "Hotel in Lyon")
    bob = new_page()
    sign_in(bob, "bob", path="/flow/" + iid)
    approve = bob.locator('.circle-box[data-circle="approve"]')
    expect(approve.get_by_text("Waiting for approval").first).to_be_visible()
    approve.get_by_role("button", name="Return to an earlier step: The manager approves"
                        ).click()
    dialog = bob.get_by_role("alertdialog")
    expect(dialog).to_contain_text("Return to an earlier step")
    target = dialog.locator("#return-target")
    expect(target.locator("option")).to_have_text(
        ["Fill in the claim", "The beginning (Fill in the claim)"])
    target.select_option("@start")
    bob.locator("#confirm-return").click()
    expect(dialog.get_by_role("alert")).to_contain_text("returning needs a comment")
    dialog.get_by_label("What to amend").fill("please attach the receipt")
    screenshot(bob, "returns_journey2_return_to_dialog")
    bob.locator("#confirm-return").click()
    expect(dialog).to_have_count(0)
    expect(bob.get_by_text("Returned to “The beginning (Fill in the claim)”")).to_be_visible()
    wait_for(lambda: app_store.get(iid).circles["claim"].task is not None)
    assert app_store.get(iid).circles["claim"].task["returned"]["comment"] == \
        "please attach the receipt"

    alice = new_page()
    sign_in(alice, "alice", path="/flow/" + iid)
    claim = alice.locator('.circle-box[data-circle="claim"]')
    expect(claim.locator(".returned-note")).to_contain_text(
        "bob sent this back from “The manager approves”: “please attach the receipt”")
    expect(claim.get_by_label("Amount")).to_have_value("120")
    expect(claim.get_by_label("What was it for?")).to_have_value("Hotel in Lyon")
    screenshot(alice, "returns_journey2_prefilled_with_the_comment")
    alice.get_by_role("tab", name="History").click()
    expect(alice.get_by_text(
        "bob returned “The manager approves” to the beginning — “please attach the receipt”"
    )).to_be_visible()
    alice.get_by_role("tab", name="Flow").click()
    claim.get_by_label("What was it for?").fill("Hotel in Lyon (receipt attached)")
    claim.get_by_role("button", name=re.compile("^Submit")).click()
    expect(alice.locator('.circle-box[data-circle="approve"]').get_by_text(
        "Waiting for approval").first).to_be_visible()
    screenshot(alice, "returns_journey2_amended_and_sent")

    alice.goto("/inbox?tab=message")
    told = alice.locator(".mail", has_text="Sent back: Fill in the claim")
    expect(told).to_be_visible()
    told.get_by_role("button", name="Open Sent back: Fill in the claim").click()
    expect(told.locator(".mail-body")).to_contain_text("please attach the receipt")
    screenshot(alice, "returns_journey2_mail_to_the_requester")
    wait_for(lambda: any(m["instance"] == iid and m["decision"] is None
                         for m in Mailbox(app_store).inbox(app_store.user("bob"))))
