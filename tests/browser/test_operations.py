"""Journey: fixing what is stuck in bulk (SPEC §18). Fifty claims wait three hours for
their review, then their payment's HTTP call fails: the service is down. An admin finds
them on /operations as one incident (template, step, reason, 50), opens it, sees where
the claims wait drawn over the flow (the review the hottest step, its figures on hover),
chooses all that match and, the service back, retries them all: the progress and a result
per claim come in live, and the claims complete. The audit log lists the retry with the
admin's name."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from bpflow_app.drawing import HEAT
from engine.runtime import utcnow
from tests.http_server import LocalServer

pytestmark = pytest.mark.browser
N = 50
REVIEW_WAIT = timedelta(hours=3)


def claim_template(base_url: str) -> dict:
    return {"name": "claim", "title": "Expense claim payment", "circles": [
        {"uri": "review", "description": "Review the claim",
         "box": {"form": [{"name": "ok", "type": "boolean", "label": "Approved"}]}},
        {"uri": "pay", "deps": [["review"]], "description": "Pay the claim",
         "box": {"action": {"type": "http", "method": "POST", "url": base_url + "/flaky/pay"}}},
        {"uri": "done", "deps": [["pay"]]}]}


@pytest.fixture(scope="module")
def service():
    with LocalServer() as server:
        server.recorder.down = True
        yield server


def _until(check: Callable[[], bool], what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds:.0f} s: {what}", pytrace=False)
        time.sleep(0.25)


def _failed_claims(app_store, service) -> list[str]:
    """Fifty claims started three hours ago, reviewed now, whose payment the server's
    worker then calls and finds down; once the worker has folded their waits."""
    app_store.put_template(claim_template(service.url))
    root = app_store.user("root")
    earlier = lambda: utcnow() - REVIEW_WAIT  # noqa: E731
    app_store.clock = app_store.engine.clock = earlier
    try:
        started = [app_store.start("claim", {}, root) for _ in range(N)]
    finally:
        app_store.clock = app_store.engine.clock = utcnow
    for inst in started:
        app_store.complete(inst.id, "review", app_store.engine.bookmark(inst, "review"),
                           {"ok": True}, "root")
    ids = [inst.id for inst in started]
    _until(lambda: {r["status"] for r in app_store.instance_rows(ids)} == {"failed"},
           "the 50 payments failed")

    def folded() -> bool:
        circles = app_store.durations("claim")["circles"]
        return all(circles.get(c, {}).get("count") == N for c in ("review", "pay"))
    _until(folded, "the worker folded the waits")
    return ids


def test_an_admin_retries_an_incident_of_50_claims_and_watches_them_complete(
        page, sign_in, app_store, service, screenshot) -> None:
    ids = _failed_claims(app_store, service)
    assert service.recorder.seen("/flaky/pay") == N

    sign_in(page, "root", path="/operations")
    incident = page.locator('[data-incident="pay"]').filter(has_text="claim")
    expect(incident).to_contain_text("answered HTTP 503")
    expect(incident.locator("td").nth(3)).to_have_text(str(N))
    screenshot(page, "operations_incident")
    incident.get_by_role("button", name="Show its instances").click()
    expect(page.get_by_text(f"1–{N} of {N}")).to_be_visible()

    # where the claims wait: the review kept them three hours, the payment a moment
    heat = page.locator("#ops-heat")
    expect(heat).to_contain_text("Where flows of claim v1 wait")
    review = heat.locator('.flow-node[data-circle="review"]')
    expect(review.locator(".node-disc")).to_have_attribute("fill", HEAT[-1])
    expect(heat.locator('.flow-node[data-circle="pay"] .node-disc')).to_have_attribute(
        "fill", HEAT[0])
    expect(review.locator("title")).to_contain_text(f"{N} waits: median 3 h")
    review.hover()
    screenshot(page, "operations_heat_map")

    page.get_by_label(f"All that match ({N})").click()
    service.recorder.down = False  # the service is back
    page.get_by_role("button", name="Retry the failed circle").click()
    progress = page.locator("#ops-progress")
    expect(progress).to_contain_text(f"of {N}")
    expect(progress).to_have_text(f"{N} done, 0 refused of {N}", timeout=60_000)
    expect(page.get_by_text("finished", exact=True)).to_be_visible()
    results = page.locator(".result-line")
    expect(results).to_have_count(N)
    expect(page.locator('.result-line[data-state="done"]')).to_have_count(N)
    screenshot(page, "operations_retried")

    # the claims complete as the worker pays them: the list of completed ones fills
    page.locator("#ops-template").fill("claim")
    page.locator("#ops-circle").fill("")  # the incident's failed step and reason: no more
    page.locator("#ops-reason").fill("")
    page.locator("#ops-status").select_option("completed")
    pager = page.get_by_text(f"1–{N} of {N}")

    def completed() -> bool:
        page.locator("#ops-search").click()
        try:
            expect(pager).to_be_visible(timeout=2000)
        except AssertionError:
            return False
        return True
    _until(completed, "the 50 claims completed", seconds=60)
    assert {r["status"] for r in app_store.instance_rows(ids)} == {"completed"}
    assert service.recorder.seen("/flaky/pay") == 2 * N
    screenshot(page, "operations_completed")

    page.goto("/audit")
    started = page.locator('[data-kind="operation_started"]').first
    expect(started).to_contain_text("root")
    expect(started).to_contain_text("retry")
    expect(started).to_contain_text(str(N))
    screenshot(page, "operations_audit")
