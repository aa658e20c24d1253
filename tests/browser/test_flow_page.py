"""The flow page's drawing and tabs in a real browser: an OR-arrow meets in a junction,
weak edges appear in an admin's technical view only, the steps' table and the history."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_or_junction_weak_edges_and_tabs(page, sign_in, screenshot) -> None:
    sign_in(page, "root")  # the example `order` is offered to admins only
    page.get_by_label("customer").fill("ACME")
    page.get_by_role("button", name="Start order").click()
    page.wait_for_url("**/flow/**")
    expect(page.locator(".or-junction")).to_have_count(1)
    expect(page.locator(".legend-junction")).to_contain_text("any one of the arrows")
    expect(page.locator('.flow-edge[data-kind="or"]')).to_have_count(3)
    expect(page.locator('.flow-edge[data-kind="weak"]')).to_have_count(0)
    expect(page.get_by_role("tab", name="Steps (technical)")).to_have_count(0)
    page.locator("#intervention-switch").click()  # the technical view, an admin's
    expect(page.locator('.flow-edge[data-kind="weak"]')).to_have_count(1)
    screenshot(page, "flow_order_intervention_mode")

    page.locator('.flow-node[data-circle="order"]').focus()
    page.keyboard.press("Enter")  # the drawing works from the keyboard
    expect(page.locator("#circle-details")).to_contain_text("What to ship")

    page.get_by_role("tab", name="Steps (technical)").click()
    expect(page.get_by_role("button", name="reserved", exact=True)).to_be_visible()
    history = page.get_by_role("tab", name="History")
    history.click()
    expect(history).to_have_attribute("data-state", "active")
    panel = page.locator(f'[id="{history.get_attribute("aria-controls")}"]')
    expect(panel).to_have_attribute("role", "tabpanel")  # the tab controls its panel
    expect(panel).to_have_attribute("aria-labelledby", history.get_attribute("id"))
    expect(panel.locator("#history")).to_contain_text("root started the flow")
    expect(page.locator("#history")).to_contain_text("instance started")  # the event
