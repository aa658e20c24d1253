"""A template's texts for people, given once or in several languages (SPEC §17).

`title`, `description` (the template's and a circle's), a form field's `label`,
`placeholder` and `help`, an option's `label`, `confirm`, and the `subject` and `body` of
an approval or a mail are each a string or a map of language code to text
(`{"en": "Expense claim", "zh-CN": "报销"}`). The analysis checks a map here
(`problems`); the model keeps it as a `Text`: a string, the text of the default
language (`en`, else the first given), which carries every translation, so code that
shows a string shows English and code that knows its reader picks theirs
(`bpflow.languages.pick`).

The codes are those of `bpflow.languages.LANGUAGES` (the engine imports nothing of
bpflow; tests/engine/test_texts.py holds the two equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.messages import N_

CODES = ("en", "zh-CN")  # the languages a template may give its texts in
DEFAULT = "en"


class Text(str):
    """A text in several languages: as a string, the default language's text (`en`,
    else the first given); `translations` maps each language code given to its text.
    Equal to the string it reads as: a translation is not part of a circle's identity
    (the template's body, and so its version, is)."""

    translations: dict[str, str]

    def __new__(cls, translations: Mapping[str, str]) -> Text:
        given = dict(translations)
        shown = given[DEFAULT] if DEFAULT in given else next(iter(given.values()), "")
        self = super().__new__(cls, shown)
        self.translations = given
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Text, (self.translations,))

    def __repr__(self) -> str:
        return f"Text({self.translations!r})"


def make(value: Any) -> Any:
    """The model's value of a (checked) text: a map becomes a `Text`, anything else is
    kept as it is."""
    if isinstance(value, Mapping) and not isinstance(value, Text):
        return Text({str(k): str(v) for k, v in value.items()})
    return value


def translations(value: Any) -> dict[str, str] | None:
    """The translations of a text given as a map or a `Text`; None for a plain string."""
    if isinstance(value, Text):
        return value.translations
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    return None


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _spelled(code: str) -> str | None:
    """Ours, when `code` is one of our codes spelled otherwise (`zh_CN`, `EN`)."""
    key = code.replace("_", "-").lower()
    return next((ours for ours in CODES if ours.lower() == key), None)


def problems(value: Any, what: str, max_length: int | None = None) -> list[tuple[str, str]]:
    """What is wrong with a text (`what` names it in the messages), as (pointer below
    the text, message) pairs; none for a good one."""
    if isinstance(value, str):
        if max_length is not None and len(value) > max_length:
            return [("", N_("%(what)s is longer than %(most)s characters", what=what,
                           most=max_length))]
        return []
    if not isinstance(value, dict):
        return [("", N_("%(what)s must be a string or a map of language to text"
                        " (%(example)s)", what=what, example='{"en": "...", "zh-CN": "..."}'))]
    if not value:
        return [("", N_("%(what)s gives no language: write a string, or a map of language to"
                        " text (one of %(codes)s)", what=what, codes=", ".join(CODES)))]
    found: list[tuple[str, str]] = []
    for code, text in value.items():
        at = f"/{_escape(str(code))}"
        if code not in CODES:
            spelled = _spelled(str(code))
            found.append((at, N_("%(what)s: '%(code)s' is not a language bpflow speaks; write"
                                 " '%(spelled)s'", what=what, code=code, spelled=spelled)
                          if spelled else
                          N_("%(what)s: '%(code)s' is not a language bpflow speaks (the"
                             " languages are %(codes)s)", what=what, code=code,
                             codes=", ".join(CODES))))
        elif not isinstance(text, str):
            kind = "null" if text is None else type(text).__name__
            kind = {"dict": N_("an object"), "list": N_("a list"), "bool": N_("a boolean"),
                    "int": N_("a number"), "float": N_("a number")}.get(kind, kind)
            found.append((at, N_("%(what)s: the %(code)s text must be a string, not %(kind)s",
                                 what=what, code=code, kind=kind)))
        elif max_length is not None and len(text) > max_length:
            found.append((at, N_("%(what)s: the %(code)s text is longer than %(most)s"
                                 " characters", what=what, code=code, most=max_length)))
    return found


def lacks_default(value: Any) -> bool:
    """Whether a text is a map of translations without the default language (`en`):
    readers of a language it lacks then get the first one given."""
    return isinstance(value, dict) and bool(value) and DEFAULT not in value
