"""Templates in the store beyond the store's own tests: importing a directory checks every
file first; a nested flow with a compute box runs through store steps."""

from __future__ import annotations

import json

import pytest

from bpflow.moves import circle_words
from tests.services.helpers import mark


def test_compute_and_three_level_nesting_through_the_store(store):
    inner = [{"uri": "leaf", "box": {"form": [{"name": "v", "type": "integer"}]}}]
    for depth in (3, 2, 1):
        inner = [{"uri": f"n{depth}", "box": {"action": {"type": "flow", "circles": inner}}}]
    inner.append({"uri": "double", "deps": [["n1"]], "box": {"action": {
        "type": "compute", "outputs": {"v": "${n1.n2.n3.leaf.v} * 2"}}}})
    store.put_template({"name": "deep", "circles": inner})
    iid = store.start("deep").id
    store.complete(iid, "n1.n2.n3.leaf", mark(store, iid, "n1.n2.n3.leaf"), {"v": 21})
    final = store.get(iid)
    assert final.status == "completed" and final.circles["double"].result == {"v": 42}


def test_import_checks_every_file_before_storing_any(store, tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"name": "aaa", "circles": [{"uri": "x"}]}))
    (tmp_path / "b.json").write_text(json.dumps({"name": "bbb", "circles": [
        {"uri": "x", "deps": [["nope"]]}]}))
    with pytest.raises(Exception, match="b.json"):
        store.import_dir(tmp_path)
    assert store.template_versions() == {}
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="b.json: not a template"):
        store.import_dir(tmp_path)


def test_a_translation_changed_is_a_new_version(store):
    """A template's texts in several languages (SPEC §17) are part of its body: the same
    body again is the same version, a translation changed or added is a new one, and
    each version keeps its own."""
    body = {"name": "claim", "title": {"en": "Expense claim", "zh-CN": "报销"},
            "circles": [{"uri": "ask", "box": {"confirm": {"en": "Pay?", "zh-CN": "付款？"}}}]}
    assert store.put_template(body) == (1, True)
    assert store.put_template(json.loads(json.dumps(body))) == (1, False)
    body["circles"][0]["box"]["confirm"]["zh-CN"] = "确认付款吗？"
    assert store.put_template(body) == (2, True)
    body["title"] = "Expense claim"  # the same English, the Chinese dropped
    assert store.put_template(body) == (3, True)
    first, second = store.template("claim", 1)[1], store.template("claim", 2)[1]
    assert first.flow.circles[0].box.confirm.translations["zh-CN"] == "付款？"
    assert second.flow.circles[0].box.confirm.translations["zh-CN"] == "确认付款吗？"
    assert first.title.translations["zh-CN"] == "报销"
    # what the inbox shows of a task: its template's title and its step, for a reader
    body = {"name": "words", "title": {"en": "Expense claim", "zh-CN": "报销"}, "circles": [
        {"uri": "ask", "description": {"en": "Finance checks", "zh-CN": "财务审核"}}]}
    store.put_template(body)
    assert circle_words(store, "words", 1, "ask", "zh-CN") == ("报销", "财务审核")
    assert circle_words(store, "words", 1, "ask", "fr") == ("Expense claim", "Finance checks")
    assert circle_words(store, "words", 1, "ask") == ("Expense claim", "Finance checks")
    assert type(store.template("claim", 3)[1].title) is str
