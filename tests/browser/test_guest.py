"""Journey 5: a guest's message with markup reaches the admin's inbox as plain text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
BODY = 'Hello <script>window.__pwned = 1</script><b>bold?</b> <img src=x onerror="alert(1)">'


def test_5_guest_message_with_markup_is_shown_as_text(page, new_page, sign_in,
                                                      screenshot) -> None:
    page.goto("/guest")
    page.get_by_label("Your name").fill("Eve <i>")
    page.get_by_label("Subject").fill("Markup <u>test</u>")
    page.get_by_role("button", name="Send message").click()
    expect(page.get_by_text("Message is required")).to_be_visible()
    expect(page.get_by_text("Please check the form")).to_be_visible()
    page.get_by_role("textbox", name="Message").fill(BODY)
    page.get_by_role("button", name="Send message").click()
    expect(page.locator("#guest-sent")).to_be_visible()
    expect(page.get_by_text("Message sent", exact=True)).to_be_visible()
    expect(page.get_by_text("Please check the form")).to_have_count(0)  # replaced
    screenshot(page, "journey5_guest_sent")

    admin = new_page()
    dialogs: list[str] = []
    admin.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in(admin, "root", path="/inbox")
    admin.get_by_role("tab", name="Guest messages").click()
    admin.get_by_role("button", name="Open Markup <u>test</u>").click()
    mail = admin.locator(".mail", has_text="Markup <u>test</u>")
    expect(mail.locator(".mail-body")).to_have_text(BODY)
    expect(mail).to_contain_text("From Eve <i>")
    assert mail.locator("script, b, img, u").count() == 0
    assert admin.evaluate("window.__pwned") is None
    assert dialogs == []
    screenshot(admin, "journey5_admin_reads_text")


def test_a_message_over_5000_characters_is_refused_not_cut(page, screenshot) -> None:
    page.goto("/guest")
    page.get_by_label("Your name").fill("Eve")
    page.get_by_label("Subject").fill("A long one")
    body = page.get_by_role("textbox", name="Message")
    expect(page.locator("#guest-body-count")).to_have_text("0 of 5,000 characters")
    body.fill("y" * 5100)
    assert len(body.input_value()) == 5100  # nothing cut while typing or pasting
    expect(page.locator("#guest-body-count")).to_have_text("5,100 of 5,000 characters")
    page.get_by_role("button", name="Send message").click()
    expect(page.get_by_text("Message must be at most 5000 characters (yours has 5,100);"
                            " nothing was sent")).to_be_visible()
    expect(page.locator("#guest-sent")).to_have_count(0)
    screenshot(page, "guest_message_too_long")


def test_guest_is_told_when_to_try_again(page, screenshot) -> None:
    """Five messages per client in ten minutes (journey 5 sent one from here too)."""
    page.goto("/guest")
    limited = page.locator("#rate-limited")
    for i in range(6):
        page.get_by_label("Your name").fill("Mallory")
        page.get_by_label("Subject").fill(f"Note {i}")
        page.get_by_role("textbox", name="Message").fill("Again")
        page.get_by_role("button", name="Send message").click()
        sent = page.locator("#guest-sent")
        expect(sent.or_(limited)).to_be_visible()
        if limited.is_visible():
            break
        page.get_by_role("button", name="Send another message").click()
    expect(limited).to_contain_text("try again in")
    screenshot(page, "guest_rate_limited")
