"""Times and numbers in the reader's locale and time zone (SPEC §17).

The server sends a time as ISO 8601 (UTC, with its offset); the browser shows it in the
page's language (`LangState.lang`) and the browser's own time zone with
`Intl.DateTimeFormat`, and a relative time ("3 minutes ago", "3分钟前") with
`Intl.RelativeTimeFormat`. The server never guesses a zone, and nothing is computed per
language on the server: a change of language redraws the times at once, as every text.
The exact time is the `<time>` element's `datetime` and its tooltip.

A page's first `Intl` formatter costs 15-40 ms in Chromium (its ICU data is set up then):
`warm_up` makes the page's formatters in a task of its own as soon as the document is
read, while the page's scripts are still coming, so that drawing the first list of times
after the server's answer does not pay for it (on the browser's idle callback they were
made after the hydration's request, sometimes after the answer: bench/RESULTS.md).
"""

from __future__ import annotations

import json

import reflex as rx
from reflex.vars.base import VarData

from bpflow import languages
from bpflow_app.i18n import LangState


def _js(expr: str, *vars_: rx.Var) -> rx.Var:
    return rx.Var(expr, _var_type=str,
                  _var_data=VarData.merge(*[v._get_all_var_data() for v in vars_]))


# the formatters a page makes: Intl's kind -> its options
FORMATTERS = {"DateTimeFormat": "{dateStyle: 'medium', timeStyle: 'short'}",
              "RelativeTimeFormat": "{numeric: 'auto'}", "NumberFormat": "{}"}


def _formatter(kind: str, lang: rx.Var | str) -> str:
    """JavaScript giving the page's one `Intl.<kind>` of the language (`FORMATTERS`): a
    formatter is made once per language (making one takes longer than formatting many
    values; a list of 25 mails made 50 each time it was drawn) and kept on the page."""
    made = f"new Intl.{kind}({lang!s}, {FORMATTERS[kind]})"
    return (f"((m, k) => m.get(k) ?? m.set(k, {made}).get(k))"
            f"(globalThis.__bpflow{kind} ??= new Map(), {lang!s})")


def warm_up() -> rx.Component:
    """A script for the page's head: in a task of its own once the document is read, the
    formatters of `FORMATTERS` in every language are made and kept where `clock`, `ago`
    and `number` find them (the first is what costs)."""
    made = "; ".join(_formatter(kind, "lang") for kind in FORMATTERS)
    codes = json.dumps(list(languages.LANGUAGES))
    return rx.el.script(  # in the document's head: run as the page is read
        f"(() => {{ const warm = () => {{ for (const lang of {codes}) {{ try {{ {made}; }}"
        " catch (e) {} } }; setTimeout(warm); })();")


def clock(iso: rx.Var | str) -> rx.Var:
    """A time (`iso`, empty for none) as its reader reads a date and time: `2026年11月27日
    16:20`, `Nov 27, 2026, 4:20 PM`."""
    iso = rx.Var.create(iso)
    lang = LangState.lang
    return _js(f"(({iso!s}) ? {_formatter('DateTimeFormat', lang)}"
               f".format(new Date({iso!s})) : '')", iso, lang)


def ago(iso: rx.Var | str) -> rx.Var:
    """How long ago (or how long until) a time is, in the reader's words: `3 minutes ago`,
    `in 2 hours`, `3分钟前`. Counted when the element is drawn."""
    iso = rx.Var.create(iso)
    lang = LangState.lang
    return _js(
        f"(({iso!s}) ? ((s) => {{ const f = {_formatter('RelativeTimeFormat', lang)};"
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
    return _js(f"{_formatter('NumberFormat', lang)}.format(Number({n!s}))", n, lang)


def when(iso: rx.Var | str, *, relative: bool = False, **props) -> rx.Component:
    """A `<time>` element showing `iso` (see `clock`, or `ago` when `relative`); its
    tooltip is the exact time in the reader's zone."""
    return rx.el.time(ago(iso) if relative else clock(iso),
                      date_time=iso, title=clock(iso) if relative else iso, **props)
