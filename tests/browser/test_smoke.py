"""Smoke test: the app builds, serves, and its home page renders in a real Chromium."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_home_page_shows_heading_and_tagline(page, screenshot) -> None:
    page.goto("/")

    expect(page.get_by_role("heading", name="bpflow", exact=True)).to_be_visible()
    expect(page.get_by_text("Business flows drawn as circles and arrows.")).to_be_visible()
    expect(page).to_have_title("bpflow")
    screenshot(page, "smoke_home")


def test_backend_answers_on_the_same_port(page) -> None:
    response = page.request.get("/ping")

    assert response.ok, f"/ping answered {response.status}"
