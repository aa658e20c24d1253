"""`bpflow validate` on input beyond the limits (issue #12, SPEC §13): a clear `too_large`
message and the exit code of an invalid template, never a traceback. (It sits with the
analysis tests it belongs to; tests/test_cli.py holds the command's other cases.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bpflow.cli import EXIT_INVALID, main


@pytest.mark.parametrize(("text", "says"), [
    ('{"name": "x", "circles": [{"uri": "a", "retry": [' + "9" * 100_000 + "]}]}",
     "number too large to be read (more than"),
    ("[" * 10_000 + "]" * 10_000, "nested too deeply"),
    ('{"name": "x", "circles": [{"uri": "a", "description": ' + "[" * 500 + "]" * 500 + "}]}",
     "nested more than 200 levels"),
    ('{"name": "x", "circles": [{"uri": "a", "retry": [' + "9" * 30 + "]}]}",
     "integers must fit in 64 bits"),
])
def test_too_large_input_is_a_clear_message_and_exit_1(tmp_path: Path, capsys, text, says):
    path = tmp_path / "t.json"
    path.write_text(text)
    assert main(["validate", str(path)]) == EXIT_INVALID
    out = capsys.readouterr()
    assert "too_large" in out.out and says in out.out
    assert "Traceback" not in out.out + out.err
    assert main(["validate", str(path), "--json"]) == EXIT_INVALID
    result = json.loads(capsys.readouterr().out)
    assert result["valid"] is False and result["errors"][0]["code"] == "too_large"
