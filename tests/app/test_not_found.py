"""The page of an unknown path: the app's own, in the frame of its public pages, with the
ways back in (the browser side is in tests/browser/test_smoke.py)."""

from __future__ import annotations

import json
import re

from bpflow_app import routes
from bpflow_app.pages.not_found import not_found_page


def test_the_app_registers_its_page_for_reflexs_404_route():
    from bpflow_app.bpflow_app import app

    page = app._unevaluated_pages[routes.NOT_FOUND]
    assert page.component is not_found_page
    title = str(page.title)  # in the reader's language
    for text in ("Page not found · bpflow", "页面不存在 · bpflow"):
        assert json.dumps(text) in title


def test_the_page_says_so_in_the_public_frame_and_links_home_and_to_my_flows():
    jsx = str(not_found_page())
    assert "Page not found" in jsx and "There is no page at this address." in jsx
    # the frame's brand, as on the home page (named in the reader's language)
    assert re.search(r'"aria-label":\(\(.{0,300}: "bpflow home"\)', jsx)
    for link in ("not-found-home", "not-found-flows"):
        assert f'id:"{link}"' in jsx
    assert jsx.count(f'to:"{routes.HOME}"') == 2 and jsx.count(f'to:"{routes.FLOWS}"') == 2
