"""The languages bpflow speaks (SPEC §17), named by their BCP 47 codes (`en`, `zh-CN`):
which there are, what a code someone gives or a browser sends stands for, which one
an `Accept-Language` header asks for, and which of a template's translated texts a
reader sees (`pick`). The web app's catalogs (`bpflow_app/locale/`), the templates' texts
(`engine.texts`, whose codes are these) and, later, the API's messages speak these;
nothing else decides what a language code means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.texts import translations

DEFAULT = "en"
# code -> the language's name in itself (what a language menu shows, whatever the page's
# language is)
LANGUAGES: dict[str, str] = {"en": "English", "zh-CN": "中文"}
# other spellings of a language that stand for one of ours (lowercased, `_` as `-`)
_ALIASES = {"zh": "zh-CN", "zh-hans": "zh-CN", "zh-hans-cn": "zh-CN", "zh-sg": "zh-CN",
            "zh-hans-sg": "zh-CN"}


def known(code: str | None) -> str | None:
    """The language of ours a code stands for (`zh_CN`, `zh-cn`, `zh-Hans` → `zh-CN`;
    `en-GB` → `en`), or None."""
    if not code:
        return None
    key = code.strip().replace("_", "-").lower()
    for ours in LANGUAGES:
        if key == ours.lower():
            return ours
    if key in _ALIASES:
        return _ALIASES[key]
    base = key.split("-")[0]
    return base if base in LANGUAGES else None


def best(accept_language: str | None) -> str:
    """The language an `Accept-Language` header asks for most among ours (its quality
    values honoured, order breaking ties), else `DEFAULT`."""
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate((accept_language or "").split(",")):
        tag, _sep, params = part.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            name, _eq, value = param.strip().partition("=")
            if name == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        ours = known(tag)
        if ours is not None and quality > 0:
            ranked.append((-quality, i, ours))
    return min(ranked)[2] if ranked else DEFAULT


def pick(text: Any, lang: str | None) -> str:
    """The reader's text of a template's text (SPEC §17): a string passes through; a
    text in several languages (`{"en": ..., "zh-CN": ...}`, or the model's
    `engine.texts.Text`) gives the one of `lang` (any spelling `known` reads), else
    English, else the first one given. None gives "". Substitute `${...}` after
    picking (`Engine.render(inst, cid, pick(box.confirm, lang))`)."""
    given = translations(text)
    if given is None:
        return "" if text is None else text if isinstance(text, str) else str(text)
    for code in (known(lang), DEFAULT):
        if code is not None and isinstance(given.get(code), str):
            return str(given[code])
    return next((str(t) for t in given.values() if isinstance(t, str)), "")


def picker(lang: str | None) -> Callable[[Any], str]:
    """`pick` for one reader: `show = picker(lang); show(t.title)`."""
    return lambda text: pick(text, lang)

