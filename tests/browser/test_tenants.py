"""Tenants (SPEC §12): the admin of the tenant `acme` signs in and sees acme's templates,
flows and inbox only (none of default's), the header naming acme; a guest leaves a
message on `/guest/acme`, which reaches acme's admin and not default's; the guest page of
an unknown tenant says so. People of `default` never see the concept."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bpflow.mailbox import Mailbox
from bpflow.tenancy import create_tenant

pytestmark = pytest.mark.browser
ACME = "acme"
ADMIN, PASSWORD = "acmeadmin", "acmeadmin-pass-1"
INTAKE = {"name": "intake", "title": "Acme intake", "circles": [
    {"uri": "note", "box": {"form": [{"name": "text", "type": "string", "label": "Note",
                                      "required": True}]}},
    {"uri": "done", "deps": [["note"]]}]}
SUBJECT = "Hello acme from a guest"
DEFAULT_SUBJECT = "Hello default from a guest"


@pytest.fixture(scope="module")
def acme(app_store):
    """The tenant acme (its frame, its admin, a template of its own and a flow of the
    admin's) beside default's shipped templates and a flow of alice's."""
    if app_store.has_tenant(ACME):
        store = app_store.of(ACME)
    else:
        store = create_tenant(app_store, ACME, ADMIN, PASSWORD)
    store.put_template(INTAKE)
    mine = store.start("intake", {}, store.user(ADMIN))
    theirs = app_store.start("order", {"customer": "Initech"}, app_store.user("alice"))
    Mailbox(app_store).guest_message("Dee", DEFAULT_SUBJECT, "Hi", "10.9.9.9")
    return store, mine.id, theirs.id


def _sign_in(page, name: str, password: str, path: str) -> None:
    page.goto(path)
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#user-menu")).to_contain_text(name)


def test_an_acme_admin_sees_only_acme_and_a_guest_writes_to_acme(
        page, new_page, sign_in, app_store, acme, screenshot) -> None:
    store, mine, theirs = acme
    _sign_in(page, ADMIN, PASSWORD, "/flows")
    expect(page.locator("#tenant-name")).to_have_text(ACME)
    expect(page.get_by_role("button", name="Start intake")).to_be_visible()
    for name in ("order", "reimbursement", "onboarding"):
        expect(page.get_by_role("button", name=f"Start {name}")).to_have_count(0)
    expect(page.get_by_label(f"Open {mine}")).to_be_visible()
    expect(page.get_by_label(f"Open {theirs}")).to_have_count(0)
    page.locator("#flows-search").fill(theirs)
    expect(page.get_by_text("No flow matches")).to_be_visible()
    screenshot(page, "tenants_acme_flows")

    page.goto("/templates")
    expect(page.locator('.template-line[data-template="intake"]')).to_be_visible()
    for name in ("order", "reimbursement", "onboarding"):
        expect(page.locator(f'.template-line[data-template="{name}"]')).to_have_count(0)
    screenshot(page, "tenants_acme_templates")

    page.goto(f"/flow/{theirs}")  # default's flow: not found from acme
    expect(page.get_by_text("Flow not found")).to_be_visible()
    expect(page.locator("#tenant-name")).to_have_text(ACME)

    # A guest writes to acme's admins from acme's guest page.
    guest = new_page()
    guest.goto(f"/guest/{ACME}")
    expect(guest.locator("#guest-tenant")).to_contain_text(ACME)
    guest.get_by_label("Your name").fill("Gus")
    guest.get_by_label("Subject").fill(SUBJECT)
    guest.get_by_role("textbox", name="Message").fill("Are you open on Sunday?")
    guest.get_by_role("button", name="Send message").click()
    expect(guest.locator("#guest-sent")).to_be_visible()
    screenshot(guest, "tenants_guest_acme_sent")

    page.goto("/inbox")
    page.get_by_role("tab", name="Guest messages").click()
    expect(page.locator(".mail", has_text=SUBJECT)).to_be_visible()
    expect(page.locator(".mail", has_text=DEFAULT_SUBJECT)).to_have_count(0)
    screenshot(page, "tenants_acme_inbox")
    acme_guest = Mailbox(store).inbox(store.user(ADMIN), kind="guest")
    assert [m["subject"] for m in acme_guest] == [SUBJECT]
    default_guest = Mailbox(app_store).inbox(app_store.user("root"), kind="guest")
    assert SUBJECT not in [m["subject"] for m in default_guest]

    # Default's admin: no tenant in the header, none of acme's templates, flows or mail.
    root = new_page()
    sign_in(root, "root", path="/inbox")
    root.get_by_role("tab", name="Guest messages").click()
    expect(root.locator(".mail", has_text=DEFAULT_SUBJECT)).to_be_visible()
    expect(root.locator(".mail", has_text=SUBJECT)).to_have_count(0)
    expect(root.locator("#tenant-name")).to_have_count(0)
    root.goto("/templates")
    expect(root.locator('.template-line[data-template="order"]')).to_be_visible()
    expect(root.locator('.template-line[data-template="intake"]')).to_have_count(0)
    root.goto(f"/flow/{mine}")
    expect(root.get_by_text("Flow not found")).to_be_visible()
    screenshot(root, "tenants_default_admin_not_found")


def test_the_guest_page_of_an_unknown_tenant_says_so(page, screenshot) -> None:
    page.goto("/guest/nowhere")
    expect(page.locator("#guest-unknown")).to_contain_text("nowhere")
    expect(page.get_by_role("button", name="Send message")).to_have_count(0)
    screenshot(page, "tenants_guest_unknown")
    page.goto("/guest")
    expect(page.get_by_role("button", name="Send message")).to_be_visible()
    expect(page.locator("#guest-tenant")).to_have_count(0)
