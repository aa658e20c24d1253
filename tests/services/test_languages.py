"""What a language code or an Accept-Language header stands for, and which of a
template's translated texts a reader sees (SPEC §17)."""

from __future__ import annotations

import pytest

from bpflow.languages import DEFAULT, LANGUAGES, best, known, pick, picker
from engine import texts
from engine.analysis import load_template


@pytest.mark.parametrize("code,ours", [
    ("en", "en"), ("EN-gb", "en"), ("zh-CN", "zh-CN"), ("zh_CN", "zh-CN"), ("zh-cn", "zh-CN"),
    ("zh", "zh-CN"), ("zh-Hans", "zh-CN"), ("zh-Hans-CN", "zh-CN"), ("fr", None), ("", None),
    (None, None)])
def test_a_code_stands_for_one_of_our_languages_or_none(code, ours):
    assert known(code) == ours


@pytest.mark.parametrize("header,lang", [
    ("zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"),
    ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
    ("fr-FR,fr;q=0.9,zh;q=0.5", "zh-CN"),  # the first one of ours
    ("en;q=0.3, zh-Hans;q=0.7", "zh-CN"),  # quality, not order
    ("zh-CN;q=0, de", DEFAULT),  # q=0: not wanted
    ("", DEFAULT), (None, DEFAULT), ("garbage;;q=x", DEFAULT)])
def test_the_browsers_language_is_the_best_of_ours_it_asks_for(header, lang):
    assert best(header) == lang


def test_templates_may_give_their_texts_in_exactly_our_languages():
    assert texts.CODES == tuple(LANGUAGES) and texts.DEFAULT == DEFAULT


@pytest.mark.parametrize("text,lang,shown", [
    ("Expense claim", "zh-CN", "Expense claim"),  # a string passes through
    ({"en": "Expense claim", "zh-CN": "报销"}, "zh-CN", "报销"),
    ({"en": "Expense claim", "zh-CN": "报销"}, "zh_cn", "报销"),  # any spelling of ours
    ({"en": "Expense claim", "zh-CN": "报销"}, "zh-Hans", "报销"),
    ({"en": "Expense claim", "zh-CN": "报销"}, "en-GB", "Expense claim"),
    ({"en": "Expense claim", "zh-CN": "报销"}, "fr", "Expense claim"),  # else English
    ({"en": "Expense claim", "zh-CN": "报销"}, None, "Expense claim"),
    ({"zh-CN": "报销"}, "en", "报销"),  # else the first given
    (texts.Text({"zh-CN": "报销", "en": "Expense claim"}), "zh-CN", "报销"),
    (texts.Text({"zh-CN": "报销", "en": "Expense claim"}), "en", "Expense claim"),
    (None, "en", ""), (12, "en", "12")])
def test_a_reader_sees_their_language_else_english_else_the_first(text, lang, shown):
    assert pick(text, lang) == shown and type(pick(text, lang)) is str


def test_pages_pick_from_the_model_of_a_template():
    """What the web pages read (`Template.title`, a circle's description, a field's label
    and option labels, a confirmation) picked for a reader; `${...}` after picking."""
    t = load_template({"name": "t", "title": {"en": "Order", "zh-CN": "订单"}, "circles": [
        {"uri": "ask", "description": {"en": "What to ship", "zh-CN": "填写发货内容"},
         "box": {"form": [{"name": "item", "type": "select",
                           "label": {"en": "Item", "zh-CN": "商品"},
                           "options": [{"value": "desk", "label": {"en": "Desk",
                                                                   "zh-CN": "书桌"}},
                                       "lamp"]}]}},
        {"uri": "ok", "deps": [["ask"]],
         "box": {"confirm": {"en": "Ship ${ask.item}?", "zh-CN": "发货 ${ask.item}？"}}}]})
    zh = picker("zh-CN")
    ask, ok = t.flow.circles
    field = ask.box.form[0]
    assert (zh(t.title), zh(ask.description), zh(field.label)) == ("订单", "填写发货内容", "商品")
    assert [zh(label) for label in field.option_labels] == ["书桌", "lamp"]
    assert field.options == ("desk", "lamp")
    assert pick(t.title, "en") == "Order" == t.title  # shown as a string: English
    assert zh(ok.box.confirm) == "发货 ${ask.item}？"
