"""Every page in both languages (SPEC §17): axe-core finds no critical or serious
violation (nor content outside the landmarks) at a desktop width, and at a phone's width
(390 × 844) nothing runs off the page sideways nor is cut off; a screenshot of each page
in each language at that width goes to test-output/browser/<page>-<lang>.png; Chinese is
drawn with a Chinese font.

One browser context per language (the browser's language chooses the page's, as for a
person who never touched the menu), the pages visited in a loop, every finding collected
and reported together at the end."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from bpflow.interactions import Interactions
from bpflow.mailbox import Mailbox
from bpflow.worker import Worker
from bpflow_app import routes
from tests.browser.conftest import AXE, OUTPUT_DIR
from tests.browser.untranslated import untranslated

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
FAILING = ("critical", "serious")
# moderate, but what the pages' frame is for: every page has its `main`, and nothing is
# outside the landmarks (`header`, `nav`, `main`)
FAILING_RULES = ("landmark-one-main", "region")
PASSWORD = "ada-pass-1"
# Simplified Chinese faces of assets/styles.css's font stack
CJK_FONTS = ("PingFang SC", "Hiragino Sans GB", "Noto Sans CJK SC", "Source Han Sans SC",
             "Microsoft YaHei", "WenQuanYi Micro Hei")

# Runs in the page after axe.min.js: the violations, each with the elements it names.
AXE_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 160),
                              summary: n.failureSummary}))}));
}"""

# Runs in the page: how wide the document is, the deepest elements reaching past the
# right edge of the viewport (those that push it wider), and what is cut off: a box
# showing part of its content sideways (a tab list hiding its last tab behind a hidden
# scroll bar, a word cut by an ellipsis). A box scrolling sideways over a table or a
# drawing, which says so, is how those fit a phone (not counted).
OVERFLOW = """async (limit) => {
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const name = (el) => {
    const id = el.id ? '#' + el.id : '';
    const cls = typeof el.className === 'string' && el.className
      ? '.' + el.className.trim().split(/\\s+/).slice(0, 3).join('.') : '';
    return `${el.tagName.toLowerCase()}${id}${cls} "${(el.textContent || '').trim().slice(0, 50)}"`;
  };
  const width = document.documentElement.scrollWidth;
  const wide = [];
  const cut = [];
  for (const el of document.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0) continue;
    if (width > limit && box.right > limit && wide.length < 8
        && ![...el.children].some(c => c.getBoundingClientRect().right > limit)
        && getComputedStyle(el).position !== 'fixed')
      wide.push(`${name(el)} right=${Math.round(box.right)}px`);
    if (el.scrollWidth <= el.clientWidth + 1 || el.matches('input, textarea, select')
        || el.closest('.visually-hidden'))  // shown to screen readers only, clipped on purpose
      continue;
    const style = getComputedStyle(el);
    if (style.overflowX === 'visible') continue;
    const over = (c) => c.getBoundingClientRect().width > el.clientWidth;
    if (style.overflowX !== 'hidden'
        && [...el.querySelectorAll('table, svg')].some(over)) continue;
    if (cut.length < 8)
      cut.push(`${name(el)} shows ${el.clientWidth} of ${el.scrollWidth} px`);
  }
  return {width, wide, cut};
}"""


def _pages(flows: dict[str, str]) -> list[tuple[str, str, bool]]:
    """(name, path, signed in) of every page, in the order a person meets them."""
    pages = [("home", routes.HOME, False), ("guest", routes.GUEST, False),
             ("not-found", "/no/such/page", False), ("register", routes.REGISTER, False),
             ("sign-in", routes.FLOWS, False),
             ("flows", routes.FLOWS, True), ("flow", routes.flow(flows["order"]), True),
             ("flow-claim", routes.flow(flows["claim"]), True),
             ("flow-claim-signers", routes.flow(flows["claim"]), True),  # its dialog open
             ("flow-claim-return", routes.flow(flows["claim"]), True),  # "Return to…" open
             ("inbox", routes.INBOX, True), ("inbox-tasks", routes.INBOX + "?tab=tasks", True),
             ("templates", routes.TEMPLATES, True),
             ("design", routes.design("reimbursement"), True), ("users", routes.USERS, True),
             ("webhooks", routes.WEBHOOKS, True), ("audit", routes.AUDIT, True),
             ("operations", routes.OPERATIONS, True)]  # a template's heat map, migrating
    account = getattr(routes, "ACCOUNT", None)
    if account:
        pages.append(("account", account, True))
    pages.append(("substitute", routes.SUBSTITUTE, True))
    return pages


@pytest.fixture(scope="module")
def ada_flows(app_store) -> dict[str, str]:
    """An admin who also approves and checks claims, so that every page and tab has
    something for her: an order to fill in (a form), a claim of root's waiting for her
    approval (mail in her inbox, a flow she takes part in with a finished step), a claim
    of hers not filled in yet (a task)."""
    if app_store.user("ada") is None:
        app_store.add_user("ada", PASSWORD, ["admin", "approver", "finance"])
    user, root = app_store.user("ada"), app_store.user("root")
    app_store.start("reimbursement", {}, user)
    claim = app_store.start("reimbursement", {}, root)
    Interactions(app_store).submit(claim.id, "claim", app_store.engine.bookmark(claim, "claim"),
                                   {"amount": 42.5, "reason": "出差火车票", "manager": "ada"},
                                   "root")
    Worker(app_store).run_once()
    deadline = time.monotonic() + 20  # the server's worker may have taken it first
    while not any(m["instance"] == claim.id for m in Mailbox(app_store).inbox(user)):
        assert time.monotonic() < deadline, "the claim's approval mail never came"
        time.sleep(0.2)
    for title in ("Errand", "Errand, second version"):  # two versions: one to migrate to
        app_store.put_template({"name": "errand", "title": title, "circles": [
            {"uri": "go", "box": {"form": [{"name": "where", "type": "string"}]}}]})
    return {"order": str(app_store.start("order", {"customer": "ACME"}, user).id),
            "claim": str(claim.id)}


