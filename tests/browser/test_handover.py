"""Journeys of SPEC §15's hand-overs in the inbox: the manager delegates an approval to
someone in finance, who answers, and the manager confirms the answer (only then does the
flow move on); and the manager transfers another to an admin, who decides it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.people import team  # noqa: F401 (a fixture)

pytestmark = pytest.mark.browser
SUBMIT = re.compile("^Submit")


def _claim(new_page, team, amount: str) -> str:  # noqa: F811
    """alice's expense claim of `amount`, waiting for the manager's approval: its id."""
    alice = new_page()
    team(alice, "alice")
    alice.get_by_role("button", name="Start reimbursement").click()
    alice.wait_for_url("**/flow/**")
    claim = alice.locator('.circle-box[data-circle="claim"]')
    claim.get_by_label("Amount").fill(amount)
    claim.get_by_label("What was it for?").fill("Train tickets")
    claim.get_by_role("button", name=SUBMIT).click()
    expect(alice.locator('.circle-box[data-circle="approve"]')).to_be_visible()
    iid = alice.url.rsplit("/", 1)[-1]
    alice.context.close()
    return iid


def _open(page, subject: str):
    mail = page.locator(".mail", has_text=subject)
    expect(mail).to_be_visible()
    page.get_by_role("button", name=f"Open {subject}").click()
    expect(mail.locator(".mail-body")).to_be_visible()
    return mail


def _hand(page, mail, how: str, to: str, comment: str, screenshot, shot: str) -> None:
    """Transfer… or Delegate… on the opened mail: pick `to`, comment, confirm."""
    mail.get_by_role("button", name=f"{how}…").click()
    dialog = page.get_by_role("alertdialog")
    expect(dialog).to_contain_text(how)
    dialog.get_by_role("combobox").click()
    page.get_by_role("option", name=to, exact=True).click()
    dialog.locator("#mail-hand-comment").fill(comment)
    screenshot(page, shot)
    page.locator("#confirm-mail-hand").click()
    expect(dialog).to_have_count(0)


def test_an_approver_delegates_the_delegate_answers_the_owner_confirms(
        new_page, team, app_store, screenshot) -> None:  # noqa: F811
    iid = _claim(new_page, team, "41")
    subject = "Expense claim of 41 by alice"
    manager = new_page()
    team(manager, "approver", path="/inbox")
    mail = _open(manager, subject)
    _hand(manager, mail, "Delegate", "finance", "Please check the tickets", screenshot,
          "handover_delegate_dialog")
    expect(mail.locator(".mail-handed")).to_have_text(
        "You asked finance to answer; waiting for their answer")

    finance = new_page()
    team(finance, "finance", path="/inbox")
    theirs = _open(finance, subject)
    expect(theirs.locator(".mail-handed")).to_contain_text(
        "approver asked you to answer this for them")
    expect(theirs.get_by_role("button", name="Send back")).to_have_count(0)
    theirs.get_by_role("textbox").fill("Tickets match the receipt")
    theirs.get_by_role("button", name="Approve").click()
    expect(theirs.get_by_text("Decided: approved")).to_be_visible()
    screenshot(finance, "handover_delegate_answered")
    assert app_store.get(iid).circles["approve"].state == "waiting"  # only an answer

    manager.reload()
    mail = _open(manager, subject)
    expect(mail.locator(".mail-handed")).to_have_text(
        "finance answered: approved — “Tickets match the receipt”")
    screenshot(manager, "handover_owner_sees_the_answer")
    mail.get_by_role("button", name="Confirm their answer").click()
    expect(mail.get_by_text("Decided: approved")).to_be_visible()
    assert app_store.get(iid).circles["approve"].state == "success"
    kinds = [e["kind"] for e in app_store.history(iid)]
    assert kinds.index("approval_delegated") < kinds.index("approval_answered") < \
        kinds.index("approval_confirmed")
    for page in (manager, finance):
        page.context.close()


def test_an_approval_transferred_is_decided_by_the_new_approver(
        new_page, team, app_store, screenshot) -> None:  # noqa: F811
    iid = _claim(new_page, team, "42")
    subject = "Expense claim of 42 by alice"
    manager = new_page()
    team(manager, "approver", path="/inbox")
    mail = _open(manager, subject)
    _hand(manager, mail, "Transfer", "root", "Over my limit", screenshot,
          "handover_transfer_dialog")
    expect(mail.get_by_text("Transferred to someone else — Over my limit")).to_be_visible()
    expect(mail.get_by_role("button", name="Approve")).to_have_count(0)

    root = new_page()
    team(root, "root", path="/inbox")
    theirs = _open(root, subject)
    expect(theirs.locator(".mail-handed")).to_have_text(
        "approver transferred this approval to you — “Over my limit”")
    screenshot(root, "handover_transferred_to_root")
    theirs.get_by_role("button", name="Approve").click()
    expect(theirs.get_by_text("Decided: approved")).to_be_visible()
    assert app_store.get(iid).circles["approve"].state == "success"
    root.goto(f"/flow/{iid}")
    root.get_by_role("tab", name="History").click()
    expect(root.locator("#history")).to_contain_text(
        "approver transferred the approval of “The manager approves” to root — “Over my"
        " limit”")
    screenshot(root, "handover_flow_page_history")
    for page in (manager, root):
        page.context.close()
