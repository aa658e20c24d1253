"""Messages written for people, marked for the message catalogs (SPEC §17).

A message that says what went wrong is written `N_("no template '%(name)s'", name=name)`:
its text (the catalog's message id, extracted by `make messages`) and its values kept
apart, the gettext way. `N_` gives a `Text`: a `str` whose value is the English sentence
(what `str(exc)`, the logs and every caller that knows no language see), which also keeps
the message id and the values, so that the API and the web app can say it in their
reader's language (`bpflow.catalogs.say`). The catalogs themselves are read by
`bpflow.catalogs`; this module knows no language and imports nothing, so the engine, the
store and the services mark their messages alike.
"""

from __future__ import annotations

import re
from typing import Any

# a named placeholder: %(name)s or %(name)d
PLACEHOLDER = re.compile(r"%\((\w+)\)[sd]")


def fill(text: str, values: dict[str, Any]) -> str:
    """`%(name)s` placeholders replaced by their values (a missing one left as it is)."""
    return PLACEHOLDER.sub(
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
        text).replace("%%", "%")


class Text(str):
    """A message in English (the `str` itself) that keeps its catalog message id
    (`message`) and its values (`values`; a value may be a `Text` too)."""

    message: str
    values: dict[str, Any]

    def __new__(cls, message: str, values: dict[str, Any] | None = None) -> Text:
        values = values or {}
        # without values a message is not a format (gettext's rule): `%%` stays as it is
        text = super().__new__(cls, fill(message, values) if values else message)
        text.message, text.values = message, values
        return text


def N_(message: str, **values: Any) -> str:  # noqa: N802 (gettext's name)
    """Marks a message for the catalogs; `values` fill its `%(name)s` placeholders (in
    whichever language it is said). The `str` it gives is a `Text`."""
    return Text(message, values)


# The engine's words a message names as values (an instance's status, a circle's state, a
# move), marked so that the message is said in one language throughout: `word(status)`.
WORDS = {
    "running": N_("running"), "completed": N_("completed"), "failed": N_("failed"),
    "suspended": N_("suspended"), "terminated": N_("terminated"),
    "waiting": N_("waiting"), "success": N_("success"), "failure": N_("failure"),
    "skipped": N_("skipped"),
    "succeed": N_("succeed"), "fail": N_("fail"), "retry": N_("retry"), "skip": N_("skip"),
    "reset": N_("reset"), "suspend": N_("suspend"), "resume": N_("resume"),
    "abort": N_("abort"),
}


def word(name: str) -> str:
    """One of the engine's words (`WORDS`) as a marked message; any other as it is."""
    return WORDS.get(name, name)


def message_of(exc: BaseException) -> str:
    """An error's message as it was raised: marked (a `Text`, said in the reader's
    language where it is shown) or not, for a message that names it as a value."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)


def joined(parts: list[str]) -> str:
    """Messages one after the other, `"; "` between them, said in one language."""
    if not parts:
        return ""
    out = parts[0]
    for part in parts[1:]:
        out = N_("%(some)s; %(one)s", some=out, one=part)
    return out
