"""The message catalogs (SPEC §17): gettext `.po` files under `bpflow_app/locale/`, one
folder per language (`en`, `zh_CN`: gettext's spelling of `zh-CN`), read with Babel when
this module is imported and compiled there, in memory, to the `.mo` form Python's
`gettext` reads. Nothing is built beforehand, so a catalog can never be older than its
`.po` (reading both takes a few milliseconds: docs/languages.md).

One set of catalogs holds the web app's texts and the services' messages (marked
`N_(...)` where they are raised, `engine.messages`): the API's error answers and the web
app's toasts say a service's refusal in the same words. The folder is the web app's (SPEC
§17 puts the catalogs there); the services read it by path and import nothing of the web
app.

`translate` is the one place a message becomes a text: its language's translation (else
the English), plural forms chosen by the language's own rule, `%(name)s` placeholders
filled. `say` says a marked message (`engine.messages.Text`) in a language, `explain` an
error of the services.
"""

from __future__ import annotations

import gettext
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from bpflow.languages import DEFAULT, LANGUAGES, known
from engine.messages import N_, PLACEHOLDER, Text, fill

__all__ = ["CATALOGS", "DOMAIN", "LOCALE_DIR", "PLACEHOLDER", "Language", "N_", "Text",
           "explain", "fill", "folder", "po_path", "say", "translate"]

LOCALE_DIR = Path(__file__).resolve().parent.parent / "bpflow_app" / "locale"
DOMAIN = "messages"


def folder(code: str) -> str:
    """The catalog folder of a language (`zh-CN` → `zh_CN`)."""
    return code.replace("-", "_")


def po_path(code: str) -> Path:
    return LOCALE_DIR / folder(code) / "LC_MESSAGES" / f"{DOMAIN}.po"


@dataclass(frozen=True)
class Language:
    code: str
    catalog: Catalog  # as read from the .po (fuzzy entries included, marked)
    translations: gettext.NullTranslations  # the compiled catalog (fuzzy entries left out)

    def forms(self, singular: str, plural: str | None = None) -> tuple[str, ...]:
        """A message's translated forms (one per plural form of the language), the English
        ones where it has no translation."""
        message = self.catalog.get(singular if plural is None else (singular, plural))
        english = (singular,) if plural is None else (singular, plural)
        if message is None or message.fuzzy:
            return english
        strings = tuple(message.string) if isinstance(message.string, (tuple, list)) \
            else (message.string,)
        return tuple(str(s) for s in strings) if all(strings) else english

    def plural_forms(self, singular: str, plural: str) -> tuple[tuple[str, ...], str]:
        """A plural message's forms and the rule choosing among them (a C expression of
        `n`, the form's index): the language's, or English's where it has no
        translation."""
        forms = self.forms(singular, plural)
        if forms == (singular, plural):
            return forms, CATALOGS[DEFAULT].catalog.plural_expr
        return forms, self.catalog.plural_expr


def _load(code: str) -> Language:
    with po_path(code).open("rb") as f:
        catalog = read_po(f)  # its header says the language and the plural rule
    compiled = io.BytesIO()
    write_mo(compiled, catalog, use_fuzzy=False)
    compiled.seek(0)
    translations: gettext.NullTranslations = gettext.GNUTranslations(compiled)
    if code == DEFAULT:  # English is the source: its catalog lists the messages
        translations = gettext.NullTranslations()
    return Language(code, catalog, translations)


CATALOGS: dict[str, Language] = {code: _load(code) for code in LANGUAGES}


def translate(lang: str, message: str, plural: str | None = None, n: int | None = None,
              **values: Any) -> str:
    """A message in a language (`zh-CN`; an unknown one means English): with `plural`,
    the form for `n` (also given to the text as `%(n)s`), and `values` filled in (those
    that are marked messages said in that language too)."""
    translations = CATALOGS[known(lang) or DEFAULT].translations
    values = {k: say(lang, v) if isinstance(v, Text) else v for k, v in values.items()}
    if plural is None:  # `n` without a plural is a value as any other (`%(n)s`)
        return fill(translations.gettext(message), values if n is None else {"n": n, **values})
    count = n or 0
    return fill(translations.ngettext(message, plural, count), {"n": count, **values})


def say(lang: str, text: str) -> str:
    """A message in a language: a marked one (`Text`) by its catalog entry, with its
    values; any other string as it is (it was never in a catalog)."""
    if not isinstance(text, Text):
        return text
    if not text.values:  # not a format: `%%` is two characters
        return CATALOGS[known(lang) or DEFAULT].translations.gettext(text.message)
    return translate(lang, text.message, **text.values)


def explain(exc: BaseException, lang: str) -> str:
    """What an error of the services says, in a language: its message, if it was marked
    (`N_`), in that language; else as it was written."""
    if len(exc.args) == 1 and isinstance(exc.args[0], Text):
        return say(lang, exc.args[0])
    return str(exc)
