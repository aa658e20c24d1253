"""Pages answered at their own address: `/flows` is served as the build's
`flows/index.html`, not redirected to `/flows/` (tests/browser/test_smoke.py asks the
served app)."""

from __future__ import annotations

from pathlib import Path

from bpflow_app.page_paths import page_file


def test_a_page_path_is_served_as_its_index(tmp_path: Path):
    for page in ("flows", "inbox", "guest"):
        (tmp_path / page).mkdir()
        (tmp_path / page / "index.html").write_text("<html></html>")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "app.js").write_text("")
    (tmp_path / "empty").mkdir()
    assert page_file("/flows", tmp_path) == "/flows/index.html"
    assert page_file("/inbox", tmp_path) == "/inbox/index.html"
    for other in ("/", "/flows/", "/assets/app.js", "/assets", "/empty", "/flow/abc",
                  "/api/flows", "/favicon.ico", "/../flows", "/flows/../inbox/"):
        assert page_file(other, tmp_path) is None, other
