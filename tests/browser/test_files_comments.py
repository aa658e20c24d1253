"""Journey: a receipt attached to a claim and opened by the approver, and a comment.

alice picks a PDF in the claim's file field (the upload shows its progress and the size
limit, and answers with the file's name), sends the claim; bob, asked to approve it, opens
the flow page, finds the receipt among the flow's files and downloads it (an attachment,
the same bytes); he comments on the flow, and alice's page, open all along and never
reloaded, shows his comment. A disguised file (a page called .pdf) is refused where it is
picked."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from bpflow.errors import NotFound

pytestmark = pytest.mark.browser
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
CLAIM = {"name": "receipt-claim", "title": "Receipt claim", "circles": [
    {"uri": "fill", "description": "Attach the receipt", "box": {"form": [
        {"name": "amount", "type": "number", "label": "Amount", "required": True},
        {"name": "receipt", "type": "file", "label": "Receipt", "accept": [".pdf", ".png"],
         "max_bytes": 1_000_000, "required": True}]}},
    {"uri": "approve", "description": "Bob approves", "deps": [["fill"]],
     "box": {"action": {"type": "approval", "to": "bob", "subject": "Receipt claim"}}}]}


def test_a_receipt_attached_to_a_claim_is_downloaded_by_the_approver_and_a_comment(
        new_page, sign_in, app_store, screenshot, tmp_path) -> None:
    started = time.monotonic()
    try:
        app_store.template("receipt-claim")
    except NotFound:
        app_store.put_template(CLAIM)
    inst = app_store.start("receipt-claim", {}, app_store.user("alice"))
    alice = new_page()
    sign_in(alice, "alice", path=f"/flow/{inst.id}")
    box = alice.locator('.circle-box[data-circle="fill"]')
    expect(box.get_by_text("At most 1.0 MB; .pdf,.png")).to_be_visible()
    picker = box.locator("#f-fill-receipt")
    picker.set_input_files(files=[{"name": "page.pdf", "mimeType": "application/pdf",
                                   "buffer": b"<!DOCTYPE html><script>alert(1)</script>"}])
    expect(box.get_by_text("HTML, SVG and XML files are not accepted")).to_be_visible()
    picker.set_input_files(files=[{"name": "taxi receipt.pdf",
                                   "mimeType": "application/pdf", "buffer": PDF}])
    expect(box.get_by_text("Uploaded: taxi receipt.pdf")).to_be_visible()
    expect(box.locator("progress")).to_have_attribute("value", "1")
    box.get_by_label("Amount").fill("42.5")
    screenshot(alice, "files_receipt_uploaded")
    box.get_by_role("button", name="Submit: Attach the receipt").click()
    files = alice.locator("#flow-files")
    expect(files.get_by_text("taxi receipt.pdf")).to_be_visible()

    bob = new_page()
    sign_in(bob, "bob", path=f"/flow/{inst.id}")
    link = bob.locator("#flow-files").get_by_role("link", name="Download taxi receipt.pdf")
    expect(link).to_be_visible()
    with bob.expect_download() as download:
        link.click()
    saved = tmp_path / "receipt.pdf"
    download.value.save_as(saved)
    assert download.value.suggested_filename == "taxi receipt.pdf"
    assert saved.read_bytes() == PDF
    screenshot(bob, "files_approver_sees_the_receipt")

    thread = bob.locator("#flow-comments")
    thread.get_by_role("textbox", name="Comment").fill("Receipt checked <b>fine</b>")
    thread.get_by_role("button", name="Comment", exact=True).click()
    expect(thread.locator(".comment-text")).to_have_text(["Receipt checked <b>fine</b>"])
    # alice's page follows: bob's comment appears without a reload
    expect(alice.locator("#flow-comments .comment-text")).to_have_text(
        ["Receipt checked <b>fine</b>"])
    screenshot(alice, "files_comment_seen_by_the_claimant")
    for page in (alice, bob):
        page.context.close()
    assert time.monotonic() - started < 120
