"""Smoke test: the app builds, serves, and its home page renders in a real Chromium."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import REPO_ROOT

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


def test_pages_answer_at_their_own_address(page) -> None:
    """No redirect to `/flows/` before a page loads (asset_cache.pages_without_redirect)."""
    for path in ("/flows", "/inbox", "/templates", "/design", "/design/trip", "/users",
                 "/webhooks", "/guest",
                 "/register", "/flow/some-flow", "/guest/acme", "/"):
        response = page.request.get(path, max_redirects=0)
        assert response.status == 200, (path, response.status, response.headers)
        assert "<html" in response.text()


def test_an_unknown_path_shows_the_apps_page_not_found(page, app_server, screenshot) -> None:
    response = page.goto("/no/such/page")

    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page).to_have_title("Page not found · bpflow")
    expect(page.get_by_label("bpflow home")).to_be_visible()  # the frame of the public pages
    screenshot(page, "smoke_not_found")
    page.locator("#not-found-home").click()
    expect(page.get_by_role("heading", name="bpflow", exact=True)).to_be_visible()
    expect(page).to_have_url(app_server + "/")  # not from page.url: it may be home already


def test_the_api_docs_work_with_nothing_but_the_app(page, app_server, screenshot) -> None:
    """/api/docs works offline: every request the page makes goes to the app itself."""
    elsewhere: list[str] = []
    page.on("request", lambda r: None if r.url.startswith((app_server + "/", "data:"))
            else elsewhere.append(r.url))

    page.goto("/api/docs")

    expect(page.locator(".swagger-ui .info .title")).to_contain_text("bpflow")
    expect(page.locator(".opblock-tag-section").first).to_be_visible()  # from openapi.json
    screenshot(page, "smoke_api_docs")
    assert elsewhere == []


def test_a_pages_icons_come_in_one_script(page) -> None:
    """The icons a page draws are one script (rxconfig.py, `IconsTogether`), not a file
    each: `/flows` preloads the icons' script and no file named after one of its icons."""
    html = page.request.get("/flows").text()
    scripts = [src.rsplit("/", 1)[-1] for src in
               re.findall(r'<link rel="modulepreload"[^>]*href="([^"]+)"', html)]
    compiled = (REPO_ROOT / ".web" / "app" / "routes" / "[flows]._index.jsx").read_text()
    icons = set(re.findall(r"lucide-react/dist/esm/icons/([a-z0-9-]+)\.mjs", compiled))
    assert {"workflow", "search", "chevron-left"} <= icons  # what the page draws
    assert [s for s in scripts if s.startswith("icons-")], scripts
    assert not [s for s in scripts if s.rsplit("-", 1)[0] in icons], scripts
    assert len(scripts) < 20, scripts  # 24 before, 23 of them under 1 KiB each


def test_no_page_draws_an_icon_chosen_by_the_state(app_server) -> None:
    """An icon chosen by the state is lucide's dynamic icon, whose map of every icon puts
    ~1,600 more files in the build: each branch draws a fixed icon instead."""
    web = REPO_ROOT / ".web"
    dynamic = [str(f.relative_to(web)) for folder in ("app", "app_components")
               for f in (web / folder).rglob("*.js*") if "lucide-react/dynamic" in f.read_text()]
    assert dynamic == []
    assert len(list((web / "build" / "client" / "assets").glob("*.js"))) < 500


# In the page: whether the inbox's code was asked for (React Router's modulepreload link)
# in the same drawing that put the header on the screen.
HEADER_AND_PREFETCH = """(() => {
  const seen = new MutationObserver(() => {
    if (!document.querySelector('#user-menu')) return;
    seen.disconnect();
    window.__inboxCodeWithHeader =
      !!document.querySelector('link[rel="modulepreload"][href*="_inbox_"]');
  });
  seen.observe(document, {childList: true, subtree: true});
})()"""


def test_a_returning_visit_asks_for_the_linked_pages_code_with_the_page(page, sign_in):
    """On a first visit the header's links fetch the other pages' code once they are on
    the screen (after the page's first paint: a phone's first load); when the app's
    scripts came from the browser's cache, with the page itself, so that a click on the
    Inbox right away does not wait for its code (bench/ui_latency.py)."""
    page.context.add_init_script(HEADER_AND_PREFETCH)
    sign_in(page, "alice")
    assert page.evaluate("[globalThis.__bpflowCached, window.__inboxCodeWithHeader]") == \
        [False, False]
    page.goto("/flows")
    page.locator("#user-menu").wait_for()
    assert page.evaluate("[globalThis.__bpflowCached, window.__inboxCodeWithHeader]") == \
        [True, True]
