"""Journeys of approval rounds (SPEC §15):

(1) a purchase request's sequential approval: bob, its first approver, opens it in the
    inbox, sees where the round stands, adds cara as a signer before himself (the
    dialog, then its confirmation); his mail now waits for her; cara approves in her
    inbox; bob approves; the flow page shows the round and the history says it.
(2) a vote by three of five: alice's flow page shows the vote, its decisions and what is
    still needed; the third approval (in the inbox) completes it; the starter removes a
    signer who has not decided from the flow page of another vote.

The requests are arranged through the store (the form filled in, the mail sent by a
worker run here) so that the journeys spend their time on the rounds.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.worker import Worker
from tests.browser.test_tasks_inbox import sign_in_as, wait_for

pytestmark = pytest.mark.browser
PEOPLE = {"cara": "cara-pass-1", "dave": "dave-pass-1", "erin": "erin-pass-1",
          "finn": "finn-pass-1", "gail": "gail-pass-1"}
VOTE = {"name": "vote", "title": "Committee vote", "circles": [
    {"uri": "vote", "description": "The committee votes",
     "box": {"action": {"type": "approval", "quorum": {"ratio": 0.6},
                        "to": ["cara", "dave", "erin", "finn", "gail"],
                        "subject": "Vote on the new supplier ${user.username}"}}},
    {"uri": "done", "deps": [["vote"]]}]}


@pytest.fixture(scope="module")
def people(app_store) -> dict[str, str]:
    for name, password in PEOPLE.items():
        if app_store.user(name) is None:
            app_store.add_user(name, password, ["approver"])
    return PEOPLE


def mail_of(store, name: str, iid: str) -> dict:
    return next(m for m in Mailbox(store).inbox(store.user(name)) if m["instance"] == iid)


def purchase(store) -> str:
    """alice's purchase request: bob, then root approve in turn, then a committee votes."""
    inst = store.start("purchase", {}, store.user("alice"))
    Interactions(store).submit(inst.id, "request", store.engine.bookmark(inst, "request"), {
        "item": "Standing desk", "amount": 640, "reason": "Back pain", "manager": "bob",
        "director": "root", "member_1": "dave", "member_2": "erin", "member_3": "finn"},
        "alice")
    Worker(store).run_once()
    wait_for(lambda: any(m["instance"] == inst.id
                         for m in Mailbox(store).inbox(store.user("bob"))))
    return inst.id


def test_1_the_first_approver_adds_a_signer_before_himself(
        new_page, sign_in, app_store, people, screenshot) -> None:
    iid = purchase(app_store)
    subject = "Purchase of Standing desk (640) by alice"
    bob = new_page()
    sign_in(bob, "bob", path="/inbox")
    bob.get_by_role("button", name="Open " + subject).click()
    mail = bob.locator(".mail", has_text=subject)
    expect(mail.locator(".round-line")).to_have_text(
        ["Now: bob", "Then: root", "Approvals still needed: 2 of 2"])
    mail.get_by_role("button", name="Add signers: " + subject).click()
    dialog = bob.get_by_role("dialog")
    expect(dialog).to_contain_text("Who else should decide on this request?")
    dialog.locator('.signer-option:has([data-name="cara"])').click()
    dialog.get_by_text("Before me").click()
    dialog.get_by_label("Comment").fill("Cara runs the office budget")
    screenshot(bob, "rounds_journey1_add_signers")
    dialog.locator("#signers-submit").click()
    expect(dialog.locator(".signers-confirm")).to_contain_text("Ask cara — Before me")
    assert Mailbox(app_store).inbox(app_store.user("cara")) == [] or all(
        m["instance"] != iid for m in Mailbox(app_store).inbox(app_store.user("cara")))
    dialog.locator("#signers-submit").click()
    expect(dialog).to_have_count(0)
    expect(mail.locator(".round-line")).to_have_text(
        ["Now: cara", "Then: bob, root", "Approvals still needed: 2 of 2"])
    expect(mail.locator(".mail-outcome")).to_have_text("Others decide first: cara")
    expect(mail.get_by_role("button", name="Approve")).to_have_count(0)
    screenshot(bob, "rounds_journey1_waits_for_cara")

    cara = new_page()
    sign_in_as(cara, "cara", people["cara"], "/inbox")
    cara.get_by_role("button", name="Open " + subject).click()
    theirs = cara.locator(".mail", has_text=subject)
    theirs.get_by_role("button", name="Approve").click()
    expect(theirs.locator(".mail-outcome")).to_have_text("Decided: approved")

    bob.reload()
    bob.get_by_role("button", name="Open " + subject).click()
    mail = bob.locator(".mail", has_text=subject)
    expect(mail.locator(".round-line").first).to_have_text("cara approved")
    mail.get_by_role("button", name="Approve").click()
    expect(mail.locator(".mail-outcome")).to_have_text("Decided: approved")

    alice = new_page()
    sign_in(alice, "alice", path="/flow/" + iid)
    box = alice.locator('.circle-box[data-circle="managers"]')
    expect(box.locator(".round-line")).to_have_text(
        ["cara approved", "bob approved", "Now: root", "Approvals still needed: 1 of 2"])
    expect(box).to_contain_text("each in turn, in this order")
    alice.get_by_role("tab", name="History").click()
    expect(alice.locator("#history")).to_contain_text(
        "bob asked cara to decide on “Manager, then director approve” before them —"
        " “Cara runs the office budget”")
    screenshot(alice, "rounds_journey1_flow_page")
    Mailbox(app_store).decide(mail_of(app_store, "root", iid)["id"], app_store.user("root"),
                              "approved")
    assert app_store.get(iid).circles["managers"].state == "success"


