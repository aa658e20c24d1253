"""`reflex.lock/` pins the frontend packages (committed, so every machine builds the same
frontend). Reflex rewrites its `package.json` at each start from the committed copy: that
copy must be what Reflex writes, or `make run` leaves `git status` dirty."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_JSON = ROOT / "reflex.lock" / "package.json"


def test_the_committed_package_json_is_what_reflex_writes_back(monkeypatch):
    from reflex.utils import frontend_skeleton

    monkeypatch.chdir(ROOT)  # Reflex reads reflex.lock/ under the working directory
    assert frontend_skeleton._compile_package_json() == PACKAGE_JSON.read_text(), (
        "reflex.lock/package.json differs from what Reflex writes at start: commit it as a"
        " start from a clean .web/ writes it (`make clean run`)")


def test_every_package_pinned_in_package_json_is_in_bun_lock():
    pinned = json.loads(PACKAGE_JSON.read_text())
    lock = (ROOT / "reflex.lock" / "bun.lock").read_text()
    for section in ("dependencies", "devDependencies"):
        for name, version in pinned[section].items():
            assert f'"{name}": "{version}"' in lock, (name, version)
