"""Journeys of people's work in the inbox (SPEC §10):

(2) two finance users have the review of a claim in "My groups"; the first claims it from
    the Tasks tab and the second, in another browser, sees it gone without a reload; the
    first hands it to the second (the transfer dialog), who sees it arrive in "Mine".
(4) the approver sends a claim back from the inbox with a comment (none: he is told one
    is needed), alice opens her flow, amends the claim and sends it again, and the
    approver gets a new approval waiting for him.
(5) the same in Chinese (a browser asking for zh-CN): someone in finance lands on the
    Tasks tab, where the work is, and claims the review; My flows lists the claim by its
    title with its values and whom it waits for; the approver sends another claim back.

The flows are arranged through the store (the claim filled in, the approval mail sent by
a worker run here) so that each journey spends its time on what it is about.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.worker import Worker

pytestmark = pytest.mark.browser
AXE = (Path(__file__).resolve().parents[2] / ".tools" / "axe" / "node_modules" / "axe-core"
       / "axe.min.js")  # `make axe`
# axe-core's rules of what these pages had wrong: the tabs' `aria-controls` naming nothing,
# an empty table header, names that do not hold the visible text
RULES = ["aria-valid-attr-value", "aria-allowed-attr", "empty-table-header",
         "label-content-name-mismatch", "button-name", "link-name"]
# (the header's outer flow is the frame's, not these pages')
AXE_RUN = """async (rules) => (await axe.run({exclude: [['#outer-steps']]},
  {runOnly: {type: 'rule', values: rules}, resultTypes: ['violations']})).violations.map(
    v => ({id: v.id, nodes: v.nodes.map(n => n.html.slice(0, 160))}))"""
FINANCE = {"fiona": "fiona-pass-1", "frank": "frank-pass-1"}
PAYOUT = {"name": "payout", "title": "Supplier payout", "circles": [
    {"uri": "check", "description": "Check the supplier's bank details",
     "assign": {"roles": ["finance"]}, "due": 1, "box": {"confirm": "Details checked?"}},
    {"uri": "done", "deps": [["check"]]}]}


def sign_in_as(page, name: str, password: str, path: str) -> None:
    page.goto(path)
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#user-menu")).to_contain_text(name)


def claim_waiting_for_bob(store, amount: float, reason: str) -> str:
    """Alice's expense claim, filled in, its approval mail sent to bob."""
    inst = store.start("reimbursement", {}, store.user("alice"))
    Interactions(store).submit(inst.id, "claim", store.engine.bookmark(inst, "claim"),
                               {"amount": amount, "reason": reason, "manager": "bob"},
                               "alice")
    Worker(store).run_once()
    # the server's own worker may have leased the instance first: its mail comes a moment
    # later
    wait_for(lambda: any(m["instance"] == inst.id
                         for m in Mailbox(store).inbox(store.user("bob"))))
    return inst.id


def pick_user(page, control, name: str) -> None:
    """Name a user in a `user` field: its picker of people, or a text input."""
    if control.get_attribute("role") == "combobox":
        control.click()
        page.get_by_role("option", name=name, exact=True).click()
        expect(control).to_contain_text(name)
    else:
        control.fill(name)


def axe_violations(page) -> list[dict]:
    """What axe-core finds wrong with the page as it is now, of `RULES`."""
    assert AXE.exists(), f"{AXE} is missing: run `make axe`"
    page.add_script_tag(path=str(AXE))
    return page.evaluate(AXE_RUN, RULES)


