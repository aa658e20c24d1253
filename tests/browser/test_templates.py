"""Journey 7: an admin uploads a broken template, sees every error with its path, then
uploads the fixed one, which becomes the next version."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from engine.analysis import analyze

pytestmark = pytest.mark.browser
GOOD = {"name": "travel", "title": "Travel request",
        "circles": [{"uri": "ask", "box": {"form": [{"name": "where", "type": "string",
                                                     "required": True}]}},
                    {"uri": "book", "deps": [["ask"]]},
                    {"uri": "done", "deps": [["book"]]}]}
BROKEN = {"name": "travel", "title": "Travel request",
          "circles": [{"uri": "ask", "box": {"form": [{"name": "where", "type": "place"}]}},
                      {"uri": "book", "deps": [["ask", "nowhere"]]},
                      {"uri": "book", "deps": [["ask"]]},
                      {"uri": "done", "deps": [["book"]], "when": "${ask.where} =="}]}
FIXED = {**GOOD, "circles": [*GOOD["circles"][:2],
                             {"uri": "done", "deps": [["book"]],
                              "when": "${ask.where} != 'nowhere'"}]}


def test_7_admin_sees_upload_errors_by_path_then_stores_a_new_version(
        page, sign_in, app_store, screenshot) -> None:
    app_store.put_template(GOOD)
    errors = analyze(BROKEN, app_store.latest_body).errors
    assert len(errors) >= 3
    sign_in(page, "root", path="/templates")
    expect(page.locator('.template-line[data-template="travel"]')).to_be_visible()

    page.get_by_label("Template JSON").fill(json.dumps(BROKEN, indent=1))
    page.get_by_role("button", name="Upload").click()
    rows = page.locator(".upload-error")
    expect(rows).to_have_count(len(errors))
    for e in errors:
        expect(rows.filter(has_text=e["path"]).filter(has_text=e["code"]).first).to_be_visible()
    screenshot(page, "journey7_errors_by_path")

    page.get_by_label("Template JSON").fill(json.dumps(FIXED, indent=1))
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#upload-outcome")).to_contain_text("Stored travel version 2")
    expect(rows).to_have_count(0)
    line = page.locator('.template-line[data-template="travel"]')
    expect(line.get_by_role("button", name="v2 of travel")).to_be_visible()
    expect(page.locator("#template-preview")).to_contain_text("travel v2")
    screenshot(page, "journey7_new_version")


def test_locked_versions_are_marked_in_the_readers_language(page, app_store,
                                                            screenshot) -> None:
    app_store.add_user("lihua", "lihua-pass-1", ["admin"])  # her language is hers alone
    page.goto("/templates")
    page.get_by_label("Username").fill("lihua")
    page.get_by_label("Password").fill("lihua-pass-1")
    page.get_by_role("button", name="Sign in").click()
    line = page.locator('.template-line[data-template="signin"]')
    expect(line.get_by_role("button", name="v1 of signin, locked")).to_be_visible()
    expect(line).to_contain_text("Sign in")  # the template's title

    page.locator("#lang-menu").click()
    page.locator("#lang-zh-CN").click()
    expect(page.get_by_role("heading", name="模板", exact=True).first).to_be_visible()
    expect(line.get_by_role("button", name="signin 的 v1（已锁定）")).to_be_visible()
    expect(page.get_by_role("heading", name="上传新版本")).to_be_visible()
    expect(page.get_by_role("tab", name="文件")).to_be_visible()
    page.get_by_label("模板 JSON").fill(json.dumps(BROKEN))
    page.get_by_role("button", name="上传", exact=True).click()
    expect(page.get_by_role("alert").filter(has_text="模板未保存：有")).to_be_visible()
    expect(page.get_by_role("columnheader", name="路径")).to_be_visible()
    expect(page.locator("#template-preview")).to_contain_text("流程（所有版本）")
    screenshot(page, "templates_zh")


def test_upload_by_file(page, sign_in, tmp_path) -> None:
    body = {**GOOD, "name": "travel_file"}
    path = tmp_path / "travel_file.json"
    path.write_text(json.dumps(body))
    sign_in(page, "root", path="/templates")
    page.get_by_role("tab", name="File").click()
    page.locator("#template-file input[type=file]").set_input_files(str(path))
    expect(page.locator("#upload-outcome")).to_contain_text("Stored travel_file version 1")
