"""Languages (SPEC §17): the header's menu turns a page to Chinese at once, keeping what
was typed, with `<html lang>` following; the choice stays with the account; a browser
that asks for Chinese gets it before anyone signs in."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bpflow_app import routes
from tests.browser.untranslated import untranslated

pytestmark = pytest.mark.browser


# In the page: the time of the click on a language, and of `<html lang>` changing after
# it (set right after React has drawn the page in that language).
TIMING = """() => {
  window.__langTimes = {};
  document.addEventListener('click', (e) => {
    if (e.target.closest('[id^="lang-"]:not(#lang-menu)'))
      window.__langTimes.click = performance.now();
  }, true);
  new MutationObserver(() => { window.__langTimes.shown = performance.now(); })
    .observe(document.documentElement, {attributes: true, attributeFilter: ['lang']});
}"""


def _choose(page, code: str) -> float:
    """Choose a language in the page's menu: the milliseconds from the click until the
    page has drawn itself in it, as the page measures them."""
    page.evaluate(TIMING)
    page.locator("#lang-menu").click()
    page.locator(f"#lang-{code}").click()
    expect(page.locator("html")).to_have_attribute("lang", code)
    times = page.evaluate("window.__langTimes")
    return times["shown"] - times["click"]


def _sign_in(page, name: str) -> None:
    """Sign in through the page's form (the users of these tests: password `<name>-pass-1`)."""
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(f"{name}-pass-1")
    page.get_by_role("button", name="Sign in").click()


