"""The message catalogs (SPEC §17), the web app's texts and the services' messages:
complete in every language, up to date with the texts the code marks, and a text's
placeholders kept by its translation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from reflex.istate.data import RouterData

from bpflow.catalogs import explain, say
from bpflow.errors import Conflict, NotFound
from bpflow.forms import FormError, validate
from bpflow.languages import LANGUAGES
from bpflow_app.catalogs import CATALOGS, LOCALE_DIR, PLACEHOLDER, translate
from bpflow_app.i18n import _, ngettext
from bpflow_app.pages.guest_state import GuestState
from engine.definition import Field
from engine.messages import N_

REPO = Path(__file__).resolve().parents[2]
MESSAGES_FROM = ("bpflow_app", "bpflow", "engine")  # the Makefile's MESSAGES_FROM


def _entries(code: str) -> dict[object, object]:
    return {m.id: m for m in CATALOGS[code].catalog if m.id}


def _marked() -> set[object]:
    """The texts `make messages` extracts from the code (babel.cfg)."""
    with (REPO / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f)
    found = set()
    for folder in MESSAGES_FROM:
        for _file, _line, message, _comments, _context in extract_from_dir(
                REPO / folder, method_map, options_map):
            found.add(message if isinstance(message, str) else tuple(message[:2]))
    return found


def test_the_makefile_extracts_where_the_test_looks():
    assert f"MESSAGES_FROM := {' '.join(MESSAGES_FROM)}" in (REPO / "Makefile").read_text()
    assert LOCALE_DIR == REPO / "bpflow_app" / "locale"


def test_there_is_a_catalog_for_every_language():
    assert set(CATALOGS) == set(LANGUAGES)


@pytest.mark.parametrize("code", sorted(set(LANGUAGES) - {"en"}))
def test_every_entry_has_its_translation(code):
    missing = [m.id for m in _entries(code).values()
               if m.fuzzy or not all(m.string if isinstance(m.string, tuple) else
                                     (m.string,))]
    assert missing == [], f"untranslated in {code} (run `make messages`, then translate)"


@pytest.mark.parametrize("code", sorted(LANGUAGES))
def test_the_catalogs_hold_exactly_the_texts_the_code_marks(code):
    marked, listed = _marked(), set(_entries(code))
    assert marked - listed == set(), "texts not in the catalog: run `make messages`"
    assert listed - marked == set(), "entries no longer in the code: run `make messages`"


@pytest.mark.parametrize("code", sorted(set(LANGUAGES) - {"en"}))
def test_a_translation_keeps_the_placeholders_of_its_text(code):
    for mid, m in _entries(code).items():
        wanted = set(PLACEHOLDER.findall(mid if isinstance(mid, str) else mid[1]))
        for string in m.string if isinstance(m.string, tuple) else (m.string,):
            assert set(PLACEHOLDER.findall(string)) == wanted, (mid, string)


def test_a_text_is_filled_and_takes_the_plural_form_of_its_language():
    assert translate("zh-CN", "Open %(id)s", id="bob") == "打开 bob"
    assert translate("en", "Open %(id)s", id="bob") == "Open bob"
    assert translate("fr", "Sign in") == "Sign in"  # not ours: English
    assert translate("zh_CN", "Sign in") == "登录"
    one, many = ("You have sent several messages in a short time. Please try again in "
                 "%(n)s second.", "You have sent several messages in a short time. Please "
                 "try again in %(n)s seconds.")
    assert translate("en", one, many, 1).endswith("in 1 second.")
    assert translate("en", one, many, 30).endswith("in 30 seconds.")
    assert translate("zh-CN", one, many, 30) == "你在短时间内发送了多条留言，请 30 秒后再试。"
    assert translate("zh-CN", "Nothing %(n)s", "Nothings %(n)s", 2) == "Nothings 2"


def test_a_pages_text_holds_every_language_and_shows_the_readers():
    text = str(_("Sign in"))
    assert json.dumps("登录") in text and '"Sign in"' in text and ".lang_rx_state_" in text
    assert str(_("bpflow")) == '"bpflow"'  # the same in every language: no choice made
    counted = str(ngettext("%(n)s flow", "%(n)s flows", 3))  # untranslated: English's rule
    assert counted == '"3 flows"'


def test_a_services_message_is_said_in_the_language_of_the_api_and_the_pages():
    why = N_("it was already approved")
    refused = Conflict(N_("approval %(id)s refused: %(why)s", id=7, why=why))
    assert str(refused) == "approval 7 refused: it was already approved"  # logs, callers
    assert explain(refused, "en") == "approval 7 refused: it was already approved"
    assert explain(refused, "zh-CN") == "无法处理审批 7：该审批已同意"  # values said too
    assert explain(Conflict("never marked"), "zh-CN") == "never marked"
    assert say("zh-CN", N_("100%% sure")) == "100%% sure"  # no values: not a format
    assert say("zh-CN", "wrong username or password") == "wrong username or password"
    assert say("zh-CN", N_("wrong username or password")) == "用户名或密码错误"


def test_a_page_state_shows_a_refusal_in_the_sessions_language(make_state):
    state = make_state(GuestState)
    state.router = RouterData.from_router_data(
        {"pathname": "/", "asPath": "/", "ip": "10.0.0.1", "token": "client-1",
         "headers": {"origin": "http://test", "accept-language": "zh-CN"}})
    missing = NotFound(N_("no template '%(name)s'", name="leave"))
    assert state.explain(missing) == "模板“leave”不存在"
    with pytest.raises(FormError) as refused:
        validate((Field(name="amount", type="number", label="金额"),), {"amount": "lots"})
    assert {k: state.say(v) for k, v in refused.value.errors.items()} == {
        "amount": "金额必须是数字"}
    assert state.gettext(missing.args[0]) == "模板“leave”不存在"
    state.choose("en")
    assert state.explain(missing) == "no template 'leave'"


def test_a_number_named_n_fills_a_text_without_plural_forms():
    # `n` is also the plural count's name: without a plural it is a value as any other
    assert translate("zh-CN", "too many failed sign-ins; try again in %(n)s seconds",
                     n=5) == "登录失败次数过多，请 5 秒后再试"
    assert translate("en", "too many failed sign-ins; try again in %(n)s seconds",
                     n=5) == "too many failed sign-ins; try again in 5 seconds"
