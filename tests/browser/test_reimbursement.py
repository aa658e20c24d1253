"""Journeys 1 and 6: the shipped expense claim walked by a team, at desktop and at phone
width (390 px), and again by a Chinese-speaking team at phone width. The claimant fills in
the claim and picks her manager (`approver`), the manager approves it in his inbox,
someone in finance claims the review on the flow page and accepts it, the manager records
the payment, and the claimant's flow page, open all along in her own browser and never
reloaded, follows every step to "completed".

In the Chinese run the claimant and the finance user turn their flow pages to 中文 from
the header (the page changes at once, without a reload: its boxes and history are made
again in Chinese), and every step is checked in Chinese; the manager keeps English (each
person reads the page in their own language)."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.people import team  # noqa: F401 (a fixture)

pytestmark = pytest.mark.browser
BOUND_S = 90
# run -> (viewport, amount, claimant, finance user, their language)
# (the phone's run is the Chinese one: the pages' English at 390 px is checked on every
# page by test_accessibility.py)
RUNS = {"journey1": ((1280, 800), "42.5", "alice", "finance", "en"),
        "journey6_phone_zh": ((390, 844), "8.75", "wangfang", "zhaolei", "zh-CN")}
PEOPLE = {"wangfang": ("wangfang-pass-1", ["user"]),
          "zhaolei": ("zhaolei-pass-1", ["finance"])}  # the Chinese run's
# what each language's page says (the steps' descriptions are the template's, in both)
SAYS = {
    "en": {"you": "Waits for you", "approver": "Waits for approver",
           "finance": "Waits for someone in finance", "held_you": "Held by you",
           "held": "Held by {name}", "due": "due ", "submit": "Submit",
           "take_back": "Take it back", "claim": "Claim", "give_back": "Give back",
           "accept": "Accept", "completed": "completed", "done": "This flow is complete.",
           "history": "History", "started": "{name} started the flow",
           "approved": "approver approved “The manager approves”",
           "claim_step": "Fill in the claim",
           "pay": "Pay {amount} to {name} for: Train tickets?"},
    "zh-CN": {"you": "等待你处理", "approver": "等待 approver 处理",
              "finance": "等待 finance 角色的成员 处理", "held_you": "由你处理中",
              "held": "由 {name} 处理中", "due": "截止", "submit": "提交",
              "take_back": "撤回", "claim": "认领", "give_back": "取消认领",
              "accept": "确认", "completed": "已完成", "done": "流程已完成。",
              "history": "流转记录", "started": "{name} 发起了流程",
              "approved": "approver 同意了“经理审批”",
              "claim_step": "填写报销单",
              "pay": "向 {name} 支付 {amount}，事由：Train tickets。确认付款吗？"},
}


def _box(page, cid: str):
    return page.locator(f'.circle-box[data-circle="{cid}"]')


def _button(box, name: str):
    """A box's button by its visible word (its accessible name adds the step's)."""
    return box.get_by_role("button", name=re.compile(f"^{re.escape(name)}"))


def _tap(page, target) -> None:
    """Click `target`; on a phone the toasts cover the bottom of the screen until they go
    (a pointer resting on them keeps them), so move away and let them go first."""
    if page.viewport_size["width"] < 600:
        page.mouse.move(1, 1)
        expect(page.locator("[data-sonner-toast]")).to_have_count(0)
    target.click()


def _speak(page, lang: str) -> None:
    """Choose the page's language in the header's menu (nothing to do for English)."""
    if lang == "en":
        return
    page.evaluate("window.__noReload = true")
    page.locator("#lang-menu").click()
    page.locator(f"#lang-{lang}").click()
    expect(page.locator("html")).to_have_attribute("lang", lang)


@pytest.mark.parametrize("run", list(RUNS))
def test_a_team_walks_an_expense_claim_and_the_claimant_sees_it_complete_live(
        run, new_page, team, app_store, screenshot) -> None:  # noqa: F811
    (width, height), amount, claimant, finance_user, lang = RUNS[run]
    says = SAYS[lang]
    for name, (password, roles) in PEOPLE.items():
        if app_store.user(name) is None:
            app_store.add_user(name, password, roles)
    subject = f"Expense claim of {amount} by {claimant}"
    started = time.monotonic()

    def sign_in(page, name: str, path: str = "/flows") -> None:
        if name not in PEOPLE:
            team(page, name, path=path)
            return
        page.goto(path)
        page.get_by_label("Username").fill(name)
        page.get_by_label("Password").fill(PEOPLE[name][0])
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#user-menu")).to_contain_text(name)

    alice = new_page(width, height)  # the claimant
    sign_in(alice, claimant)
    alice.get_by_role("button", name="Start reimbursement").click()
    alice.wait_for_url("**/flow/**")
    flow = alice.url
    alice.evaluate("window.__noReload = true")
    _speak(alice, lang)
    claim = _box(alice, "claim")
    expect(claim.locator("h3")).to_have_text(says["claim_step"])  # its description
    expect(claim.locator(".waits-for")).to_have_text(says["you"])
    # a picker of the approvers, the form's default chosen
    expect(claim.locator("#f-claim-manager")).to_have_text("approver")
    _tap(alice, _button(claim, says["submit"]))  # nothing filled in: two errors
    errors = claim.locator(".field-error")
    expect(errors).to_have_count(2)
    claim.locator("#f-claim-amount").fill(amount)
    claim.locator("#f-claim-amount").press("Tab")  # fixed: its error goes at once
    expect(errors).to_have_count(1)
    claim.locator("#f-claim-reason").fill("Train tickets")
    claim.locator("#f-claim-reason").press("Tab")
    expect(errors).to_have_count(0)
    _tap(alice, _button(claim, says["submit"]))
    approve = _box(alice, "approve")
    expect(approve.locator(".waits-for")).to_have_text(says["approver"])
    expect(_button(approve, says["take_back"])).to_be_visible()
    expect(alice.locator("#flow-controls")).to_be_visible()  # hers to control, explained
    expect(alice.locator("#intervention-switch")).to_have_count(0)  # an admin's
    expect(alice.locator(".legend-junction")).to_have_count(0)  # no junction drawn
    screenshot(alice, f"{run}_approval_pending")

    manager = new_page(width, height)
    team(manager, "approver", path="/inbox")
    _tap(manager, manager.get_by_role("button", name=f"Open {subject}"))
    mail = manager.locator(".mail", has_text=subject)
    expect(mail.get_by_text("Signature verified")).to_be_visible()
    _tap(manager, mail.get_by_role("button", name="Approve"))
    expect(mail.get_by_text("Decided: approved")).to_be_visible()
    screenshot(manager, f"{run}_approved_in_inbox")

    review = _box(alice, "review")  # the claimant's page follows: finance's turn
    expect(review.locator(".waits-for")).to_have_text(says["finance"])
    expect(review.locator(".due-at")).to_contain_text(says["due"])
    expect(_button(review, says["accept"])).to_have_count(0)

    finance = new_page(width, height)
    sign_in(finance, finance_user, path=flow)
    _speak(finance, lang)
    review = _box(finance, "review")
    expect(finance.locator("#read-only")).to_be_visible()
    expect(review.get_by_text(says["pay"].format(amount=amount, name=claimant))
           ).to_be_visible()
    _tap(finance, _button(review, says["claim"]))
    expect(review.locator(".waits-for")).to_have_text(says["held_you"])
    expect(_button(review, says["give_back"])).to_be_visible()
    expect(_box(alice, "review").locator(".waits-for")).to_have_text(
        says["held"].format(name=finance_user))
    screenshot(finance, f"{run}_review_claimed")
    _tap(finance, _button(review, says["accept"]))
    expect(finance.locator('.flow-node[data-circle="review"]')).to_have_attribute(
        "data-state", "success")

    pay = _box(alice, "pay")
    expect(pay.locator(".waits-for")).to_have_text(says["held"].format(name="approver"))
    expect(pay.locator("#f-pay-reference")).to_have_count(0)  # not hers to fill in
    manager.goto(flow)
    pay = _box(manager, "pay")
    expect(pay.locator(".waits-for")).to_have_text("Waits for you")
    pay.get_by_label("Payment reference").fill("TX-1001")
    screenshot(manager, f"{run}_payment")
    _tap(manager, _button(pay, "Submit"))
    expect(manager.locator("#flow-status")).to_contain_text("completed")

    expect(alice.locator("#flow-status")).to_contain_text(says["completed"])
    expect(alice.locator("#flow-banner")).to_contain_text(says["done"])
    assert alice.evaluate("window.__noReload") is True  # followed live, never reloaded
    screenshot(alice, f"{run}_completed_live")
    _tap(alice, alice.get_by_role("tab", name=says["history"]))
    history = alice.locator("#history")
    expect(history).to_contain_text(says["started"].format(name=claimant))
    expect(history).to_contain_text(says["approved"])
    expect(history).not_to_contain_text("circle")  # told in words, not the engine's

    manager.goto("/flows")  # the manager takes part in the claimant's flow
    row = manager.locator(f'.taking-part-row[data-instance="{flow.rsplit("/", 1)[-1]}"]')
    expect(row).to_contain_text(f"started by {claimant}")
    expect(row).to_contain_text("completed")
    for page in (alice, manager, finance):
        page.context.close()
    assert time.monotonic() - started < BOUND_S
