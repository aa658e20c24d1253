"""The rooms of docs/architecture.md hold: the layer contracts of pyproject.toml
(`[tool.importlinter]`, also run by `make lint`) are kept by the tree, and broken as soon as
a store module imports a service or a service imports a module of the store other than
its public ones."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")
ROOMS = ("engine", "bpflow", "bpflow_app")


def lint(where: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the tree at `where` (its packages, not an installed copy)."""
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run([str(LINT), "--no-cache", "--no-logo"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_tree_keeps_its_layer_contracts():
    run = lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_a_store_module_importing_a_service_breaks_the_contracts(tmp_path):
    for room in ROOMS:
        shutil.copytree(ROOT / room, tmp_path / room,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with open(tmp_path / "bpflow/store/tenants.py", "a") as f:
        f.write("\nimport bpflow.access  # noqa: E402\n")
    with open(tmp_path / "bpflow/moves/tasks.py", "a") as f:  # a service, past the public modules
        f.write("\nimport bpflow.store.tables  # noqa: E402\n")

    run = lint(tmp_path)

    assert run.returncode != 0
    out = run.stdout
    assert "The store imports nothing of the services nor the API BROKEN" in out
    assert "bpflow.store.tenants -> bpflow.access" in out
    assert ("Outside the store, only bpflow.store and bpflow.store.public are imported"
            " BROKEN") in out
    assert "bpflow.moves.tasks -> bpflow.store.tables" in out
    assert "Contracts: 3 kept, 2 broken." in out
