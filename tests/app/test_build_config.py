"""The build's configuration (rxconfig.py): the icons the pages import go in one script
(`IconsTogether`), named from the compiled pages when the build starts."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import rxconfig

CONFIG = """export default defineConfig((config) => ({
  build: { rollupOptions: { output: { codeSplitting: { groups: [
    { test: /env.json/, name: "reflex-env" },
  ] } } } },
}));
"""


def test_the_icons_group_goes_first_and_once() -> None:
    grouped = rxconfig.IconsTogether.grouped(CONFIG)
    assert grouped.startswith(rxconfig.IconsTogether.PRELUDE)
    assert grouped.index('name: "icons"') < grouped.index('name: "reflex-env"')
    assert rxconfig.IconsTogether.grouped(grouped) == grouped  # a second compile: as it is
    assert rxconfig.IconsTogether.grouped("export default {};") == "export default {};"


def test_a_config_without_groups_is_left_as_it_is() -> None:
    config = CONFIG.replace("groups: [", "chunks: [")
    assert rxconfig.IconsTogether.grouped(config) == config


@pytest.mark.skipif(shutil.which("node") is None, reason="no node")
def test_the_names_are_the_icons_the_compiled_pages_import(tmp_path: Path) -> None:
    (tmp_path / "app" / "routes").mkdir(parents=True)
    (tmp_path / "app_components" / "parts").mkdir(parents=True)
    (tmp_path / "app" / "routes" / "[flows]._index.jsx").write_text(
        'import Workflow from "lucide-react/dist/esm/icons/workflow.mjs"\n'
        'import {x} from "lucide-react/dist/esm/icons/chevron-left.mjs";\n')
    (tmp_path / "app_components" / "parts" / "banner.jsx").write_text(
        'import WifiOff from "lucide-react/dist/esm/icons/wifi-off.mjs"\n')
    (tmp_path / "app" / "notes.txt").write_text('"lucide-react/dist/esm/icons/x.mjs"')
    script = tmp_path / "names.mjs"
    script.write_text(rxconfig.IconsTogether.PRELUDE
                      + "console.log(JSON.stringify([...PAGE_ICONS].sort()));\n")
    out = subprocess.run(["node", str(script)], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == ["chevron-left.mjs", "wifi-off.mjs", "workflow.mjs"]
