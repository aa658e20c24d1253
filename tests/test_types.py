"""The tree type-checks: mypy (`[tool.mypy]` of pyproject.toml, also run by `make lint`)
finds nothing in `engine` and `bpflow`, and does find a part of the store calling one of
its siblings wrongly (which `parts.StoreParts` declares for it).

Both runs share mypy's incremental cache (`.mypy_cache`, as `make lint`): the clean run,
done once for the module (about a minute on a fresh checkout), fills it, so the second
checks one changed module (tests/conftest.py keeps this module's tests in one worker)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MYPY = Path(sys.executable).with_name("mypy")
TREE = ("engine", "bpflow")


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """mypy on the tree at ROOT (its packages, not an installed copy)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(MYPY), "--cache-dir", str(ROOT / ".mypy_cache"),
                           "--no-error-summary", *args, *TREE],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def clean_run() -> subprocess.CompletedProcess[str]:
    return mypy()


def test_engine_and_bpflow_type_check_clean(clean_run):
    assert clean_run.returncode == 0, clean_run.stdout + clean_run.stderr
    assert clean_run.stdout == ""


def test_a_part_calling_a_sibling_wrongly_is_found(clean_run, tmp_path):
    source = ROOT / "bpflow/store/tenants.py"
    text = source.read_text()
    right = "self._template_row(name)"
    assert right in text
    shadow = tmp_path / "tenants.py"
    # a version is a number: a body changed alone, so the cache keeps every other module
    shadow.write_text(text.replace(right, 'self._template_row(name, "1")'))

    run = mypy("--shadow-file", str(source), str(shadow))

    assert run.returncode == 1
    assert "bpflow/store/tenants.py" in run.stdout
    assert '"_template_row" of "StoreParts"' in run.stdout
    assert "[arg-type]" in run.stdout