def test_2_a_vote_by_three_of_five(new_page, sign_in, app_store, people, screenshot) -> None:
    app_store.put_template(VOTE)
    iid = app_store.start("vote", {}, app_store.user("alice")).id
    Worker(app_store).run_once()
    wait_for(lambda: any(m["instance"] == iid
                         for m in Mailbox(app_store).inbox(app_store.user("cara"))))
    mb = Mailbox(app_store)
    mb.decide(mail_of(app_store, "cara", iid)["id"], app_store.user("cara"), "approved", "yes")
    mb.decide(mail_of(app_store, "dave", iid)["id"], app_store.user("dave"), "rejected",
              "too dear")
    mb.decide(mail_of(app_store, "erin", iid)["id"], app_store.user("erin"), "approved")

    alice = new_page()
    sign_in(alice, "alice", path="/flow/" + iid)
    box = alice.locator('.circle-box[data-circle="vote"]')
    expect(box).to_contain_text("a vote: 60% of 5 must approve")
    expect(box.locator(".round-line")).to_have_text(
        ["cara approved — “yes”", "dave rejected — “too dear”", "erin approved",
         "Now: finn, gail", "Approvals still needed: 1 of 3"])
    screenshot(alice, "rounds_journey2_vote")

    finn = new_page()
    sign_in_as(finn, "finn", people["finn"], "/inbox")
    subject = "Vote on the new supplier alice"
    finn.get_by_role("button", name="Open " + subject).click()
    finn.locator(".mail", has_text=subject).get_by_role("button", name="Approve").click()
    wait_for(lambda: app_store.get(iid).status == "completed")
    expect(box).to_have_count(0)  # settled: 3 of 5
    screenshot(alice, "rounds_journey2_completed")

    other = app_store.start("vote", {}, app_store.user("alice")).id
    Worker(app_store).run_once()
    wait_for(lambda: any(m["instance"] == other
                         for m in Mailbox(app_store).inbox(app_store.user("gail"))))
    alice.goto("/flow/" + other)
    box = alice.locator('.circle-box[data-circle="vote"]')
    box.get_by_role("button", name="Remove signers: The committee votes").click()
    dialog = alice.get_by_role("dialog")
    dialog.locator('.signer-option:has([data-name="gail"])').click()
    dialog.locator("#signers-submit").click()
    expect(dialog.locator(".signers-confirm")).to_contain_text("Stop asking gail")
    dialog.locator("#signers-submit").click()
    expect(dialog).to_have_count(0)
    expect(box.locator(".round-line").first).to_have_text("gail was removed")
    expect(box).to_contain_text("a vote: 60% of 4 must approve")
    screenshot(alice, "rounds_journey2_removed")
    assert mail_of(app_store, "gail", other)["decision"] == "removed"
