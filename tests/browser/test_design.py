"""The designer (SPEC §16): an admin builds a flow from the palette, connects its circles
by dragging, sees an analysis error on the circle it concerns and in the problems list,
fixes it, keeps the JSON view and the canvas in step (a syntax error stays in the view),
undoes a change, reloads the page (the draft is kept) and publishes the template after
seeing what it changes; then makes an approval chain with the quick form. And the
acceptance journey of SPEC §16: an admin builds the expense claim from an empty canvas by
clicks, fixes two errors on their circles, tries it, publishes it, and a user starts it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest
from playwright.sync_api import expect

from tests.app.helpers import WAIT_S
from tests.conftest import settled

pytestmark = pytest.mark.browser


def _node(page, uri: str):
    return page.locator(f'.react-flow__node[data-id="{uri}"]')


def _drag(page, source, target) -> None:
    """Drag from one handle to another, as a person connects two circles."""
    a, b = source.bounding_box(), target.bounding_box()
    page.mouse.move(a["x"] + a["width"] / 2, a["y"] + a["height"] / 2)
    page.mouse.down()
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2, steps=12)
    page.mouse.up()


def _json(page, done: Callable[[dict], bool] = lambda body: True) -> dict:
    """The JSON view's body once `done` holds of it (or as it is after WAIT_S): the view
    follows each change just after the canvas and the problems, which are sent first."""
    def holds(body: dict) -> bool:
        try:
            return done(body)
        except (KeyError, IndexError, TypeError):
            return False
    return settled(lambda: json.loads(page.locator("#design-json").input_value()), holds,
                   WAIT_S)


def _shows(page, done: Callable[[dict], bool]) -> bool:
    """Whether the JSON view comes to show what `done` expects."""
    return done(_json(page, done))


def test_an_admin_designs_checks_and_publishes_a_flow(page, sign_in, app_store,
                                                      screenshot) -> None:
    sign_in(page, "root", path="/design")
    expect(page.get_by_role("application", name="Canvas of the flow")).to_be_visible()
    page.locator("#template-name").fill("outing")
    expect(page.locator("#design-json")).to_have_value('{\n  "name": "outing",\n'
                                                       '  "circles": []\n}')

    # two circles from the palette: one by a click, one by its key
    page.locator("#design-palette").get_by_role("button", name="Form").click()
    expect(_node(page, "form")).to_be_visible()
    page.keyboard.press("Alt+6")  # the palette's sixth kind: a timer
    expect(_node(page, "timer")).to_be_visible()
    expect(page.locator(".design-problem").filter(has_text="multiple_terminals")).to_be_visible()

    # connected by dragging the form's handle onto the timer's
    _drag(page, _node(page, "form").locator(".react-flow__handle.source"),
          _node(page, "timer").locator(".react-flow__handle.target"))
    expect(page.locator("#design-error-count")).to_have_text("No problems")
    assert _shows(page, lambda body: body["circles"][1]["deps"] == [["form"]])
    expect(page.locator(".react-flow__edge")).to_have_count(1)

    # a wrong delay: the error on the timer and in the list, which selects it
    _node(page, "timer").click()
    expect(page.locator("#circle-uri")).to_have_value("timer")
    page.locator("#action-delay").fill("-5")
    bad = _node(page, "timer").locator(".dc-circle.dc-bad")
    expect(bad).to_be_visible()
    expect(bad.locator(".dc-errors")).to_contain_text("delay")
    problem = page.locator(".design-problem").filter(has_text="invalid_box")
    expect(problem).to_be_visible()
    expect(page.locator("#design-publish")).to_be_disabled()
    screenshot(page, "design_error_on_the_circle")
    page.locator(".react-flow__pane").click(position={"x": 20, "y": 20})
    expect(page.locator("#template-panel")).to_be_visible()
    problem.get_by_role("button").click()
    expect(page.locator("#circle-uri")).to_have_value("timer")
    page.locator("#action-delay").fill("30")
    expect(page.locator("#design-error-count")).to_have_text("No problems")
    expect(bad).to_have_count(0)

    # the JSON view: a syntax error stays there, a good body reaches the canvas
    body = _json(page, lambda body: body["circles"][1]["box"]["action"]["delay"] == 30)
    assert body["circles"][1]["box"]["action"]["delay"] == 30
    page.locator("#design-json").fill('{"name": "outing", "circles": [')
    expect(page.locator("#design-json-error")).to_contain_text("Not valid JSON")
    expect(_node(page, "timer")).to_be_visible()
    body["title"] = "An outing"
    body["circles"].append({"uri": "done", "deps": [["timer"]]})
    page.locator("#design-json").fill(json.dumps(body, indent=2))
    expect(_node(page, "done")).to_be_visible()
    expect(page.locator("#design-json-error")).to_have_count(0)
    expect(page.locator(".react-flow__edge")).to_have_count(2)
    screenshot(page, "design_json_in_step")

    # undo takes the JSON view's change back (Ctrl+Z outside a text field), redo again
    page.locator(".react-flow__pane").click(position={"x": 20, "y": 20})
    page.keyboard.press("Control+z")
    expect(_node(page, "done")).to_have_count(0)
    assert _shows(page, lambda body: "title" not in body)
    page.locator("#design-redo").click()
    expect(_node(page, "done")).to_be_visible()

    # every change is kept as a draft: a reload opens it
    expect(page).to_have_url(re.compile(r"/design\?draft=\d+$"))
    page.reload()
    expect(_node(page, "done")).to_be_visible()
    expect(page.locator("#template-title")).to_have_value("An outing")

    # publishing says what it changes first
    page.locator("#design-publish").click()
    dialog = page.get_by_role("alertdialog")
    expect(dialog).to_contain_text("It becomes the first version of a new template.")
    screenshot(page, "design_publish_changes")
    dialog.get_by_role("button", name="Publish").click()
    expect(page.get_by_text("Published outing version 1")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/design/outing$"))
    version, template = app_store.template("outing")
    assert version == 1 and [c["uri"] for c in template.body["circles"]] == [
        "form", "timer", "done"]
    screenshot(page, "design_published")

    # the approval chain's quick form, the day-one path of a team's admin: the manager
    # chosen in the request, then finance, then bob; published in under two minutes
    began = time.monotonic()
    page.locator("#design-chain").click()
    page.locator("#chain-add").click()
    page.locator("#chain-who-1").fill("finance")
    page.locator("#chain-add").click()
    page.locator("#chain-who-2").fill("bob")
    page.locator("#chain-make").click()
    for uri in ("request", "approve_1", "approve_2", "approve_3", "done"):
        expect(_node(page, uri)).to_be_visible()
    expect(page.locator("#design-error-count")).to_have_text("No problems")
    screenshot(page, "design_approval_chain")
    page.locator("#design-publish").click()
    page.get_by_role("alertdialog").get_by_role("button", name="Publish").click()
    expect(page.get_by_text("Published outing version 2")).to_be_visible()
    took = time.monotonic() - began
    version, template = app_store.template("outing")
    assert version == 2 and [c["uri"] for c in template.body["circles"]] == [
        "request", "approve_1", "approve_2", "approve_3", "done"]
    assert took < 120, f"the chain took {took:.0f} s from its form to published"


def test_an_admin_builds_tries_and_publishes_the_expense_claim_a_user_starts(
        page, new_page, sign_in, app_store, screenshot) -> None:
    """The expense claim of upload/workflow/reimbursement.json, from an empty canvas by
    clicks: a form, an approval, a final circle; two analysis errors seen on their circles
    and fixed; tried (the form filled, the approval approved); published; started by a
    user from /flows."""
    sign_in(page, "root", path="/design")
    page.locator("#template-name").fill("expenses")
    page.locator("#template-title").fill("Expense claim")
    expect(page.locator("#design-json")).to_contain_text('"title": "Expense claim"')

    # the claim: a form of the amount and what it was for
    page.locator("#design-palette").get_by_role("button", name="Form").click()
    expect(page.locator("#circle-uri")).to_have_value("form")  # its panel is open
    page.locator("#circle-uri").fill("claim")
    page.locator("#circle-uri").press("Tab")
    expect(_node(page, "claim")).to_be_visible()
    rows = page.locator(".form-field-row")
    page.locator("#field-name-0").fill("amount")
    page.locator("#field-label-0").fill("Amount")
    rows.nth(0).get_by_role("combobox", name="Field type").click()
    page.get_by_role("option", name="number", exact=True).click()
    rows.nth(0).get_by_role("checkbox", name="Required").click()
    page.locator("#add-field").click()
    page.locator("#field-name-1").fill("what for")  # not a name a field may have
    page.locator("#field-label-1").fill("What was it for?")
    claim_bad = _node(page, "claim").locator(".dc-circle.dc-bad")
    expect(claim_bad.locator(".dc-errors")).to_contain_text("must be an identifier")
    expect(page.locator(".design-problem[data-element=claim]")).to_be_visible()
    screenshot(page, "design_claim_error_on_the_form")
    page.locator("#field-name-1").fill("reason")  # fixed
    expect(claim_bad).to_have_count(0)
    # a field moved by the keyboard, the focus with it, the move said
    page.locator("#field-name-1").press("Alt+ArrowUp")
    expect(page.locator("#field-name-0")).to_have_value("reason")
    expect(page.locator("#field-name-0")).to_be_focused()
    expect(page.locator("#form-said")).to_have_text("reason is now field 1 of 2")
    page.keyboard.press("Alt+ArrowDown")
    expect(page.locator("#field-name-1")).to_have_value("reason")
    assert _shows(page, lambda body: [f["name"] for f in body["circles"][0]["box"]["form"]]
                  == ["amount", "reason"])

    # the manager's approval, whose subject names the claim before any arrow leads there
    page.locator("#design-palette").get_by_role("button", name="Approval").click()
    expect(page.locator("#circle-uri")).to_have_value("approval")  # its panel is open
    page.locator("#circle-uri").fill("approve")
    page.locator("#circle-uri").press("Tab")
    expect(_node(page, "approve")).to_be_visible()
    # the approver picked among the tenant's users: nobody's name refused, bob taken
    page.locator("#pick-to").fill("zed")
    page.locator("#pick-to").press("Enter")
    expect(page.locator("#note-to")).to_have_text("There is no user named zed")
    page.locator("#pick-to").fill("bob")
    page.locator("#pick-to").press("Enter")
    page.get_by_role("button", name="Remove admin").click()  # the palette's approver
    expect(page.locator(".design-pick-name")).to_have_text(["bob"])
    expect(page.locator("#note-to")).to_have_count(0)
    page.locator("#action-subject").fill("Expense claim of ${claim.amount}")
    approve_bad = _node(page, "approve").locator(".dc-circle.dc-bad")
    expect(approve_bad.locator(".dc-errors")).to_contain_text("claim")
    expect(page.locator(".design-problem[data-element=approve]")).to_contain_text(
        "unknown_variable")
    expect(page.locator("#design-publish")).to_be_disabled()
    screenshot(page, "design_claim_error_on_the_approval")
    page.locator("#circle-depend").click()  # fixed: an arrow from the claim
    page.get_by_role("option", name="claim", exact=True).click()
    expect(approve_bad).to_have_count(0)
    # the claim's names completed by the keyboard: ArrowDown to the suggestions, Enter
    page.locator("#action-body").fill("For ${rea")
    expect(page.locator("#hints-action-body button")).to_have_text(["${claim.reason}"])
    page.locator("#action-body").press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator("#action-body")).to_have_value("For ${claim.reason}")
    expect(page.locator("#action-body")).to_be_focused()

    # the end
    page.locator("#design-palette").get_by_role("button", name="Marker").click()
    expect(page.locator("#circle-uri")).to_have_value("marker")  # its panel is open
    page.locator("#circle-uri").fill("done")
    page.locator("#circle-uri").press("Tab")
    expect(_node(page, "done")).to_be_visible()
    page.evaluate("window.scrollTo(0, 0)")  # the canvas under the page's header no more
    _drag(page, _node(page, "approve").locator(".react-flow__handle.source"),
          _node(page, "done").locator(".react-flow__handle.target"))
    expect(page.locator("#design-error-count")).to_have_text("No problems")
    assert _shows(page, lambda body: [(c["uri"], c.get("deps")) for c in body["circles"]] == [
        ("claim", None), ("approve", [["claim"]]), ("done", [["approve"]])]
        and body["circles"][1]["box"]["action"]["to"] == "bob")

    # tried: the claim filled, the approval returned to it with a comment, filled again,
    # approved, the path drawn
    page.locator("#design-try").click()
    expect(page.locator("#design-trying")).to_be_visible()

    def fill_the_claim() -> None:
        expect(_node(page, "claim").locator('.dc-circle[data-state="ready"]')).to_be_visible()
        _node(page, "claim").click()
        page.locator("#try-field-amount").fill("120")
        page.locator("#try-field-reason").fill("Train tickets")
        page.locator("#try-fill").click()
        expect(_node(page, "approve").locator('.dc-circle[data-state="ready"]')
               ).to_be_visible()
        _node(page, "approve").click()
    fill_the_claim()
    page.locator("#try-comment").fill("Attach the tickets")
    page.locator("#try-return-to").click()
    expect(page.locator("#try-return-target")).to_have_value("claim")
    page.locator("#try-return-it").click()
    # the claim done, then it and the approval back to waiting
    expect(page.locator("#try-path li")).to_have_count(3)
    fill_the_claim()
    page.locator("#try-approve").click()
    expect(_node(page, "done").locator('.dc-circle[data-state="success"]')).to_be_visible()
    expect(page.locator("#try-status-badge")).to_have_text("completed")
    expect(page.locator("#try-path li")).to_have_count(6)
    expect(page.locator(".react-flow__edge.dc-path")).to_have_count(2)
    screenshot(page, "design_claim_tried")
    page.locator("#design-stop-trying").click()
    expect(page.locator("#design-trying")).to_have_count(0)
    expect(page.locator(".dc-circle[data-state]")).to_have_count(0)

    # published, and started by a user
    page.locator("#design-publish").click()
    page.get_by_role("alertdialog").get_by_role("button", name="Publish").click()
    expect(page.get_by_text("Published expenses version 1")).to_be_visible()
    assert app_store.template("expenses")[0] == 1
    alice = new_page()
    sign_in(alice, "alice")
    alice.get_by_role("button", name="Start expenses").click()
    alice.wait_for_url("**/flow/**")
    expect(alice.locator('.circle-box[data-circle="claim"]')).to_be_visible()
    screenshot(alice, "design_claim_started_by_a_user")
