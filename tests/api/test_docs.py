"""`/api/docs` works offline (SPEC §13): the page and everything it loads come from bpflow
itself, nothing from a CDN or any other host."""

from __future__ import annotations

import re

from bpflow.api import create_app
from tests.api.helpers import Client, secured

EXTERNAL = re.compile(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}", re.IGNORECASE)


def test_the_docs_page_loads_only_what_bpflow_serves(sqlite_store):
    get = Client(sqlite_store, create_app(lambda: sqlite_store))
    page = get("GET", "/api/docs", who=None)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert EXTERNAL.findall(html) == []
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assets += re.findall(r"url: '([^']+)'", html)  # the OpenAPI document
    assert {a.rsplit(".", 1)[-1] for a in assets} >= {"js", "css", "png", "json"}
    for url in assets:
        assert url.startswith("/api/"), url
        r = get("GET", url, who=None)
        assert r.status_code == 200 and r.content, url
        assert secured(r), url
        if url.endswith(".css"):  # what a style sheet loads: pictures inlined as data: only
            assert [u for u in re.findall(r"url\(([^)]*)\)", r.text)
                    if not u.strip("\"'").startswith("data:")] == []
            assert "@import" not in r.text
    assert '"validatorUrl": null' in html  # no spec sent to the online validator
    redirect = re.search(r"oauth2RedirectUrl: window.location.origin \+ '([^']+)'", html)
    assert redirect and get("GET", redirect[1], who=None).status_code == 200
