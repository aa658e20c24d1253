"""Texts in the reader's language (SPEC §17; the design: docs/languages.md).

A page's texts are written `_("Sign in")`, `_("Open %(id)s", id=...)` or
`ngettext("%(n)s flow", "%(n)s flows", count)`: each is a Var that holds the text in
every language, read from the catalogs when the page is compiled, and shows the one of
`LangState.lang`. Changing the language changes that one short var; the browser already
has every text, so the page is redrawn at once, and what was typed into it stays.

Handlers make texts (toasts, errors) with `self.gettext(...)`/`self.ngettext(...)`, in
the language of the session at that moment: every page state derives from `LangState`.
A service's refusal is shown with `self.explain(exc)` (its message, marked where it was
raised, from the same catalogs the API answers with), a message a service gave as a value
(a form's field errors) with `self.say(text)`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import reflex as rx
from reflex.vars.base import VarData

from bpflow import languages
from bpflow_app.catalogs import CATALOGS, PLACEHOLDER, Text, explain, say, translate
from bpflow_app.prerender import COOKIE

PLURAL_N = re.compile(r"\bn\b")  # the number in a plural rule


class LangState(rx.State):
    """The language of this browser's pages: the one chosen (kept with the account when
    someone is signed in, `SessionState`), else the browser's (`Accept-Language`), else
    English."""

    choice: str = rx.LocalStorage("", name="bpflow_lang", sync=True)

    @rx.var
    def lang(self) -> str:
        return self._language()

    def _language(self) -> str:
        """`lang` as of now (also within the handler that changed `choice`)."""
        return (languages.known(self.choice)
                or languages.best(self.router.headers.accept_language))

    @rx.event
    def choose(self, code: str):
        """The language menu of the pages without an account."""
        self._choose(code)

    def _choose(self, code: str) -> None:
        self.choice = languages.known(code) or languages.DEFAULT

    def gettext(self, message: str, **values: Any) -> str:
        if isinstance(message, Text) and not values:  # a service's message, its values kept
            return say(self._language(), message)
        return translate(self._language(), message, **values)

    def ngettext(self, singular: str, plural: str, n: int, **values: Any) -> str:
        return translate(self._language(), singular, plural, n, **values)

    def explain(self, exc: BaseException) -> str:
        """What an error of the services says, in this session's language: its message
        as the catalogs have it (as the API says it), or as it was written if it was
        never marked. For the toast of a refused move: `rx.toast.error(self.explain(exc))`."""
        return explain(exc, self._language())

    def say(self, text: str) -> str:
        """A message a service gave as a value (a `FormError`'s field errors, a reason) in
        this session's language; any other text as it is."""
        return say(self._language(), text)


def _filled(text: str, values: dict[str, Any]) -> rx.Var:
    """A translated text with its placeholders filled: literal values at once, Vars in
    the browser."""
    pieces: list[str] = []
    at = 0
    for m in PLACEHOLDER.finditer(text):
        pieces.append(text[at:m.start()].replace("%%", "%"))
        value = values.get(m.group(1), m.group(0))
        pieces.append(f"{value}")  # a Var formats as a reference the string Var expands
        at = m.end()
    pieces.append(text[at:].replace("%%", "%"))
    return rx.Var.create("".join(pieces))


def by_language(texts: dict[str, rx.Var]) -> rx.Var:
    """The Var showing `texts[LangState.lang]` (the default language's for any other)."""
    shown = texts[languages.DEFAULT]
    for code, text in texts.items():
        if code != languages.DEFAULT and str(text) != str(texts[languages.DEFAULT]):
            shown = rx.cond(LangState.lang == code, text, shown)
    return shown


def _(message: str, **values: Any) -> rx.Var:
    """A page's text in the reader's language, `%(name)s` filled from `values` (plain
    values or Vars)."""
    return by_language({code: _filled(lang.forms(message)[0], values)
                         for code, lang in CATALOGS.items()})


def _plural_index(expr: str, n: rx.Var) -> rx.Var:
    """A language's plural rule (a C expression of `n`, which JavaScript reads alike) as a
    Var of the form's index for `n`."""
    js = PLURAL_N.sub(f"({n!s})", expr)
    return rx.Var(f"Number({js})", _var_type=int,
                  _var_data=VarData.merge(n._get_all_var_data()))


def ngettext(singular: str, plural: str, n: int | rx.Var, **values: Any) -> rx.Var:
    """A page's text whose form depends on a number `n` (`%(n)s` in the text), in the
    reader's language."""
    if not isinstance(n, rx.Var):
        return by_language({code: rx.Var.create(translate(code, singular, plural, n,
                                                            **values))
                             for code in CATALOGS})
    texts: dict[str, rx.Var] = {}
    for code, lang in CATALOGS.items():
        strings, rule = lang.plural_forms(singular, plural)
        forms = [_filled(f, {"n": n, **values}) for f in strings]
        if len(forms) == 1:
            texts[code] = forms[0]
        else:
            index = _plural_index(rule, n)
            texts[code] = rx.match(index, *[(i, f) for i, f in enumerate(forms[:-1])],
                                   forms[-1])
    return by_language(texts)


def _pieces(text: str, parts: dict[str, Callable[[], rx.Component]]) -> rx.Component:
    """`text` with each `%(name)s` replaced by the component `parts[name]()` makes."""
    out: list[Any] = []
    at = 0
    for m in PLACEHOLDER.finditer(text):
        out.append(text[at:m.start()].replace("%%", "%"))
        out.append(parts[m.group(1)]())
        at = m.end()
    out.append(text[at:].replace("%%", "%"))
    return rx.fragment(*[p for p in out if not isinstance(p, str) or p])


def rich(message: str, **parts: Callable[[], rx.Component]) -> rx.Component:
    """A page's text with components in it (`%(name)s` → `parts["name"]()`, made anew for
    each language, whose word order may differ), in the reader's language."""
    def pieces(text: str) -> rx.Component:
        return _pieces(text, parts)

    texts = {code: lang.forms(message)[0] for code, lang in CATALOGS.items()}
    shown = pieces(texts[languages.DEFAULT])
    for code, text in texts.items():
        if code != languages.DEFAULT and text != texts[languages.DEFAULT]:
            shown = rx.cond(LangState.lang == code, pieces(text), shown)
    return shown


class DocumentLang(rx.Fragment):
    """Keeps `<html lang>` at the page's language, and the `bpflow_lang` cookie with it,
    by which the server picks the language of the next page it sends
    (bpflow_app/prerender.py). A year; `SameSite=Lax`; read by the server only to choose
    among the pages it has drawn."""

    def add_hooks(self) -> list[str | rx.Var]:
        lang = LangState.lang
        js = str(lang)
        cookie = f"; path=/; max-age={365 * 24 * 3600}; samesite=lax"
        return [rx.Var(
            f"useEffect(() => {{ document.documentElement.lang = {js}; "
            f"document.cookie = {json.dumps(COOKIE + '=')} + {js} + {json.dumps(cookie)}; "
            f"}}, [{js}])",
            _var_data=VarData.merge(lang._get_all_var_data(),
                                    VarData(imports={"react": ["useEffect"]})))]


def document_lang() -> rx.Component:
    return DocumentLang.create()


def rich_plural(singular: str, plural: str, n: rx.Var,
                **parts: Callable[[], rx.Component]) -> rx.Component:
    """`rich` for a text whose form depends on the number `n` (`%(n)s` in it, shown as
    it is given in `parts["n"]`, else as a number)."""
    parts = {"n": lambda: rx.fragment(n), **parts}

    def pieces(text: str) -> rx.Component:
        return _pieces(text, parts)

    shown: dict[str, rx.Component] = {}
    for code, lang in CATALOGS.items():
        strings, rule = lang.plural_forms(singular, plural)
        forms = [pieces(f) for f in strings]
        shown[code] = forms[0] if len(forms) == 1 else rx.match(
            _plural_index(rule, n), *[(i, f) for i, f in enumerate(forms[:-1])], forms[-1])
    out = shown[languages.DEFAULT]
    for code, form in shown.items():
        if code != languages.DEFAULT:
            out = rx.cond(LangState.lang == code, form, out)
    return out


class Rich:
    """`Rich.ngettext(singular, plural, n, **parts)`: `rich_plural` under gettext's name,
    so that the extraction of `make messages` finds its texts."""

    ngettext = staticmethod(rich_plural)
