"""Pages drawn in the reader's language from their first paint (SPEC §17; docs/languages.md,
"Which language a page is in").

The production build prerenders every page's HTML once, with the state's defaults: in
English. A reader of another language saw English until the page had hydrated and the
backend's first answer had brought `LangState.lang` (on a phone, seconds of an English
sign-in form), and React then drew the whole page again. So, at each build:

- the page's initial `lang` (the frontend's compiled `initialState`) is read from the
  document's `<html lang>` (`initial_language`), which the server sets;
- every prerendered page is drawn again in each other language, by the same server
  bundle and runtime that prerendered it, into `_lang/<code>/` of the build
  (`draw_in_languages`, `prerender.mjs`); a page whose English drawing does not come
  out byte for byte as the build's is left without (it would not hydrate as drawn);
- the server answers a page in the language of the request (the `bpflow_lang` cookie,
  which the pages keep at their language, else `Accept-Language`):
  `asset_cache.pages_without_redirect`.

The HTML, the initial state and the backend's answer then agree: the page hydrates as it
was drawn, and the first answer's `lang` changes nothing. Served from elsewhere (without
the middleware), a page is in English until it hydrates, as before.

Nothing here imports Reflex at module level (rxconfig.py's plugin calls it while
building).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from bpflow import languages

VARIANTS = "_lang"  # the build's folder of the pages drawn in the other languages
COOKIE = "bpflow_lang"  # the page's language, kept by the pages for the server
SPA_FALLBACK = "__spa-fallback.html"  # the shell of a page with no HTML of its own
SCRIPT = Path(__file__).with_name("prerender.mjs")

log = logging.getLogger(__name__)

# `"lang_rx_state_": "en"` of LangState in the compiled initial state
_LANG_DEFAULT = re.compile(
    r'("[\w.]*bpflow_app___i18n____lang_state": \{[^{}]*"lang_rx_state_": )"en"')
# the language the document says, if it is one of ours (Node, drawing a page, sets
# `globalThis.__bpflowLang` instead: it has no document)
_FROM_DOCUMENT = ("((l) => {codes}.includes(l) ? l : {default})"
                  "(globalThis.document?.documentElement.lang || globalThis.__bpflowLang)")


def initial_language(context_js: str) -> str:
    """The compiled `utils/context.jsx` with LangState's initial `lang` taken from the
    document (a build modify task). Raises if the default is not where it is expected,
    so that a change of Reflex cannot leave the pages quietly in English."""
    expr = _FROM_DOCUMENT.format(codes=json.dumps(list(languages.LANGUAGES)),
                                 default=json.dumps(languages.DEFAULT))
    patched, n = _LANG_DEFAULT.subn(lambda m: m.group(1) + expr, context_js)
    if n != 1:
        raise RuntimeError("LangState's initial lang not found in the compiled context "
                           f"({n} matches): the pages could not start in their language")
    return patched


def prerendered(static_dir: Path) -> dict[str, str]:
    """The build's prerendered pages: the path each answers (`/`, `/inbox`, `spa` for the
    shell of pages without their own HTML) → its file, relative to `static_dir`."""
    pages: dict[str, str] = {}
    for page in sorted(static_dir.rglob("index.html")):
        rel = page.relative_to(static_dir)
        if rel.parts[0] in (VARIANTS, "assets"):
            continue
        pages["/" + "/".join(rel.parts[:-1])] = rel.as_posix()
    if (static_dir / SPA_FALLBACK).is_file():
        pages["spa"] = SPA_FALLBACK
    return pages


def draw_in_languages(static_dir: Path, web_dir: Path, runtime: list[str]) -> dict[str, list[str]]:
    """Draw every prerendered page of the build in each language but the default, into
    `static_dir/_lang/<code>/` (the same relative paths). `runtime`: the command that ran
    the build's prerendering (bun, or node). Returns, per language, the pages drawn.
    Raises if the runtime fails; a page whose English drawing differs from the build's is
    left out, with a warning."""
    static_dir, web_dir = static_dir.resolve(), web_dir.resolve()
    script = web_dir / SCRIPT.name
    shutil.copyfile(SCRIPT, script)  # in .web/, where the bundle's packages resolve
    env = {**os.environ, "IS_RR_BUILD_REQUEST": "yes"}  # React Router's own prerendering

    def draw(code: str, out: Path, pages: dict[str, str]) -> dict[str, list[str]]:
        run = subprocess.run([*runtime, script.name, code, str(static_dir), str(out),
                              json.dumps(pages)],
                             cwd=web_dir, env=env, capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            raise RuntimeError(f"drawing the pages in {code} failed:\n{run.stderr[-4000:]}")
        return json.loads(run.stdout.strip().splitlines()[-1])

    pages = prerendered(static_dir)
    same = set(draw(languages.DEFAULT, static_dir, pages)["same"])  # compared, not written
    for path in sorted(set(pages) - same):
        log.warning("the page %s drawn again differs from the build's: it is served in "
                    "English until it hydrates", path)
    kept = {path: file for path, file in pages.items() if path in same}
    return {code: sorted(draw(code, static_dir / VARIANTS / code, kept)["written"])
            for code in languages.LANGUAGES if code != languages.DEFAULT}


def runtime_of_build() -> list[str]:
    """The JavaScript runtime Reflex builds with (its package executor: bun, else npm's
    node)."""
    from reflex.utils import js_runtimes, path_ops

    executor = js_runtimes.get_js_package_executor(raise_on_none=True)[0]
    if Path(executor[0]).name.startswith("bun"):
        return [executor[0]]
    node = path_ops.get_node_path()
    if node is None:
        raise RuntimeError("no JavaScript runtime to draw the pages in each language")
    return [str(node)]
