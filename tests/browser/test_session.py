"""Journey 6: a reload on the flow page keeps the session and the flow's position; a new
tab shares the session; signing in again continues the same outer flow."""

from __future__ import annotations

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
    claim.get_by_label("Manager (username)").fill("bob")
    claim.get_by_role("button", name="Submit claim").click()
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


def test_outer_flow_shows_the_nested_business_flow(page, sign_in, screenshot) -> None:
    sign_in(page, "alice")
    page.locator("#outer-steps a").click()
    page.wait_for_url("**/flow/**")
    expect(page.locator('.flow-node[data-circle="auth"]')).to_have_attribute(
        "data-state", "success")
    expect(page.locator('.flow-frame[data-circle="main"]')).to_be_visible()
    expect(page.locator('.flow-node[data-circle="main.claim"]')).to_have_attribute(
        "data-state", "ready")
    page.locator('.flow-frame[data-circle="main"]').click(position={"x": 30, "y": 8})
    page.get_by_role("button", name="Open or close nested flow").click()
    expect(page.locator('.flow-node[data-circle="main.claim"]')).to_have_count(0)
    expect(page.locator('.flow-node[data-circle="main"]')).to_be_visible()
    screenshot(page, "outer_flow_collapsed")


def test_pages_fit_a_phone(new_page, sign_in, screenshot) -> None:
    phone = new_page(390, 844)
    sign_in(phone, "alice")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 391
    screenshot(phone, "phone_my_flows")
    phone.get_by_role("button", name="Start reimbursement").click()
    phone.wait_for_url("**/flow/**")
    expect(phone.locator('.circle-box[data-circle="claim"]')).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 391  # the drawing scrolls
    screenshot(phone, "phone_flow")


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
