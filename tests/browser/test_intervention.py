"""Journey 4: an HTTP circle fails; an admin, in the flow's technical view, resets it one
level (after its preview), which sends it and the form before it back to waiting, and
with a better input the flow completes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.http_server import LocalServer

pytestmark = pytest.mark.browser


def http_template(base_url: str) -> dict:
    return {
        "name": "http_check", "title": "Call a service",
        "circles": [
            {"uri": "target", "description": "Which endpoint to call",
             "box": {"form": [{"name": "path", "type": "string", "label": "Path",
                               "required": True}]}},
            {"uri": "call", "deps": [["target"]], "description": "Call the service",
             "box": {"action": {"type": "http", "method": "POST",
                                "url": base_url + "${target.path}"}}},
            {"uri": "done", "deps": [["call"]]},
        ],
    }


@pytest.fixture(scope="module")
def service():
    with LocalServer() as server:
        yield server


def test_4_failed_http_circle_is_reset_one_level_and_completes(
        page, sign_in, app_store, service, screenshot) -> None:
    app_store.put_template(http_template(service.url))
    sign_in(page, "root")
    page.get_by_role("button", name="Start http_check").click()
    page.wait_for_url("**/flow/**")

    target = page.locator('.circle-box[data-circle="target"]')
    target.get_by_label("Path").fill("/status/500")
    target.get_by_role("button", name="Submit: Which endpoint to call").click()
    expect(page.locator("#flow-status")).to_contain_text("failed")
    call = page.locator('.flow-node[data-circle="call"]')
    expect(call).to_have_attribute("data-state", "failure")
    screenshot(page, "journey4_http_failed")

    page.locator("#intervention-switch").click()  # fixing it is the technical view's
    call.click()
    details = page.locator("#circle-details")
    expect(details).to_contain_text("answered HTTP 500")
    details.get_by_role("button", name="Reset 1 level").click()
    preview = page.locator("#reset-preview")
    for circle in ("target", "call"):  # `done` never started: nothing to reset there
        expect(preview.get_by_text(circle, exact=True)).to_be_visible()
    expect(page.locator(".preview-ring")).to_have_count(2)
    screenshot(page, "journey4_reset_preview")
    page.get_by_role("button", name="Reset", exact=True).click()

    target.get_by_label("Path").fill("/ok")
    target.get_by_role("button", name="Submit: Which endpoint to call").click()
    expect(page.locator("#flow-status")).to_contain_text("completed")
    expect(call).to_have_attribute("data-state", "success")
    assert service.recorder.seen("/ok") == 1
    screenshot(page, "journey4_completed")
