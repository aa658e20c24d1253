"""The Radix Themes stylesheet holds the colour scales the app names and no others
(rxconfig.py, `RadixThemes`): every colour a page or a stylesheet of the app names is
among the files the build imports, and each file exists in the installed package."""

from __future__ import annotations

from pathlib import Path

import pytest

import rxconfig
from bpflow_app.components.ui import COLORS

ROOT = Path(rxconfig.__file__).parent
PACKAGE = ROOT / ".web" / "node_modules" / "@radix-ui" / "themes"


def test_the_colours_the_app_names_are_imported() -> None:
    used = rxconfig.RadixThemes.colors_used()
    assert set(COLORS.values()) <= set(used)  # the badges' colours
    # the theme's accent, its gray, and the colours of assets/styles.css and the pages
    assert {"indigo", "slate", "gray", "red", "green", "amber", "blue"} <= set(used)
    # and not all 31: the point of the list
    assert len(used) < len(rxconfig.RadixThemes.COLORS) // 2


def test_the_stylesheet_is_styles_css_in_parts() -> None:
    plugin = rxconfig.RadixThemes()
    paths = plugin.get_stylesheet_paths()
    assert paths[0] == "@radix-ui/themes/tokens/base.css"
    assert paths[-2:] == ("@radix-ui/themes/components.css", "@radix-ui/themes/utilities.css")
    assert [p.rsplit("/", 1)[-1] for p in paths[1:-2]] == [
        f"{c}.css" for c in rxconfig.RadixThemes.colors_used()]


@pytest.mark.skipif(not PACKAGE.is_dir(), reason="no frontend installed (.web)")
def test_each_file_is_in_the_package() -> None:
    for path in rxconfig.RadixThemes().get_stylesheet_paths():
        assert (PACKAGE / path.removeprefix("@radix-ui/themes/")).is_file(), path
