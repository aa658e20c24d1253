"""Times and numbers in the reader's locale (`components/when.py`): the formatters the
head's script makes while the page loads are the ones the page's times then use, and they
format as `Intl` does with the page's options (run in Node, whose `Intl` is the browser's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from bpflow import languages
from bpflow_app.components.when import FORMATTERS, ago, clock, number, warm_up
from bpflow_app.i18n import LangState

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="no node")
AT = "2026-11-27T16:20:00Z"


def _node(program: str) -> dict:
    done = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TZ": "Asia/Shanghai"}, check=True)
    return json.loads(done.stdout)


def test_the_head_script_makes_the_formatters_the_page_uses() -> None:
    script = warm_up().children[0].contents._var_value  # the script's text
    state, _sep, field = str(LangState.lang).rpartition(".")
    shown = {"clock": str(clock(AT)), "ago": str(ago(AT)), "number": str(number(1234.5))}
    program = f"""
{script}
const kinds = {json.dumps(list(FORMATTERS))};
setTimeout(() => {{
  const made = Object.fromEntries(kinds.map((k) => [k, new Map(globalThis["__bpflow" + k])]));
  const out = {{made: Object.fromEntries(kinds.map((k) => [k, [...made[k].keys()]])), shown: {{}}}};
  for (const lang of {json.dumps(list(languages.LANGUAGES))}) {{
    const {state} = {{{field}: lang}};
    out.shown[lang] = {{clock: {shown["clock"]}, ago: {shown["ago"]}, number: {shown["number"]},
      intl: new Intl.DateTimeFormat(lang, {{dateStyle: "medium", timeStyle: "short"}})
        .format(new Date("{AT}"))}};
  }}
  // the page's times took the formatters made ahead: none was made again
  out.same = kinds.every((k) => [...made[k]].every(
    ([lang, made]) => globalThis["__bpflow" + k].get(lang) === made));
  console.log(JSON.stringify(out));
}});
"""
    out = _node(program)
    for kind in FORMATTERS:
        assert out["made"][kind] == list(languages.LANGUAGES)
    assert out["same"] is True
    for got in out["shown"].values():
        assert got["clock"] == got["intl"]  # the page's options, in the reader's zone
        assert got["ago"]  # "2 days ago", "前天": as far from today
    assert out["shown"]["en"]["clock"] == "Nov 28, 2026, 12:20 AM"
    assert out["shown"]["zh-CN"]["clock"] == "2026年11月28日 00:20"
    assert out["shown"]["en"]["number"] == "1,234.5"
