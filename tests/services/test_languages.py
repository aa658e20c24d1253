"""What a language code or an Accept-Language header stands for (SPEC §17)."""

from __future__ import annotations

import pytest

from bpflow.languages import DEFAULT, best, known


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
