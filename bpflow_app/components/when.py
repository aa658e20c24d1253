"""Times and numbers in the reader's locale and time zone (SPEC §17).

The server sends a time as ISO 8601 (UTC, with its offset); the browser shows it in the
page's language (`LangState.lang`) and the browser's own time zone: a date and time as
the locale's medium date with its short time (`Nov 27, 2026, 4:20 PM`, `2026年11月27日
16:20`), a relative time in CLDR's words (`3 minutes ago`, `yesterday`, `3分钟前`), a
number with the locale's grouping and decimal signs. The server never guesses a zone, and
nothing is computed per language on the server: a change of language redraws the times at
once, as every text. The exact time is the `<time>` element's `datetime` and its tooltip.

The patterns and words are CLDR's, taken from Babel's locale data when the app is
compiled (`_table`), and put in every page's head by `formats()` with the few lines that
apply them; a time's fields are the browser's `Date`'s, in its own zone. Not `Intl`:
Chromium sets ICU's data up at a page's first `Intl` formatter, 15-40 ms of a new tab's
main thread that the old pages never paid (bench/RESULTS.md); reading a `Date` in the
local zone costs nothing of the kind. `Intl` is the reference these are tested against
(tests/app/test_when.py, in Node, whose `Intl` is the browser's).
"""

from __future__ import annotations

import json
import re
from functools import cache

import reflex as rx
from babel import Locale
from babel.numbers import format_decimal
from babel.plural import to_javascript
from reflex.vars.base import VarData

from bpflow import languages
from bpflow.catalogs import folder
from bpflow_app.i18n import LangState, by_language

UNITS = ("second", "minute", "hour", "day", "month", "year")  # of a relative time
# the fields of a date or time pattern the page's script can show (CLDR's letters)
FIELDS = ("y", "M", "MM", "MMM", "d", "dd", "h", "hh", "H", "HH", "m", "mm", "a")
_PATTERN = re.compile(r"'((?:[^']|'')+)'|''|([A-Za-z])\2*|[^'A-Za-z]+")


def _js(expr: str, *vars_: rx.Var) -> rx.Var:
    return rx.Var(expr, _var_type=str,
                  _var_data=VarData.merge(*[v._get_all_var_data() for v in vars_]))


def _parts(pattern: str) -> list[str | list[str]]:
    """A CLDR date pattern as the script reads it: literal texts, and `[field]`s."""
    parts: list[str | list[str]] = []
    for m in _PATTERN.finditer(pattern):
        if m.group(2):
            field = m.group(0)
            if field not in FIELDS:
                raise ValueError(f"the pattern {pattern!r} has a field ({field}) the "
                                 "page's script does not show")
            parts.append([field])
        else:  # a quoted text, a quote (''), or text between fields
            text = m.group(1) if m.group(1) is not None else m.group(0)
            parts.append(text.replace("''", "'"))
    return parts


def _locale(code: str) -> Locale:
    """Babel's locale of one of our languages."""
    return Locale.parse(folder(code))


def _table(code: str) -> str:
    """What the page's script needs of one language, as JavaScript (an object): CLDR's
    patterns and words for it, from Babel's locale data."""
    locale = _locale(code)
    date = locale.date_formats["medium"].pattern
    # CLDR puts a narrow no-break space before AM/PM; browsers' ICU keeps a plain one (as
    # Chromium's and Node's Intl show it, for the pages written for it)
    time = locale.time_formats["short"].pattern.replace("\u202f", " ")
    both = locale.datetime_formats["medium"].replace("{1}", "\0D").replace("{0}", "\0T")
    clock: list[str | list[str]] = []
    for piece in re.split(r"(\0D|\0T)", both):
        clock += _parts(date) if piece == "\0D" else _parts(time) if piece == "\0T" \
            else _parts(piece) if piece else []
    decimal = locale.decimal_formats[None]
    if tuple(decimal.grouping) != (3, 3):
        raise ValueError(f"{code}: grouping {decimal.grouping} (the script groups by 3)")
    if locale.default_numbering_system != "latn":
        raise ValueError(f"{code}: digits of {locale.default_numbering_system} (the script "
                         "writes 0-9)")
    symbols = locale.number_symbols["latn"]
    fields = locale._data["date_fields"]
    relative = {unit: {"past": dict(fields[unit]["past"]), "future": dict(fields[unit]["future"]),
                       "words": {str(k): v for k, v in fields[unit].get("relative", {}).items()}}
                for unit in UNITS}
    periods = locale.day_periods["format"]["abbreviated"]
    data = {"clock": clock, "months": [locale.months["format"]["abbreviated"][m]
                                       for m in range(1, 13)],
            "am": periods["am"], "pm": periods["pm"], "relative": relative,
            "group": symbols["group"], "decimal": symbols["decimal"],
            "minus": symbols["minusSign"], "nan": symbols["nan"], "inf": symbols["infinity"]}
    return json.dumps(data, ensure_ascii=False)[:-1] + \
        f', "plural": {to_javascript(locale.plural_form)}}}'


