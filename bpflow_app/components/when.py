"""Times and numbers in the reader's locale and time zone (SPEC §17).

The server sends a time as ISO 8601 (UTC, with its offset); the browser shows it in the
page's language (`LangState.lang`) and the browser's own time zone with
`Intl.DateTimeFormat`, and a relative time ("3 minutes ago", "3分钟前") with
`Intl.RelativeTimeFormat`. The server never guesses a zone, and nothing is computed per
language on the server: a change of language redraws the times at once, as every text.
The exact time is the `<time>` element's `datetime` and its tooltip.
"""

from __future__ import annotations

import reflex as rx
from reflex.vars.base import VarData

from bpflow_app.i18n import LangState


def _js(expr: str, *vars_: rx.Var) -> rx.Var:
    return rx.Var(expr, _var_type=str,
                  _var_data=VarData.merge(*[v._get_all_var_data() for v in vars_]))


DATE_TIME = "{dateStyle: 'medium', timeStyle: 'short'}"
AUTO = "{numeric: 'auto'}"


def _formatter(kind: str, lang: rx.Var, options: str) -> str:
    """JavaScript giving the page's one `Intl.<kind>` of the language and options: a
    formatter is made once per language (making one takes longer than formatting many
    values; a list of 25 mails made 50 each time it was drawn) and kept on the page."""
    return (f"((m, k) => m.get(k) ?? m.set(k, new Intl.{kind}({lang!s}, {options})).get(k))"
            f"(globalThis.__bpflow{kind} ??= new Map(), {lang!s})")


def clock(iso: rx.Var | str) -> rx.Var:
    """A time (`iso`, empty for none) as its reader reads a date and time: `2026年11月27日
    16:20`, `Nov 27, 2026, 4:20 PM`."""
    iso = rx.Var.create(iso)
    lang = LangState.lang
    return _js(f"(({iso!s}) ? {_formatter('DateTimeFormat', lang, DATE_TIME)}"
               f".format(new Date({iso!s})) : '')", iso, lang)


def ago(iso: rx.Var | str) -> rx.Var:
    """How long ago (or how long until) a time is, in the reader's words: `3 minutes ago`,
    `in 2 hours`, `3分钟前`. Counted when the element is drawn."""
    iso = rx.Var.create(iso)
    lang = LangState.lang
    return _js(
        f"(({iso!s}) ? ((s) => {{ const f = {_formatter('RelativeTimeFormat', lang, AUTO)};"
        " const a = Math.abs(s);"
        " return a < 60 ? f.format(Math.round(s), 'second')"
        " : a < 3600 ? f.format(Math.round(s / 60), 'minute')"
        " : a < 86400 ? f.format(Math.round(s / 3600), 'hour')"
        " : a < 2592000 ? f.format(Math.round(s / 86400), 'day')"
        " : a < 31536000 ? f.format(Math.round(s / 2592000), 'month')"
        " : f.format(Math.round(s / 31536000), 'year'); })"
        f"((new Date({iso!s}) - Date.now()) / 1000) : '')", iso, lang)


def number(n: rx.Var | int | float) -> rx.Var:
    """A number with the reader's grouping and decimal signs."""
    n = rx.Var.create(n)
    lang = LangState.lang
    return _js(f"{_formatter('NumberFormat', lang, '{}')}.format(Number({n!s}))", n, lang)


def when(iso: rx.Var | str, *, relative: bool = False, **props) -> rx.Component:
    """A `<time>` element showing `iso` (see `clock`, or `ago` when `relative`); its
    tooltip is the exact time in the reader's zone."""
    return rx.el.time(ago(iso) if relative else clock(iso),
                      date_time=iso, title=clock(iso) if relative else iso, **props)
