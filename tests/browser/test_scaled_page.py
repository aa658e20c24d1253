"""Scaled out (SPEC §14): a flow page served by one backend follows a step made through the
REST API of another. Backend B serves the built app on its port (`reflex run --env prod
--single-port`), backend A the API only (`--backend-only`); both on a PostgreSQL schema of
the module's own and Reflex's Redis state manager, as tests/scaled/ sets them up. The
step reaches B by PostgreSQL NOTIFY, not by the page polling."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bpflow.store import Store
from tests.scaled.conftest import complete, sign_in, started_flow

pytestmark = pytest.mark.browser


@pytest.fixture
def site(scaled_site) -> tuple[str, str, Store]:
    """(A's base URL, B's base URL, a Store on their database)."""
    return scaled_site.api, scaled_site.app, scaled_site.store


def test_step_through_backend_a_appears_on_the_page_of_backend_b(browser, site,
                                                                  screenshot) -> None:
    a, b, store = site
    bearer, inst = started_flow(store, a)
    context = browser.new_context(base_url=b, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        sign_in(page, f"/flow/{inst['id']}")
        fill = page.locator('.flow-node[data-circle="fill"]')
        expect(fill).to_have_attribute("data-state", "ready")

        complete(a, inst, bearer)
        expect(fill).to_have_attribute("data-state", "success")
        expect(page.locator("#flow-status")).to_contain_text("completed")
        screenshot(page, "scaled_step_through_another_backend")
    finally:
        context.close()