def wait_for(check, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def finance(app_store) -> dict[str, str]:
    for name, password in FINANCE.items():
        if app_store.user(name) is None:
            app_store.add_user(name, password, ["user", "finance"])
    return FINANCE


def test_2_a_claimed_task_leaves_the_other_finance_users_list_at_once(
        new_page, app_store, finance, screenshot) -> None:
    iid = claim_waiting_for_bob(app_store, 64.5, "Taxi to the airport")
    mail = next(m for m in Mailbox(app_store).inbox(app_store.user("bob"))
                if m["instance"] == iid)
    Mailbox(app_store).decide(mail["id"], app_store.user("bob"), "approved")
    app_store.put_template(PAYOUT)
    late = app_store.start("payout", {}, app_store.user("alice")).id  # due after 1 s

    fiona, frank = new_page(), new_page()
    sign_in_as(fiona, "fiona", finance["fiona"], "/inbox?tab=tasks")
    sign_in_as(frank, "frank", finance["frank"], "/inbox?tab=tasks")
    review = f'.task-row[data-instance="{iid}"][data-circle="review"]'
    for page in (fiona, frank):
        expect(page.get_by_role("tab", name="Tasks")).to_have_attribute(
            "data-state", "active")
        row = page.locator("#tasks-candidate " + review)
        expect(row).to_contain_text("Finance checks the claim")
        expect(row).to_contain_text("Expense claim · " + iid[:8])
        expect(row).to_contain_text("Waits for finance")
        expect(page.locator("#tasks-me")).to_contain_text("Nothing assigned to you")
    overdue = fiona.locator(f'#tasks-candidate .task-row[data-instance="{late}"]')
    expect(overdue).to_have_attribute("data-overdue", "true")
    expect(overdue.locator(".row-badge")).to_have_text("overdue")
    frank.evaluate("window.__noReload = true")
    screenshot(frank, "tasks_journey2_my_groups")

    fiona.locator("#tasks-candidate " + review).get_by_role(
        "button", name="Claim Finance checks the claim of " + iid[:8]).click()
    mine = fiona.locator("#tasks-me " + review)
    expect(mine).to_contain_text("Waits for you")
    claimed = time.monotonic()
    expect(frank.locator("#tasks-candidate " + review)).to_have_count(0, timeout=5_000)
    assert time.monotonic() - claimed < 3.5, "the other list took too long to follow"
    assert frank.evaluate("window.__noReload") is True
    assert app_store.get(iid).circles["review"].task["assignee"] == "fiona"
    screenshot(fiona, "tasks_journey2_claimed_mine")
    screenshot(frank, "tasks_journey2_gone_from_my_groups")

    mine.get_by_role("button", name="Transfer Finance checks the claim of " + iid[:8]).click()
    dialog = fiona.get_by_role("alertdialog")
    expect(dialog).to_contain_text("Hand Finance checks the claim")
    dialog.get_by_role("combobox").click()
    fiona.get_by_role("option", name="frank").click()
    fiona.locator("#confirm-hand").click()
    expect(dialog).to_have_count(0)
    expect(fiona.locator("#tasks-me " + review)).to_have_count(0)
    expect(frank.locator("#tasks-me " + review)).to_contain_text("Waits for you")
    expect(frank.get_by_role("link", name="Open Expense claim · " + iid[:8])).to_have_attribute(
        "href", "/flow/" + iid)
    screenshot(frank, "tasks_journey2_delegated_to_frank")
    frank.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing cut off
    expect(frank.get_by_role("link", name="Open Expense claim · " + iid[:8])).to_be_in_viewport()
    screenshot(frank, "tasks_journey2_phone")
    assert frank.evaluate("window.__noReload") is True
    kinds = [e["kind"] for e in app_store.history(iid)]
    assert "task_claimed" in kinds and "task_transferred" in kinds


def test_4_the_approver_sends_a_claim_back_and_alice_amends_it(
        new_page, sign_in, app_store, screenshot) -> None:
    iid = claim_waiting_for_bob(app_store, 180.5, "Conference dinner")
    bob = new_page()
    sign_in(bob, "bob", path="/inbox")
    subject = "Expense claim of 180.5 by alice"
    bob.get_by_role("button", name="Open " + subject).click()
    mail = bob.locator(".mail", has_text=subject)
    mail.get_by_role("button", name="Send back").click()
    expect(mail.get_by_role("alert")).to_contain_text("needs a comment")
    assert app_store.get(iid).circles["claim"].state == "success"
    mail.get_by_label("Comment").fill("Please attach the guest list and split the bill")
    mail.get_by_role("button", name="Send back").click()
    expect(mail.locator(".mail-outcome")).to_have_text(
        "Sent back to be amended — Please attach the guest list and split the bill")
    expect(mail.get_by_role("button", name="Approve")).to_have_count(0)
    expect(mail.locator(".row-badge", has_text="sent back")).to_be_visible()
    screenshot(bob, "sendback_journey4_sent_back")

    alice = new_page()
    sign_in(alice, "alice", path="/flow/" + iid)
    claim = alice.locator('.circle-box[data-circle="claim"]')
    expect(claim).to_be_visible()
    claim.get_by_label("Amount").fill("95.5")
    claim.get_by_label("What was it for?").fill("Conference dinner, my share (list attached)")
    pick_user(alice, claim.get_by_label("Manager"), "bob")
    screenshot(alice, "sendback_journey4_amending")
    claim.get_by_role("button", name=re.compile("^Submit")).click()
    approve = alice.locator('.circle-box[data-circle="approve"]')
    expect(approve.get_by_text("Waiting for approval").first).to_be_visible()
    history = [e["kind"] for e in app_store.history(iid)]
    assert "circle_returned" in history

    again = "Expense claim of 95.5 by alice"
    wait_for(lambda: any(m["subject"] == again and m["decision"] is None
                         for m in Mailbox(app_store).inbox(app_store.user("bob"))))
    bob.reload()
    new = bob.locator(".mail", has_text=again)
    expect(new.locator(".row-badge", has_text="waiting for you")).to_be_visible()
    screenshot(bob, "sendback_journey4_new_approval")
    bob.get_by_role("button", name="Open " + again).click()
    new.get_by_role("button", name="Approve").click()  # leaves bob's inbox as it found it
    expect(new.locator(".mail-outcome")).to_have_text("Decided: approved")


def test_5_the_inbox_journeys_in_chinese(browser, app_server, app_store, accounts,
                                         screenshot) -> None:
    iid = claim_waiting_for_bob(app_store, 88, "出租车去机场")
    mail = next(m for m in Mailbox(app_store).inbox(app_store.user("bob"))
                if m["instance"] == iid)
    Mailbox(app_store).decide(mail["id"], app_store.user("bob"), "approved")
    if app_store.user("fang") is None:
        app_store.add_user("fang", "fang-pass-1", ["user", "finance"])
    contexts = []

    def chinese(name: str, password: str):
        """A browser asking for Chinese, `name` signed in on `/inbox`."""
        context = browser.new_context(base_url=app_server, locale="zh-CN",
                                      reduced_motion="reduce",
                                      viewport={"width": 1280, "height": 800})
        context.set_default_timeout(30_000)
        contexts.append(context)
        page = context.new_page()
        page.goto("/inbox")  # no tab asked for: the one with their work
        page.get_by_label("用户名").fill(name)
        page.get_by_label("密码").fill(password)
        page.get_by_role("button", name="登录").click()
        expect(page.locator("#user-menu")).to_contain_text(name)
        return page

    try:
        fang = chinese("fang", "fang-pass-1")
        tasks_tab = fang.get_by_role("tab", name="待办")
        expect(tasks_tab).to_have_attribute("data-state", "active")
        panel = fang.locator(f'[id="{tasks_tab.get_attribute("aria-controls")}"]')
        expect(panel).to_have_attribute("role", "tabpanel")  # the tab controls its panel
        expect(panel).to_have_attribute("aria-labelledby", tasks_tab.get_attribute("id"))
        expect(panel.get_by_role("heading", name="我的待办")).to_be_visible()
        expect(fang.get_by_role("heading", name="我的组")).to_be_visible()
        row = fang.locator(f'#tasks-candidate .task-row[data-instance="{iid}"]')
        expect(row).to_contain_text("等待 finance 处理")
        expect(row.locator(".task-about")).to_have_text("88 · 出租车去机场 · bob")
        expect(row).to_contain_text(re.compile("到达：\\S"))  # "3秒钟前": relative, local
        expect(row.locator("time").first).not_to_contain_text("UTC")
        expect(fang.locator("#tasks-me")).to_contain_text("没有分配给你的任务")
        screenshot(fang, "tasks_journey5_zh_my_groups")
        row.get_by_role("button", name=re.compile("^认领 ")).click()
        expect(fang.get_by_text("已认领，现在由你处理")).to_be_visible()
        mine = fang.locator(f'#tasks-me .task-row[data-instance="{iid}"]')
        expect(mine).to_contain_text("等待你处理")
        expect(mine.get_by_role("button", name=re.compile("^取消认领 "))).to_be_visible()
        screenshot(fang, "tasks_journey5_zh_claimed")
        assert axe_violations(fang) == []

        fang.goto("/flows")  # taking part: by title, its values, whom it waits for
        expect(fang.get_by_role("heading", name="我参与的")).to_be_visible()
        part = fang.locator(f'.taking-part-row[data-instance="{iid}"]')
        expect(part.locator(".flow-summary")).to_have_text("88 · 出租车去机场 · bob")
        expect(part).to_contain_text("发起人：alice")
        expect(part.locator(".flow-progress")).to_have_text("等待你处理")
        expect(part).to_contain_text("进行中")
        expect(part.get_by_role("link", name="打开 " + iid)).to_be_visible()
        for header in fang.locator("th").all():  # no empty table header
            assert header.text_content().strip(), header.evaluate("(h) => h.outerHTML")
        screenshot(fang, "tasks_journey5_zh_my_flows")
        assert axe_violations(fang) == []

        again = claim_waiting_for_bob(app_store, 42.5, "团队午餐")  # bob sends it back
        fang.context.close()
        bob = chinese("bob", accounts["bob"][0])
        expect(bob.get_by_role("tab", name="审批")).to_have_attribute("data-state", "active")
        subject = "Expense claim of 42.5 by alice"
        letter = bob.locator(".mail", has_text=subject)
        expect(letter.locator(".row-badge")).to_have_text("等待你审批")
        letter.get_by_role("button", name="打开 " + subject).click()
        letter.get_by_role("button", name="退回", exact=True).click()
        expect(letter.get_by_role("alert")).to_contain_text("退回需要填写审批意见")
        letter.get_by_label("审批意见").fill("请附上发票")
        letter.get_by_role("button", name="退回", exact=True).click()
        expect(letter.locator(".mail-outcome")).to_have_text("已退回修改：请附上发票")
        expect(letter.locator(".row-badge", has_text="已退回")).to_be_visible()
        screenshot(bob, "sendback_journey5_zh_sent_back")
        assert app_store.get(again).circles["claim"].state == "waiting"
    finally:
        for context in contexts:
            context.close()