def test_the_menu_turns_the_guest_page_chinese_keeping_what_was_typed(page, screenshot):
    page.goto("/guest")
    expect(page.get_by_role("heading", name="Leave a message")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    page.get_by_label("Your name").fill("李雷")
    page.get_by_role("textbox", name="Message").fill("你好")

    took = _choose(page, "zh-CN")
    print(f"the page showed zh-CN {took:.0f} ms after the click")
    assert took < 1000  # one short var from the server; every text is in the page already
    expect(page.get_by_role("heading", name="留言", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="发送留言")).to_be_visible()
    expect(page.locator("#lang-menu")).to_contain_text("中文")
    expect(page).to_have_title("留言 · bpflow")
    expect(page.get_by_label("你的姓名")).to_have_value("李雷")  # typed input kept
    expect(page.locator("#guest-body-count")).to_have_text("2 / 5,000 字")
    page.get_by_role("button", name="发送留言").click()
    expect(page.get_by_text("请填写主题")).to_be_visible()
    expect(page.get_by_text("请检查表单")).to_be_visible()
    assert untranslated(page) == []
    screenshot(page, "languages_guest_zh")

    page.goto("/")  # the choice stays with this browser
    expect(page.get_by_text("用圆圈和箭头画出的业务流程。")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")


def test_the_headers_choice_stays_with_the_account(browser, app_server, app_store, new_page,
                                                    screenshot):
    app_store.add_user("lilei", "lilei-pass-1", ["user"])
    page = new_page()
    page.goto("/flows")
    _sign_in(page, "lilei")
    expect(page.locator("#user-menu")).to_contain_text("lilei")
    expect(page.get_by_role("link", name="My flows")).to_be_visible()

    _choose(page, "zh-CN")
    expect(page.get_by_role("link", name="我的流程")).to_be_visible()
    expect(page.get_by_role("link", name="收件箱")).to_be_visible()
    expect(page).to_have_title(re.compile("我的流程"))
    screenshot(page, "languages_header_zh")

    elsewhere = new_page()  # another browser, English: Chinese once lilei signs in
    elsewhere.goto("/flows")
    _sign_in(elsewhere, "lilei")
    expect(elsewhere.get_by_role("link", name="我的流程")).to_be_visible()
    expect(elsewhere.locator("html")).to_have_attribute("lang", "zh-CN")


def test_a_browser_asking_for_chinese_gets_the_sign_in_page_in_chinese(browser, app_server):
    context = browser.new_context(base_url=app_server, locale="zh-CN")
    try:
        page = context.new_page()
        page.goto("/flows")
        expect(page.get_by_role("heading", name="登录")).to_be_visible()
        expect(page.get_by_label("用户名")).to_be_visible()
        expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    finally:
        context.close()


def test_a_page_is_sent_drawn_in_its_readers_language(browser, app_server):
    """The server sends each page drawn in the reader's language (bpflow_app/prerender.py):
    a browser asking for Chinese gets Chinese HTML, which hydrates as drawn (no error, no
    redraw when the backend's answer says the same language); a choice in the menu is kept
    in a cookie, by which the next page comes in that language whatever the browser asks."""
    context = browser.new_context(base_url=app_server, locale="zh-CN")
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        for path, text in (("/", "用圆圈和箭头画出的业务流程。"), ("/guest", "发送留言"),
                           ("/flows", "加载中…"), ("/flow/1", None)):
            sent = page.goto(path)
            html = sent.text()
            assert html.startswith('<!DOCTYPE html><html lang="zh-CN"'), path
            assert "Cookie" in sent.headers["vary"] and "Accept-Language" in sent.headers["vary"]
            if text is not None:
                assert text in html, path
            expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
        expect(page.get_by_role("heading", name="登录")).to_be_visible()
        assert errors == []  # a page drawn otherwise than it hydrates is an error
        for path in [v for k, v in vars(routes).items()  # every page with HTML of its own
                     if k.isupper() and v.startswith("/") and "[" not in v]:
            html = context.request.get(path).text()
            assert html.startswith('<!DOCTYPE html><html lang="zh-CN"'), path
            assert "Loading…" not in html and "Notifications" not in html, path

        page.goto("/guest")
        _choose(page, "en")
        expect(page.get_by_role("heading", name="Leave a message")).to_be_visible()
        assert {c["name"]: c["value"] for c in context.cookies()}["bpflow_lang"] == "en"
        sent = page.goto("/")
        assert sent.text().startswith('<!DOCTYPE html><html lang="en"')
        assert "Business flows drawn as circles and arrows." in sent.text()
        assert errors == []
    finally:
        context.close()


def test_times_follow_the_language_and_the_page_makes_no_intl_formatter(app_store, new_page):
    """The times of a list are drawn in the page's language and zone, by the CLDR
    patterns of the head's script (`when.formats`), with no `Intl` formatter made: the
    first of a page costs Chromium 15-40 ms (bench/RESULTS.md)."""
    app_store.add_user("hanmei", "hanmei-pass-1", ["user"])
    for _ in range(3):
        app_store.start("reimbursement", {}, app_store.user("hanmei"))
    page = new_page()
    page.add_init_script("""(() => { window.__intlMade = [];
      for (const kind of ["DateTimeFormat", "RelativeTimeFormat", "NumberFormat",
                          "PluralRules", "Collator", "ListFormat", "Segmenter"]) {
        const Made = Intl[kind];
        Intl[kind] = function (...args) { window.__intlMade.push(kind);
                                          return new Made(...args); };
        Intl[kind].prototype = Made.prototype;
      }
      for (const [owner, name] of [[Date.prototype, "toLocaleString"],
          [Date.prototype, "toLocaleDateString"], [Date.prototype, "toLocaleTimeString"],
          [Number.prototype, "toLocaleString"]]) {
        const call = owner[name];
        owner[name] = function (...args) { window.__intlMade.push(name);
                                           return call.apply(this, args); };
      }
    })()""")
    page.goto("/flows")
    _sign_in(page, "hanmei")
    times = page.locator("main time")
    expect(times).to_have_count(3)
    expect(times.first).to_contain_text(re.compile(r"now|second|minute"))
    expect(times.first).to_have_attribute("title", re.compile(r"[A-Z][a-z]{2} \d+, \d{4}, "))

    _choose(page, "zh-CN")
    expect(times.first).to_contain_text(re.compile("现在|秒|分钟"))
    expect(times.first).to_have_attribute("title", re.compile("年"))
    assert page.evaluate("window.__intlMade") == []
