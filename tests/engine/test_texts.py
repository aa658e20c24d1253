"""Templates' texts in several languages (SPEC §17): every text for people may be a string
or `{language: text}`; the analysis checks the maps (codes, values, `${...}` in each
language, with pointers into the map) and warns of one without English; the model keeps
them as `Text`, which reads as English and carries every translation."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from engine.analysis import analyze, load_template
from engine.placeholders import substitute
from engine.texts import CODES, Text, make

ROOT = Path(__file__).resolve().parents[2]
EN_ZH = {"en": "Expense claim", "zh-CN": "报销"}


def translated() -> dict[str, Any]:
    """A template with a map at every place a text for people may be one."""
    return {
        "name": "claim", "title": dict(EN_ZH),
        "description": {"en": "Claim back money", "zh-CN": "报销垫付的费用"},
        "circles": [
            {"uri": "claim", "description": {"en": "Fill in the claim", "zh-CN": "填写报销单"},
             "box": {"form": [
                 {"name": "amount", "type": "number", "label": {"en": "Amount", "zh-CN": "金额"},
                  "placeholder": {"en": "e.g. 12.50", "zh-CN": "例如 12.50"},
                  "help": {"en": "In euros", "zh-CN": "以欧元计"}},
                 {"name": "kind", "type": "select", "label": "Kind",
                  "options": ["other", {"value": "train", "label": {"en": "Train",
                                                                     "zh-CN": "火车"}},
                              {"value": 3}]}]}},
            {"uri": "approve", "deps": [["claim"]],
             "box": {"action": {"type": "approval", "to": "bob",
                                "subject": {"en": "Claim of ${claim.amount}",
                                            "zh-CN": "报销 ${claim.amount}"},
                                "body": {"en": "A ${claim.kind} ticket",
                                         "zh-CN": "${claim.kind} 票"}}}},
            {"uri": "tell", "deps": [["approve"]],
             "box": {"action": {"type": "mail", "to": "bob",
                                "subject": {"en": "Approved", "zh-CN": "已同意"},
                                "body": "${claim.amount}"}}},
            {"uri": "review", "deps": [["tell"]],
             "box": {"confirm": {"en": "Pay ${claim.amount}?",
                                 "zh-CN": "支付 ${claim.amount}？"}}}]}


def errors(body: Any) -> list[tuple[str, str, str]]:
    return [(e["code"], e["path"], e["message"]) for e in analyze(body).errors]


def test_every_text_for_people_may_be_a_map_of_languages():
    report = analyze(translated())
    assert report.valid and report.warnings == [], report.errors
    t = report.template
    assert t is not None
    assert isinstance(t.title, Text) and t.title == "Expense claim"  # reads as English
    assert t.title.translations == EN_ZH and t.description.translations["zh-CN"] == "报销垫付的费用"
    claim, approve, tell, review = (c for c in t.flow.circles)
    assert claim.description.translations["zh-CN"] == "填写报销单"
    amount, kind = claim.box.form
    assert amount.label.translations["zh-CN"] == "金额"
    assert amount.placeholder.translations["zh-CN"] == "例如 12.50"
    assert amount.help == "In euros"
    assert kind.label == "Kind" and type(kind.label) is str  # a string stays one
    assert kind.options == ("other", "train", 3)  # what choosing an option stores
    assert kind.option_labels[0] == "other" and kind.option_labels[2] == "3"
    assert kind.option_labels[1].translations == {"en": "Train", "zh-CN": "火车"}
    assert approve.box.action["subject"].translations["zh-CN"] == "报销 ${claim.amount}"
    assert tell.box.action["body"] == "${claim.amount}"
    assert review.box.confirm.translations["zh-CN"] == "支付 ${claim.amount}？"


def test_plain_strings_are_kept_as_they_were():
    body = translated()
    body["title"] = "Claim"
    body["circles"][3]["box"]["confirm"] = "Pay?"
    t = load_template(body)
    assert type(t.title) is str and type(t.flow.circles[3].box.confirm) is str


@pytest.mark.parametrize("pointer,value,code,where,message", [
    ("/title", {"fr": "Note de frais"}, "schema", "/title/fr",
     "title: 'fr' is not a language bpflow speaks (the languages are en, zh-CN)"),
    ("/title", {"en": "x" * 201}, "schema", "/title/en",
     "title: the en text is longer than 200 characters"),
    ("/description", {"en": "Claim", "zh-CN": None}, "schema", "/description/zh-CN",
     "description: the zh-CN text must be a string, not null"),
    ("/circles/0/description", {"zh_CN": "填写"}, "schema", "/circles/0/description/zh_CN",
     "circle 'claim': description: 'zh_CN' is not a language bpflow speaks; write 'zh-CN'"),
    ("/circles/0/box/form/0/label", {"en": "Amount", "zh-CN": ["金额"]}, "invalid_box",
     "/circles/0/box/form/0/label/zh-CN",
     "circle 'claim': the label of field 'amount': the zh-CN text must be a string, not a"
     " list"),
    ("/circles/0/box/form/0/label", 12, "invalid_box", "/circles/0/box/form/0/label",
     "circle 'claim': the label of field 'amount' must be a string or a map of language to"
     " text ({\"en\": \"...\", \"zh-CN\": \"...\"})"),
    ("/circles/0/box/form/1/options/1/label", {}, "invalid_box",
     "/circles/0/box/form/1/options/1/label",
     "circle 'claim': the label of option 1 of field 'kind' gives no language: write a"
     " string, or a map of language to text (one of en, zh-CN)"),
    ("/circles/1/box/action/subject", {"EN": "Claim"}, "invalid_box",
     "/circles/1/box/action/subject/EN",
     "circle 'approve': the approval's subject: 'EN' is not a language bpflow speaks;"
     " write 'en'"),
    ("/circles/2/box/action/body", {"en": 5}, "invalid_box", "/circles/2/box/action/body/en",
     "circle 'tell': the mail's body: the en text must be a string, not a number"),
    ("/circles/3/box/confirm", {"en": "Pay?", "de": "Zahlen?"}, "invalid_box",
     "/circles/3/box/confirm/de",
     "circle 'review': confirm: 'de' is not a language bpflow speaks (the languages are en,"
     " zh-CN)"),
])
def test_a_bad_map_is_an_error_naming_the_language(pointer, value, code, where, message):
    body = translated()
    parts = pointer.strip("/").split("/")
    parent: Any = body
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    parent[parts[-1]] = value
    assert errors(body) == [(code, where, message)]


def test_placeholders_are_checked_in_every_language_with_the_maps_pointer():
    body = translated()
    body["circles"][3]["box"]["confirm"]["zh-CN"] = "支付 ${ghost.amount} 给 ${ claim }？"
    body["circles"][1]["box"]["action"]["subject"]["zh-CN"] = "报销 ${workflow.colour}"
    found = {(code, path) for code, path, _ in errors(body)}
    assert found == {("unknown_variable", "/circles/3/box/confirm/zh-CN"),
                     ("invalid_expression", "/circles/3/box/confirm/zh-CN"),
                     ("unknown_variable", "/circles/1/box/action/subject/zh-CN")}


def test_an_option_object_needs_a_value_and_no_other_key():
    body = translated()
    body["circles"][0]["box"]["form"][1]["options"] = [{"label": "Bus"},
                                                       {"value": {"a": 1}},
                                                       {"value": "car", "colour": "red"}]
    found = {(code, path) for code, path, _ in errors(body)}
    assert found == {("invalid_box", "/circles/0/box/form/1/options/0"),
                     ("invalid_box", "/circles/0/box/form/1/options/1"),
                     ("invalid_box", "/circles/0/box/form/1/options/2/colour")}


def test_a_map_without_english_is_valid_with_a_warning():
    body = translated()
    body["title"] = {"zh-CN": "报销"}
    body["circles"][3]["box"]["confirm"] = {"zh-CN": "支付 ${claim.amount}？"}
    report = analyze(body)
    assert report.valid
    assert [(w["code"], w["path"]) for w in report.warnings] == [
        ("missing_en", "/circles/3/box/confirm"), ("missing_en", "/title")]
    assert "readers of other languages get the first one given" in report.warnings[0]["message"]
    assert report.template is not None and report.template.title == "报销"  # the first given


def test_inline_nested_flows_have_their_texts_checked_too():
    body = {"name": "outer", "circles": [{"uri": "sub", "box": {"action": {
        "type": "flow", "circles": [{"uri": "ask", "box": {"confirm": {"fr": "Oui ?"}}}]}}}]}
    assert [(c, p) for c, p, _ in errors(body)] == [
        ("invalid_box", "/circles/0/box/action/circles/0/box/confirm/fr")]


def test_the_schema_takes_a_map_or_a_string_and_nothing_else():
    body = translated()
    body["title"] = 5
    assert [(c, p) for c, p, _ in errors(body)] == [("schema", "/title")]
    body["title"] = "x" * 201  # a string's length: the schema's, reported once
    assert [(c, p) for c, p, _ in errors(body)] == [("schema", "/title")]


def test_a_text_substitutes_each_language_and_stays_a_text():
    text = make({"en": "Claim of ${a.n}", "zh-CN": "${a.n}"})
    out = substitute(text, lambda path: 12)
    assert isinstance(out, Text) and out == "Claim of 12"
    assert out.translations == {"en": "Claim of 12", "zh-CN": "12"}  # as text, every one


def test_a_text_reads_as_english_else_the_first_and_survives_copies():
    assert Text({"zh-CN": "报销", "en": "Claim"}) == "Claim"
    assert Text({"zh-CN": "报销"}) == "报销"
    text = Text(EN_ZH)
    for copied in (pickle.loads(pickle.dumps(text)), copy.deepcopy(text)):
        assert isinstance(copied, Text) and copied.translations == EN_ZH
    assert json.dumps({"t": text}, ensure_ascii=False) == '{"t": "Expense claim"}'
    assert make("plain") == "plain" and make(None) is None


def test_the_shipped_templates_speak_both_languages_everywhere():
    """Each text for people of upload/workflow/ is a map with every language."""
    from engine.boxes import texts

    def walk(circles: list[dict[str, Any]]):
        for c in circles:
            if "description" in c:
                yield c["description"]
            box = c.get("box", {})
            yield from (value for _, value, _ in texts(box))
            yield from walk(box.get("action", {}).get("circles", []))

    for path in sorted((ROOT / "upload" / "workflow").glob("*.json")):
        body = json.loads(path.read_text(encoding="utf-8"))
        report = analyze(body)
        assert report.valid and report.warnings == [], (path.name, report.errors)
        for value in [body["title"], body["description"], *walk(body["circles"])]:
            if isinstance(value, str) and "${" in value and "$" == value[0] \
                    and value.endswith("}") and value.count("${") == 1:
                continue  # a value only (`${claim.reason}`): the same in every language
            assert isinstance(value, dict) and set(value) == set(CODES), (path.name, value)