def _sign_in(page, password: str = PASSWORD) -> None:
    page.locator("input[name=username]").fill("ada")
    page.locator("input[name=password]").fill(password)
    page.locator("#sign-in-submit").click()
    if password == PASSWORD:
        expect(page.locator("#user-menu")).to_contain_text("ada")


def _fonts(page, selector: str) -> list[str]:
    """The fonts Chromium drew the text of the first `selector` with (DevTools' CSS
    domain: the faces actually used, not the font-family asked for)."""
    cdp = page.context.new_cdp_session(page)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument")["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        return [f["familyName"] for f in fonts]
    finally:
        cdp.detach()


def _report(problems: dict[str, list[str]]) -> str:
    return "\n".join(f"\n== {where}\n" + "\n".join(lines) for where, lines in problems.items())


def _violations(page) -> list[str]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate(AXE_RUN)
    lines = []
    for v in found:
        if v["impact"] not in FAILING and v["id"] not in FAILING_RULES:
            continue
        lines.append(f"{v['impact']} {v['id']}: {v['help']} ({len(v['nodes'])} elements)")
        for node in v["nodes"][:6]:
            first = (node["summary"] or "").splitlines()
            detail = " ".join(s.strip() for s in first[1:3])
            lines.append(f"    {node['target']}  {node['html']}\n      {detail}")
    others = sorted({f"{v['impact']} {v['id']}" for v in found
                     if v["impact"] not in FAILING and v["id"] not in FAILING_RULES})
    if others:
        print(f"  also: {', '.join(others)}")
    return lines


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_every_page_is_accessible_and_fits_a_phone(browser, app_server, ada_flows, lang):
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run `make axe`", pytrace=False)
    context = browser.new_context(base_url=app_server, locale=lang, viewport=DESKTOP,
                                  reduced_motion="reduce")
    context.set_default_timeout(30_000)
    problems: dict[str, list[str]] = {}
    try:
        page = context.new_page()
        for name, path, signed_in in _pages(ada_flows):
            page.set_viewport_size(DESKTOP)
            if name == "flows" and page.url.endswith(path):
                # just signed in here: with its toast
                expect(page.locator("[data-sonner-toast]")).to_be_visible()
            else:
                page.goto(path)
            expect(page.locator("html")).to_have_attribute("lang", lang)
            if name == "sign-in":  # as it is after a mistyped password, with its error
                _sign_in(page, "not-" + PASSWORD)
                expect(page.locator("[role=alert]").first).to_be_visible()
            else:
                expect(page.locator("h1").first).to_be_visible()
            if signed_in:
                expect(page.locator("#user-menu")).to_be_visible()
            if name == "flow-claim-signers":  # the approval card's Add signers (SPEC §15)
                page.locator(".add-signers").first.click()
                expect(page.get_by_role("dialog")).to_be_visible()
            if name == "design":  # a circle's panel: its pickers, timing, completion
                page.locator('.react-flow__node[data-id="approve"]').click()
                expect(page.locator("#circle-people")).to_be_visible()
            if name == "flow-claim-return":  # its dialog: the steps, a comment, a confirmation
                page.locator(".return-to").first.click()
                expect(page.get_by_role("alertdialog")).to_be_visible()
            if name == "operations":  # a template named: its drawing, migrating its flows
                page.locator("#ops-template").fill("errand")
                page.locator("#ops-search").click()
                expect(page.locator("#ops-heat")).to_be_visible()
                expect(page.locator("#ops-migration")).to_be_visible()
            if name == "flows" and lang == "zh-CN":  # the header's Chinese, in a CJK face
                used = _fonts(page, "nav a p")
                print(f"  the header's Chinese drawn with {used}")
                if not any(f in CJK_FONTS for f in used):
                    problems[f"{name} ({lang}): fonts"] = [
                        f"    the header's links are drawn with {used}, none of {CJK_FONTS}"
                        " (Debian: `make fonts` installs fonts-noto-cjk)"]
            t0 = time.monotonic()
            found = _violations(page)
            t1 = time.monotonic()
            if found:
                problems[f"{name} {path} ({lang}): axe"] = found
            english = untranslated(page) if lang != "en" else []
            if english:  # a text that did not come from the catalog (or data not marked)
                problems[f"{name} {path} ({lang}): not from the catalog"] = [
                    f"    {text}" for text in english]

            page.set_viewport_size(PHONE)
            fit = page.evaluate(OVERFLOW, PHONE["width"] + 1)
            if fit["width"] > PHONE["width"] + 1:
                problems[f"{name} {path} ({lang}): {fit['width']} px wide at 390"] = [
                    f"    {w}" for w in fit["wide"]]
            if fit["cut"]:
                problems[f"{name} {path} ({lang}): cut off at 390"] = [
                    f"    {w}" for w in fit["cut"]]
            OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(OUTPUT_DIR / f"{name}-{lang}.png"), full_page=True)
            print(f"{name} ({lang}): axe {t1 - t0:.2f} s, phone {time.monotonic() - t1:.2f} s")

            if name == "sign-in":
                page.set_viewport_size(DESKTOP)
                _sign_in(page)
    finally:
        context.close()
    assert not problems, _report(problems)

