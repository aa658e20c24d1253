"""Every page drawn in Chinese shows no interface text that did not come from the catalogs
(SPEC §17): a browser asking for zh-CN walks the sign-in form, the public pages and, signed
in as an admin with something in every list, every page of the app but the flow page
(its own journeys check it; here only its copies, Urge and the CC dialog), opening the
inbox's tabs, a template's preview and its migration. Data (names, values, addresses,
JSON) is marked `translate="no"` (tests/browser/untranslated.py)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bpflow.access import Caller
from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.moves import nudging
from bpflow.worker import Worker
from tests.browser.test_tasks_inbox import wait_for
from tests.browser.untranslated import untranslated

pytestmark = pytest.mark.browser
# a template at two versions with a flow at the first: the templates page offers to migrate
V1 = {"name": "visit", "title": "Site visit", "circles": [
    {"uri": "plan", "description": "Plan the visit", "assign": {"roles": ["admin"]},
     "box": {"confirm": "Planned?"}},
    {"uri": "done", "deps": [["plan"]]}]}
V2 = {**V1, "circles": [V1["circles"][0],
                        {"uri": "report", "deps": [["plan"]], "box": {"confirm": "Written?"}},
                        {"uri": "done", "deps": [["report"]]}]}


ADMIN = ("zhou", "zhou-pass-1")  # an administrator who also approves claims



def _arrange(store) -> str:
    """Something in every list the admin sees: flows of his and of alice's waiting for him
    (an approval mail), a task of his groups, a message, a copy and an urge of alice's, a
    guest's note, a webhook, entries of the audit log; the id of alice's claim."""
    if store.user(ADMIN[0]) is None:
        store.add_user(ADMIN[0], ADMIN[1], ["user", "approver", "admin"])
    admin, alice = store.user(ADMIN[0]), store.user("alice")
    store.put_template(V1)
    store.start("visit", {}, admin)
    store.put_template(V2)
    claim = store.start("reimbursement", {}, alice)
    Interactions(store).submit(claim.id, "claim", store.engine.bookmark(claim, "claim"),
                               {"amount": 12.5, "reason": "Parking", "manager": ADMIN[0]},
                               "alice")
    Worker(store).run_once()
    mailbox = Mailbox(store)
    wait_for(lambda: any(m["instance"] == claim.id for m in mailbox.inbox(admin)))
    mailbox.send("message", alice, [ADMIN[0]], "Lunch on Friday", "Shall we meet at noon?")
    mailbox.guest_message("Eve Visitor", "Opening hours", "When are you open?", "zh-check")
    store.add_webhook("https://hooks.example.com/bpflow", ["instance.completed"],
                      "a-secret-of-enough-length", ADMIN[0])
    store.add_audit(admin["id"], ADMIN[0], "user_roles_changed", "alice", {"roles": ["user"]},
                    {"roles": ["approver", "user"]})
    store.add_audit(None, None, "template_retired", "visit", {"retired": False},
                    {"retired": True})
    nudging.copy(store, Caller.of(alice), claim.id, [ADMIN[0]], "FYI")
    nudging.urge(store, Caller.of(alice), claim.id, "Before Friday, please")
    return claim.id


def _check(page, where: str, found: dict[str, list[str]]) -> None:
    texts = untranslated(page)
    if texts:
        found[where] = texts


def _dialog(page, where: str, found: dict[str, list[str]]) -> None:
    """Check the dialog open on `page`, then cancel it."""
    dialog = page.get_by_role("alertdialog")
    expect(dialog).to_be_visible()
    _check(page, where, found)
    dialog.get_by_role("button", name="取消").click()
    expect(dialog).to_have_count(0)


def test_every_page_in_chinese_shows_only_catalog_texts_and_marked_data(
        browser, app_server, app_store) -> None:
    claim = _arrange(app_store)
    context = browser.new_context(base_url=app_server, locale="zh-CN", reduced_motion="reduce",
                                  viewport={"width": 1280, "height": 800})
    context.set_default_timeout(30_000)
    found: dict[str, list[str]] = {}
    try:
        page = context.new_page()
        for path, heading in (("/", "bpflow"), ("/guest", "留言"), ("/register", "注册账号"),
                              ("/no-such-page", "页面不存在")):
            page.goto(path)
            expect(page.get_by_role("heading", name=heading).first).to_be_visible()
            expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
            _check(page, path, found)

        page.goto("/flows")
        expect(page.get_by_label("用户名")).to_be_visible()
        _check(page, "sign-in form", found)
        page.get_by_label("用户名").fill(ADMIN[0])
        page.get_by_label("密码").fill(ADMIN[1])
        page.get_by_role("button", name="登录").click()
        expect(page.locator("#user-menu")).to_contain_text(ADMIN[0])
        expect(page.locator(".instance-row, .taking-part-row").first).to_be_visible()
        expect(page.get_by_role("button", name="发起 visit", exact=True)).to_be_visible()
        _check(page, "/flows", found)

        page.goto("/inbox")
        for tab in ("审批", "待办", "消息", "抄送我的", "催办提醒", "访客留言"):
            page.get_by_role("tab", name=tab).click()
            expect(page.get_by_role("tab", name=tab)).to_have_attribute("data-state", "active")
            rows = page.locator(".task-row" if tab == "待办" else ".mail")
            expect(rows.first).to_be_visible()
            if tab != "待办":  # an opened mail: its body, and an approval's decision
                rows.first.locator(".row-button").click()
                expect(rows.first.locator(".mail-body")).to_be_visible()
            _check(page, f"/inbox ({tab})", found)
            if tab == "审批":  # and its add-signers dialog (SPEC §15)
                rows.first.get_by_role("button", name=re.compile("^加签：")).click()
                signers = page.get_by_role("dialog")
                expect(signers).to_be_visible()
                _check(page, "/inbox (审批, 加签)", found)
                signers.get_by_role("button", name="取消").click()
                expect(signers).to_have_count(0)
            if tab == "审批":  # and its "Return to…" dialog
                rows.first.locator(".return-to").click()
                _dialog(page, "/inbox (审批, 退回到…)", found)
            if tab == "待办":  # and its transfer dialog
                rows.first.get_by_role("button", name=re.compile("^转办 ")).click()
                _dialog(page, "/inbox (待办, 转办)", found)

        page.goto(f"/flow/{claim}")  # who was copied, Urge, and the CC dialog
        expect(page.locator("#flow-copies")).to_be_visible()
        _check(page, "/flow (抄送, 催办)", found)
        page.locator("#copy-flow").click()
        _dialog(page, "/flow (抄送)", found)

        page.goto("/templates")
        line = page.locator('.template-line[data-template="visit"]')
        line.get_by_role("button", name="v2").first.click()
        expect(page.locator("#template-preview")).to_contain_text("visit v2")
        expect(page.locator("#migration")).to_be_visible()
        page.locator("#migrate-dry-run").click()
        expect(page.locator("#migration-outcome")).to_be_visible()
        page.locator("#template-preview .circle-count").first.click()
        expect(page.locator("#circle-instances .instance-line").first).to_be_visible()
        _check(page, "/templates (visit v2, its migration)", found)
        line.get_by_role("button", name="停用 visit", exact=True).click()
        _dialog(page, "/templates (停用 visit?)", found)

        # controls named by a sentence holding data keep their names (a hidden sentence)
        for path, ready, named in (
                ("/users", "tr[data-user]", "重置密码（alice）"),
                ("/webhooks", "[data-webhook]", "https://hooks.example.com/bpflow 的投递记录"),
                ("/account", "#account-name", None), ("/audit", "[data-audit]", None),
                ("/substitute", "#save-substitute", None)):
            page.goto(path)
            expect(page.locator(ready).first).to_be_visible()
            _check(page, path, found)
            if named:  # the dialog (or list) it opens
                page.get_by_role("button", name=named, exact=True).click()
                if path == "/users":
                    _dialog(page, "/users (重置密码)", found)
                else:
                    expect(page.get_by_role("heading", name="最近的投递")).to_be_visible()
                    _check(page, "/webhooks (投递记录)", found)
    finally:
        context.close()
    assert not found, "English outside the catalogs and not marked as data:\n" + "\n".join(
        f"{where}:\n  " + "\n  ".join(texts) for where, texts in found.items())
