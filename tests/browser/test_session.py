"""Journey 6: a reload on the flow page keeps the session and the flow's position; a new
tab shares the session; signing in again continues the same outer flow."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_6_reload_keeps_session_and_flow_position(page, sign_in, screenshot) -> None:
    sign_in(page, "alice")
    outer = page.locator("#outer-steps a").get_attribute("href")
    page.get_by_role("button", name="Start reimbursement").click()
    page.wait_for_url("**/flow/**")
    url = page.url
    claim = page.locator('.circle-box[data-circle="claim"]')
    claim.get_by_label("Amount").fill("7")
    claim.get_by_label("What was it for?").fill("Coffee")
    claim.get_by_label("Manager").click()  # a picker of the approvers
    page.get_by_role("option", name="bob", exact=True).click()
    claim.get_by_role("button", name=re.compile("^Submit")).click()
    expect(page.locator('.flow-node[data-circle="approve"]')).to_have_attribute(
        "data-state", "ready")

    page.reload()
    assert page.url == url
    expect(page.locator("#user-menu")).to_contain_text("alice")
    expect(page.get_by_label("Username")).to_have_count(0)
    expect(page.locator('.flow-node[data-circle="claim"]')).to_have_attribute(
        "data-state", "success")
    expect(page.locator('.flow-node[data-circle="approve"]')).to_have_attribute(
        "data-state", "ready")
    expect(page.locator("#outer-steps a")).to_have_attribute("href", outer)
    screenshot(page, "journey6_after_reload")

    tab = page.context.new_page()
    tab.goto(url)
    expect(tab.locator("#user-menu")).to_contain_text("alice")
    expect(tab.locator('.flow-node[data-circle="approve"]')).to_have_attribute(
        "data-state", "ready")
    tab.close()

    page.locator("#user-menu").click()
    page.get_by_role("menuitem", name="Sign out").click()
    expect(page.get_by_role("heading", name="bpflow", exact=True)).to_be_visible()  # home
    sign_in(page, "alice", path=url)
    expect(page.locator('.flow-node[data-circle="approve"]')).to_have_attribute(
        "data-state", "ready")
    expect(page.locator("#outer-steps a")).to_have_attribute("href", outer)


def test_signing_in_starts_nothing_and_the_outer_flow_is_the_session(page, sign_in,
                                                                     screenshot) -> None:
    """Sign-in is the outer flow's first circle; its second, `main`, is the session
    itself: no claim is started, and My flows does not list the outer flow."""
    sign_in(page, "bob")  # an approver's sign-in
    expect(page.get_by_role("heading", name="Your flows")).to_be_visible()
    expect(page.locator(".instance-row", has_text="signin")).to_have_count(0)
    expect(page.locator(".instance-row", has_text="reimbursement")).to_have_count(0)
    page.locator("#outer-steps a").click()
    page.wait_for_url("**/flow/**")
    expect(page.locator('.flow-node[data-circle="auth"]')).to_have_attribute(
        "data-state", "success")
    expect(page.locator('.flow-node[data-circle="main"]')).to_have_attribute(
        "data-state", "success")
    expect(page.locator(".flow-node")).to_have_count(2)  # no business flow inside
    expect(page.locator(".circle-box")).to_have_count(0)
    screenshot(page, "outer_flow_is_the_session")


def test_a_nested_flow_opens_and_closes(page, sign_in, app_store) -> None:
    app_store.put_template({"name": "errand", "kind": "linear", "circles": [
        {"uri": "main", "box": {"action": {"type": "flow", "template": "reimbursement"}}}]})
    sign_in(page, "alice")
    page.get_by_role("button", name="Start errand").click()
    page.wait_for_url("**/flow/**")
    expect(page.locator('.flow-frame[data-circle="main"]')).to_be_visible()
    expect(page.locator('.flow-node[data-circle="main.claim"]')).to_have_attribute(
        "data-state", "ready")
    page.locator('.flow-frame[data-circle="main"]').click(position={"x": 30, "y": 8})
    page.get_by_role("button", name="Open or close the steps inside").click()
    expect(page.locator('.flow-node[data-circle="main.claim"]')).to_have_count(0)
    expect(page.locator('.flow-node[data-circle="main"]')).to_be_visible()


def test_pages_fit_a_phone(new_page, sign_in, screenshot) -> None:
    """At 390 px the page never scrolls sideways: My flows keeps its Open links on the
    screen, and a drawing wider than the screen scrolls in its own box, which says so."""
    phone = new_page(390, 844)
    sign_in(phone, "alice")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 391
    phone.get_by_role("button", name="Start reimbursement").click()
    phone.wait_for_url("**/flow/**")
    expect(phone.locator('.circle-box[data-circle="claim"]')).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 391  # the drawing scrolls
    drawing = phone.locator("#flow-drawing")  # (headless Chromium hides every scrollbar)
    sizes = drawing.evaluate("(d) => [d.scrollWidth, d.clientWidth]")
    assert sizes[0] > sizes[1], sizes  # wider than its box, which scrolls
    expect(phone.locator("#drawing-scroll-hint")).to_be_visible()
    expect(phone.locator("#drawing-scroll-hint")).to_contain_text("scroll sideways")
    screenshot(phone, "phone_flow")

    phone.goto("/flows")
    rows = phone.locator(".instance-row")
    expect(rows.first).to_be_visible()
    for link in phone.get_by_role("link", name="Open ").all():
        box = link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    assert phone.evaluate("document.documentElement.scrollWidth") <= 391
    screenshot(phone, "phone_my_flows")

    wide = new_page(1280, 800)  # where the drawing fits, nothing is said
    sign_in(wide, "alice")
    wide.get_by_role("link", name="Open ").first.click()
    wide.wait_for_url("**/flow/**")
    expect(wide.locator("#flow-drawing")).to_be_visible()
    expect(wide.locator("#drawing-scroll-hint")).to_be_hidden()


FIRST_VIEW = """(name) => { window.__firstView = new Promise((resolve) => {
  const look = () => {
    const menu = document.querySelector('#user-menu');
    if (!menu || !menu.textContent.includes(name)) return;
    seen.disconnect();
    resolve([...document.querySelectorAll('#mail-list .mail')].map((m) => m.dataset.mail));
  };
  const seen = new MutationObserver(look);
  seen.observe(document.body, {childList: true, subtree: true, characterData: true});
  look();
}); }"""


def test_a_tab_follows_sign_in_and_out_in_another_tab(page, sign_in, app_store,
                                                      screenshot) -> None:
    """The session lives in localStorage, shared by the browser's tabs: a tab waiting on
    the sign-in form shows its page once another tab signs in, loaded for that person,
    and never shows what was loaded for someone who signed out meanwhile."""
    from bpflow.mailbox import Mailbox

    Mailbox(app_store).send("message", app_store.user("root"), ["bob"], "For bob only",
                            "A note nobody else should see")
    other = page.context.new_page()
    other.goto("/inbox")
    expect(other.get_by_label("Username")).to_be_visible()
    sign_in(page, "bob")
    expect(other.locator("#user-menu")).to_contain_text("bob")
    other.get_by_role("tab", name="Messages").click()
    expect(other.locator(".mail", has_text="For bob only")).to_be_visible()
    bobs = set(other.locator("#mail-list .mail").evaluate_all(
        "(mails) => mails.map((m) => m.dataset.mail)"))

    page.locator("#user-menu").click()
    page.get_by_role("menuitem", name="Sign out").click()
    expect(other.get_by_label("Username")).to_be_visible()
    other.evaluate(FIRST_VIEW, "alice")
    sign_in(page, "alice")
    first_view = set(other.evaluate("window.__firstView"))  # when alice's name appeared
    assert not first_view & bobs, "the tab showed mail loaded for bob to alice"
    expect(other.locator("#user-menu")).to_contain_text("alice")
    expect(other.locator(".mail", has_text="For bob only")).to_have_count(0)
    screenshot(other, "session_followed_from_another_tab")
    other.close()


def test_a_user_changes_their_password_and_an_admin_resets_it(page, new_page, app_store,
                                                             screenshot) -> None:
    """Account basics (SPEC §17): pat changes her password on her account page (from the
    user menu) and stays signed in while her other browser is sent to the sign-in form;
    an admin (in Chinese) resets it on the users page, and her session ends too."""
    app_store.add_user("pat", "pat-password-1", ["user"])
    app_store.add_user("ines", "ines-password-1", ["admin"])  # her choice of language stays

    def enter(p, password: str, name: str = "pat") -> None:
        p.get_by_label("Username").fill(name)
        p.get_by_label("Password").fill(password)
        p.get_by_role("button", name="Sign in").click()
        expect(p.locator("#user-menu")).to_contain_text(name)

    elsewhere = new_page()
    for p in (page, elsewhere):
        p.goto("/flows")
        enter(p, "pat-password-1")
    page.locator("#user-menu").click()
    page.get_by_role("menuitem", name="My account").click()
    page.wait_for_url("**/account")
    page.get_by_label("Current password").fill("pat-password-1")
    page.get_by_label("New password", exact=True).fill("pat-password-2")
    page.get_by_label("New password again").fill("pat-password-2")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_text("Your password was changed; your other sessions have ended")
           ).to_be_visible()
    screenshot(page, "account_password_changed")
    page.goto("/flows")  # this session goes on
    expect(page.locator("#user-menu")).to_contain_text("pat")
    elsewhere.goto("/flows")  # the other one ended
    expect(elsewhere.get_by_label("Username")).to_be_visible()

    admin = new_page()
    admin.goto("/users")
    enter(admin, "ines-password-1", "ines")
    admin.locator("#lang-menu").click()
    admin.locator("#lang-zh-CN").click()
    expect(admin.get_by_role("columnheader", name="角色")).to_be_visible()
    admin.locator('tr[data-user="pat"]').get_by_role("button", name="重置密码").click()
    admin.get_by_label("新密码", exact=True).fill("pat-password-3")
    screenshot(admin, "users_reset_password_zh")
    admin.locator("#confirm-reset").click()
    expect(admin.get_by_text("已为 pat 重置密码，其所有会话已结束")).to_be_visible()
    page.goto("/flows")
    expect(page.get_by_label("Username")).to_be_visible()
    enter(page, "pat-password-3")
