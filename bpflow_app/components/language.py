"""The language menu of the header (signed in) and of the pages without an account; each
language named in itself, whatever the page's language."""

from __future__ import annotations

from typing import Any

import reflex as rx

from bpflow.languages import DEFAULT, LANGUAGES
from bpflow_app.i18n import LangState, _, document_lang


def language_menu(choose: Any) -> rx.Component:
    """`choose`: the handler given the chosen code (`LangState.choose`, or
    `SessionState.choose_language`, which keeps it with the account). Also keeps
    `<html lang>` at the page's language."""
    current = rx.match(LangState.lang, *LANGUAGES.items(), LANGUAGES[DEFAULT])
    return rx.fragment(
        document_lang(),
        rx.menu.root(
            rx.menu.trigger(rx.button(rx.icon("languages", size=16), current, variant="ghost",
                                      size="2", color_scheme="gray", id="lang-menu",
                                      aria_label=_("Language: %(name)s", name=current))),
            rx.menu.content(*[
                rx.menu.item(name, on_click=choose(code), id=f"lang-{code}",
                             custom_attrs={"lang": code})
                for code, name in LANGUAGES.items()]),
        ),
    )
