"""Pages drawn in each language at the build (bpflow_app/prerender.py): the compiled
initial state takes the document's language, and which pages the build prerendered.
(The drawing itself runs in every browser test session's build:
tests/browser/test_languages.py checks every page is sent in Chinese and hydrates.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bpflow_app.prerender import SPA_FALLBACK, VARIANTS, initial_language, prerendered

# as Reflex 0.10 compiles it (utils/context.jsx), shortened
CONTEXT = ('export const initialState = {"reflex___state____state": {"is_hydrated_rx_state_": '
           'false}, "reflex___state____state.bpflow_app___i18n____lang_state": '
           '{"choice_rx_state_": "", "lang_rx_state_": "en"}, '
           '"reflex___state____state.bpflow_app___i18n____lang_state.x": '
           '{"lang_rx_state_": "en"}}\n')


def _initial_lang(patched: str, document_lang: str | None, node_lang: str | None) -> str:
    """LangState's initial `lang` when the module is loaded in a document saying
    `document_lang` (or in Node, given `node_lang`)."""
    script = patched.replace("export const", "const") + (
        "console.log(initialState['reflex___state____state.bpflow_app___i18n____lang_state']"
        ".lang_rx_state_)")
    setup = ""
    if document_lang is not None:
        setup += f"globalThis.document = {{documentElement: {{lang: {document_lang!r}}}}};"
    if node_lang is not None:
        setup += f"globalThis.__bpflowLang = {node_lang!r};"
    run = subprocess.run(["node", "-e", setup + script], capture_output=True, text=True,
                         check=True)
    return run.stdout.strip()


def test_the_initial_language_is_the_documents():
    patched = initial_language(CONTEXT)
    # only LangState's own var; another state's `lang` stays
    assert patched.count('"lang_rx_state_": "en"') == 1
    assert _initial_lang(patched, "zh-CN", None) == "zh-CN"
    assert _initial_lang(patched, "en", None) == "en"
    assert _initial_lang(patched, "fr", None) == "en"  # not ours: the default
    assert _initial_lang(patched, "", None) == "en"
    assert _initial_lang(patched, None, "zh-CN") == "zh-CN"  # Node, drawing the pages
    assert _initial_lang(patched, None, None) == "en"  # Node, the build's own prerendering


def test_a_context_not_as_expected_stops_the_build():
    with pytest.raises(RuntimeError, match="initial lang not found"):
        initial_language(CONTEXT.replace('"lang_rx_state_": "en"', '"lang_rx_state_": "x"'))


def test_the_pages_the_build_prerendered(tmp_path: Path):
    for rel in ("index.html", "flows/index.html", "guest/index.html", "flows.html",
                "assets/x/index.html", f"{VARIANTS}/zh-CN/flows/index.html", SPA_FALLBACK):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("<html></html>")
    assert prerendered(tmp_path) == {"/": "index.html", "/flows": "flows/index.html",
                                     "/guest": "guest/index.html", "spa": SPA_FALLBACK}
