"""Times and numbers in the reader's locale (`components/when.py`): the head's script shows
them by CLDR's patterns and words (from Babel), as `Intl` shows them with the options the
pages used before (run in Node, whose `Intl` is the browser's), in the reader's zone, and
the page's expressions call it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import reflex as rx

from bpflow import languages
from bpflow_app.components.when import _parts, ago, clock, number, script
from bpflow_app.i18n import LangState

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="no node")
AT = "2026-11-27T16:20:00Z"
NOW = "2026-11-27T16:20:00.000Z"  # the page's clock in the relative times below
# times across a year: midnight and noon, both sides of the US and EU DST changes
TIMES = ["2026-01-01T00:00:00Z", "2026-03-08T06:59:00Z", "2026-03-08T07:01:00Z",
         "2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z", "2026-06-15T12:00:00Z",
         "2026-07-04T23:59:59Z", "2026-10-25T00:59:00Z", "2026-11-01T05:30:00Z",
         "2026-11-27T04:05:00Z", "2026-12-31T15:59:00Z", "1999-12-31T23:59:59Z", AT]
# seconds from now: each unit's edges, both ways, and CLDR's own words (now, yesterday...)
SECONDS = [0, -0.4, 0.4, -1, 1, -5, -59, -59.6, -61, -89, -90, 120, -3599, -3601, 3600 * 5,
           -86399, -86401, -86400 * 2, 86400 * 2, -86400 * 29, -86400 * 31, 86400 * 45,
           -86400 * 364, -86400 * 366, 86400 * 800, -86400 * 365 * 1500]
NUMBERS = [0, 1, 12, 999, 1000, 1234.5, 5000, 10000, 123456789, -42, -1234.56, 0.5,
           3.14159, 1e9, 2 ** 53, -0.0, -0.0004, 0.0004, 999.9996, 1e21, 1.5e21,
           1.2345678901234567e25, -3e22, float("nan"), float("inf"), float("-inf")]


def _node(program: str, tz: str = "Asia/Shanghai") -> dict:
    done = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TZ": tz}, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("tz", ["Asia/Shanghai", "America/New_York", "Europe/Berlin", "UTC"])
def test_the_script_shows_times_and_numbers_as_intl_does(tz) -> None:
    program = f"""
{script()}
const f = globalThis.__bpflowFormat, out = [];
const now = Date.parse("{NOW}");
Date.now = () => now;
const unit = (s) => {{ const a = Math.abs(s);
  return a < 60 ? [Math.round(s), 'second'] : a < 3600 ? [Math.round(s / 60), 'minute']
    : a < 86400 ? [Math.round(s / 3600), 'hour'] : a < 2592000 ? [Math.round(s / 86400), 'day']
    : a < 31536000 ? [Math.round(s / 2592000), 'month'] : [Math.round(s / 31536000), 'year']; }};
for (const lang of {json.dumps(list(languages.LANGUAGES))}) {{
  const dtf = new Intl.DateTimeFormat(lang, {{dateStyle: "medium", timeStyle: "short"}});
  const rtf = new Intl.RelativeTimeFormat(lang, {{numeric: "auto"}});
  const nf = new Intl.NumberFormat(lang);
  for (const iso of {json.dumps(TIMES)})
    out.push([lang, iso, f.clock(lang, iso), dtf.format(new Date(iso))]);
  for (const s of {json.dumps(SECONDS)}) {{
    const iso = new Date(now + s * 1000).toISOString();
    out.push([lang, s, f.ago(lang, iso), rtf.format(...unit(s))]);
  }}
  for (const n of {json.dumps(NUMBERS)}) out.push([lang, n, f.number(lang, n), nf.format(n)]);
}}
console.log(JSON.stringify(out));
"""
    rows = _node(program, tz)
    wrong = [row for row in rows if row[2] != row[3]]
    assert wrong == []
    assert len(rows) == len(languages.LANGUAGES) * (len(TIMES) + len(SECONDS) + len(NUMBERS))


def test_the_pages_expressions_call_it_in_the_readers_language() -> None:
    state, _sep, field = str(LangState.lang).rpartition(".")
    shown = {"clock": str(clock(AT)), "ago": str(ago(AT)), "number": str(number(1234.5)),
             "none": str(clock("")), "known": str(number(1234567)),
             "counted": str(number(rx.Var("7000.25", _var_type=float)))}
    program = f"""
const out = {{}};
const draw = (lang) => {{ const {state} = {{{field}: lang}};
  return {{clock: {shown["clock"]}, ago: {shown["ago"]}, number: {shown["number"]},
           none: {shown["none"]}, known: {shown["known"]}, counted: {shown["counted"]}}}; }};
out.before = draw("en");  // the build's prerendering: no script, no text
{script()}
Date.now = () => Date.parse("{NOW}") + 2 * 86400 * 1000;
for (const lang of {json.dumps(list(languages.LANGUAGES))}) out[lang] = draw(lang);
out.unknown = draw("fr");
console.log(JSON.stringify(out));
"""
    out = _node(program)
    # the build's prerendering: no script, no time; numbers known beforehand are written
    # out as the script writes them (no page drawn otherwise than it hydrates)
    assert out["before"] == {"clock": "", "ago": "", "number": "1,234.5", "none": "",
                             "known": "1,234,567", "counted": ""}
    assert out["en"] == {"clock": "Nov 28, 2026, 12:20 AM", "ago": "2 days ago",
                         "number": "1,234.5", "none": "", "known": "1,234,567",
                         "counted": "7,000.25"}
    assert out["zh-CN"] == {"clock": "2026年11月28日 00:20", "ago": "前天",
                            "number": "1,234.5", "none": "", "known": "1,234,567",
                         "counted": "7,000.25"}
    assert out["unknown"] == out["en"]  # a language without a table: the default's


def test_a_pattern_field_the_script_cannot_show_is_refused() -> None:
    assert _parts("y年M月d日 HH:mm") == [["y"], "年", ["M"], "月", ["d"], "日 ", ["HH"], ":",
                                        ["mm"]]
    assert _parts("h 'o''clock' a") == [["h"], " ", "o'clock", " ", ["a"]]
    assert _parts("H''mm") == [["H"], "'", ["mm"]]
    with pytest.raises(ValueError, match="EEEE"):
        _parts("EEEE, MMM d")
