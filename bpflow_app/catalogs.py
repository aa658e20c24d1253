"""The message catalogs of the web app (SPEC §17): gettext `.po` files under `locale/`,
one folder per language (`en`, `zh_CN`: gettext's spelling of `zh-CN`), read with Babel
when this module is imported and compiled there, in memory, to the `.mo` form Python's
`gettext` reads. Nothing is built beforehand, so a catalog can never be older than its
`.po` (reading both takes a few milliseconds: docs/languages.md).

`translate` is the one place a message becomes a text: its language's translation (else
the English), plural forms chosen by the language's own rule, `%(name)s` placeholders
filled. The pages' texts (`bpflow_app/i18n.py`) are made from the same catalogs.
"""

from __future__ import annotations

import gettext
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from bpflow.languages import DEFAULT, LANGUAGES, known

LOCALE_DIR = Path(__file__).parent / "locale"
DOMAIN = "messages"
# a named placeholder: %(name)s or %(name)d
PLACEHOLDER = re.compile(r"%\((\w+)\)[sd]")


def N_(message: str) -> str:  # noqa: N802 (gettext's name)
    """Marks a message written where no language is known yet (a constant), for the
    catalogs; it is translated where it is shown."""
    return message


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
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        return strings if all(strings) else english

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


def fill(text: str, values: dict[str, Any]) -> str:
    """`%(name)s` placeholders replaced by their values (a missing one left as it is)."""
    return PLACEHOLDER.sub(
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
        text).replace("%%", "%")


def translate(lang: str, message: str, plural: str | None = None, n: int | None = None,
              **values: Any) -> str:
    """A message in a language (`zh-CN`; an unknown one means English): with `plural`,
    the form for `n` (also given to the text as `%(n)s`), and `values` filled in."""
    translations = CATALOGS[known(lang) or DEFAULT].translations
    if plural is None:
        return fill(translations.gettext(message), values)
    count = n or 0
    return fill(translations.ngettext(message, plural, count), {"n": count, **values})