# The page's formatting, given the tables: `globalThis.__bpflowFormat.clock(lang, iso)`,
# `.ago(lang, iso)`, `.number(lang, n)` (an unknown language: the default's).
_SCRIPT = """(() => {
const T = %(tables)s;
const pad = (n) => String(n).padStart(2, "0");
const hour12 = (d) => d.getHours() %% 12 || 12;
const F = {y: (d) => String(d.getFullYear()), M: (d) => String(d.getMonth() + 1),
  MM: (d) => pad(d.getMonth() + 1), MMM: (d, t) => t.months[d.getMonth()],
  d: (d) => String(d.getDate()), dd: (d) => pad(d.getDate()),
  h: (d) => String(hour12(d)), hh: (d) => pad(hour12(d)),
  H: (d) => String(d.getHours()), HH: (d) => pad(d.getHours()),
  m: (d) => String(d.getMinutes()), mm: (d) => pad(d.getMinutes()),
  a: (d, t) => (d.getHours() < 12 ? t.am : t.pm)};
const table = (lang) => T[lang] ?? T[%(default)s];
const digits = (a) => {  // a >= 0 in decimal digits, to 3 places: [integer, fraction]
  if (a < 1e21) { const [i, f] = a.toFixed(3).split("."); return [i, f.replace(/0+$/, "")]; }
  const [m, e] = String(a).split("e+"), [i, f = ""] = m.split(".");
  return [i + f + "0".repeat(Number(e) - f.length), ""];
};
const number = (t, n) => {
  const x = Number(n);
  if (Number.isNaN(x)) return t.nan;
  const sign = x < 0 || Object.is(x, -0) ? t.minus : "";
  if (!Number.isFinite(x)) return sign + t.inf;
  const [i, f] = digits(Math.abs(x));
  return sign + i.replace(/\\B(?=(\\d{3})+(?!\\d))/g, t.group) + (f ? t.decimal + f : "");
};
const UNITS = [[60, 1, "second"], [3600, 60, "minute"], [86400, 3600, "hour"],
  [2592000, 86400, "day"], [31536000, 2592000, "month"], [Infinity, 31536000, "year"]];
globalThis.__bpflowFormat = {
  clock: (lang, iso) => {
    const d = iso ? new Date(iso) : null;
    if (!d || Number.isNaN(d.getTime())) return "";
    const t = table(lang);
    return t.clock.map((p) => (typeof p === "string" ? p : F[p[0]](d, t))).join("");
  },
  ago: (lang, iso) => {
    const s = iso ? (new Date(iso) - Date.now()) / 1000 : NaN;
    if (Number.isNaN(s)) return "";
    const [, size, unit] = UNITS.find(([below]) => Math.abs(s) < below);
    const v = Math.round(s / size), t = table(lang), u = t.relative[unit];
    const word = u.words[String(v === 0 ? 0 : v)];
    if (word !== undefined) return word;
    const forms = v < 0 ? u.past : u.future, n = Math.abs(v);
    return (forms[t.plural(n)] ?? forms.other).replace("{0}", number(t, n));
  },
  number: (lang, n) => number(table(lang), n),
};
})();"""


@cache
def script() -> str:
    """The page's formatting (`_SCRIPT`) with every language's table."""
    tables = "{" + ", ".join(f"{json.dumps(code)}: {_table(code)}"
                             for code in languages.LANGUAGES) + "}"
    return _SCRIPT % {"tables": tables, "default": json.dumps(languages.DEFAULT)}


def formats() -> rx.Component:
    """The script for every page's head that defines how its times and numbers are shown
    (`clock`, `ago`, `number` call it): run as the document is read, before the page's
    own scripts."""
    return rx.el.script(script())


def _call(kind: str, value: rx.Var) -> rx.Var:
    """The page's `kind` formatting of `value` in the reader's language (nothing where the
    script is not: the build's prerendering, which draws no data)."""
    lang = LangState.lang
    return _js(f"(globalThis.__bpflowFormat?.{kind}({lang!s}, {value!s}) ?? '')", value, lang)


def clock(iso: rx.Var | str) -> rx.Var:
    """A time (`iso`, empty for none) as its reader reads a date and time: `2026年11月27日
    16:20`, `Nov 27, 2026, 4:20 PM`."""
    return _call("clock", rx.Var.create(iso))


def ago(iso: rx.Var | str) -> rx.Var:
    """How long ago (or how long until) a time is, in the reader's words: `3 minutes ago`,
    `in 2 hours`, `3分钟前`. Counted when the element is drawn."""
    return _call("ago", rx.Var.create(iso))


def number(n: rx.Var | int | float) -> rx.Var:
    """A number with the reader's grouping and decimal signs. A number known when the page
    is compiled is written out in each language (Babel's `format_decimal`, as the script
    writes it), so that the build's prerendered page shows it as the browser will."""
    if isinstance(n, int | float) and not isinstance(n, bool):
        return by_language({code: rx.Var.create(format_decimal(n, locale=_locale(code)))
                            for code in languages.LANGUAGES})
    return _call("number", rx.Var.create(n))


def when(iso: rx.Var | str, *, relative: bool = False, **props) -> rx.Component:
    """A `<time>` element showing `iso` (see `clock`, or `ago` when `relative`); its
    tooltip is the exact time in the reader's zone."""
    return rx.el.time(ago(iso) if relative else clock(iso),
                      date_time=iso, title=clock(iso) if relative else iso, **props)
