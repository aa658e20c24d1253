"""How the built frontend is served (bpflow_app/asset_cache.py), around the static mount
Reflex serves the production build with (its PrecompressedStaticFiles, as
`reflex.utils.exec.get_frontend_mount` makes it), over a build directory laid out as the
build lays it out."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from reflex.utils.precompressed_staticfiles import PrecompressedStaticFiles
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from bpflow_app.asset_cache import IMMUTABLE, cache_fingerprinted_assets, pages_without_redirect
from tests.conftest import run_async


@pytest.fixture
def build(tmp_path: Path) -> Path:
    for page in ("flows", "guest"):
        (tmp_path / page).mkdir()
        (tmp_path / page / "index.html").write_text(f"<title>{page}</title>")
        (tmp_path / f"{page}.html").write_text(f"<title>{page}</title>")
    (tmp_path / "index.html").write_text("<title>home</title>")
    (tmp_path / "404.html").write_text("<title>not found</title>")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "root-abc123.js").write_text("export {}")
    (tmp_path / "__spa-fallback.html").write_text("<title>shell</title>")
    drawn = tmp_path / "_lang" / "zh-CN"  # the build's pages drawn in Chinese (prerender.py)
    for page in ("flows", ""):
        (drawn / page).mkdir(parents=True, exist_ok=True)
        (drawn / page / "index.html").write_text(f"<title>{page or 'home'} zh</title>")
    (drawn / "__spa-fallback.html").write_text("<title>shell zh</title>")
    return tmp_path


class Client:
    """Requests to an ASGI app in process, redirects not followed."""

    def __init__(self, app) -> None:
        self.app = app

    def request(self, method: str, path: str, **headers: str) -> httpx.Response:
        async def send() -> httpx.Response:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                         base_url="http://bpflow.test") as http:
                return await http.request(method, path, headers=headers)
        return run_async(send())  # a thread of its own: a test may run in a loop's

    def get(self, path: str, **headers: str) -> httpx.Response:
        return self.request("GET", path, **headers)

    def head(self, path: str) -> httpx.Response:
        return self.request("HEAD", path)

    def post(self, path: str) -> httpx.Response:
        return self.request("POST", path)


def api_route(request) -> JSONResponse:
    return JSONResponse({"api": True})


def routes(path: str) -> str | None:
    """The app's pages without HTML of their own, as the routes manifest matches them."""
    return "flow/[id]" if re.fullmatch(r"/flow/\w+/?", path) else None


def client(build: Path, mounted: bool = True) -> Client:
    api = Starlette(routes=[Route("/api/flows", api_route),
                            Mount("/", PrecompressedStaticFiles(
                                directory=build, html=True, encodings=["gzip"]))])
    return Client(pages_without_redirect(cache_fingerprinted_assets(api),
                                         lambda: build if mounted else None, lambda: routes))


def test_a_page_without_its_slash_is_served_without_a_redirect(build):
    http = client(build)
    for path in ("/flows", "/guest", "/flows?tab=mine"):
        answer = http.get(path)
        assert answer.status_code == 200, path
        assert answer.text == f"<title>{path[1:6]}</title>"
    assert http.head("/flows").status_code == 200
    assert http.get("/flows/").text == "<title>flows</title>"  # the slash still works


def test_without_the_middleware_the_static_mount_redirects(build):
    """What the middleware is for: Starlette's answer to a page's path without a slash."""
    api = Starlette(routes=[Mount("/", PrecompressedStaticFiles(directory=build, html=True))])
    answer = Client(api).get("/flows")
    assert answer.status_code == 307
    assert answer.headers["location"].endswith("/flows/")


def test_other_paths_pass_unchanged(build):
    http = client(build)
    assert http.get("/api/flows").json() == {"api": True}
    assert http.post("/flows").status_code == 405  # only GET and HEAD are pages
    assert http.get("/nowhere").status_code == 404
    assert http.get("/flows/../guest").status_code in (200, 404)  # no escape, no crash
    assert http.get("/").text == "<title>home</title>"


def test_no_rewrite_when_this_process_serves_no_pages(build):
    """`--backend-only`: the pages are not mounted; the path is left to the app."""
    assert client(build, mounted=False).get("/flows").status_code == 307


def test_fingerprinted_assets_are_cached_for_good(build):
    http = client(build)
    answer = http.get("/assets/root-abc123.js")
    assert answer.status_code == 200
    assert answer.headers["cache-control"] == IMMUTABLE.decode()
    assert "immutable" not in http.get("/flows").headers.get("cache-control", "")


def test_a_page_is_served_drawn_in_the_language_of_its_reader(build):
    """Chinese by the pages' cookie, else by `Accept-Language`; English otherwise, or when
    the build has not drawn that page in the language. Page answers vary by both."""
    http = client(build)
    for path in ("/flows", "/flows/", "/flows?tab=mine"):
        assert http.get(path, cookie="bpflow_lang=zh-CN").text == "<title>flows zh</title>"
    assert http.get("/", cookie="bpflow_lang=zh-CN").text == "<title>home zh</title>"
    assert http.get("/flows", **{"accept-language": "zh-CN,zh;q=0.9,en;q=0.8"}).text == \
        "<title>flows zh</title>"
    assert http.get("/flows", **{"accept-language": "zh-Hans"}).text == "<title>flows zh</title>"
    # the cookie (the page's last language, maybe chosen in its menu) before the browser's
    assert http.get("/flows", cookie="bpflow_lang=en", **{"accept-language": "zh-CN"}).text \
        == "<title>flows</title>"
    # a language we do not speak, or nonsense, is the browser's, then English
    assert http.get("/flows", cookie="bpflow_lang=fr", **{"accept-language": "zh-CN"}).text \
        == "<title>flows zh</title>"
    assert http.get("/flows", cookie="bpflow_lang=../../etc").text == "<title>flows</title>"
    assert http.get("/flows", **{"accept-language": "de-DE"}).text == "<title>flows</title>"
    # not drawn in Chinese: the English page
    assert http.get("/guest", cookie="bpflow_lang=zh-CN").text == "<title>guest</title>"
    answer = http.get("/flows", cookie="bpflow_lang=zh-CN")
    assert {"cookie", "accept-language", "accept-encoding"} <= {
        v.strip().lower() for v in answer.headers["vary"].split(",")}
    assert "cookie" in http.get("/flows").headers["vary"].lower()


def test_a_page_without_html_of_its_own_gets_the_shell_drawn_in_its_language(build):
    http = client(build)
    answer = http.get("/flow/12", cookie="bpflow_lang=zh-CN")
    assert (answer.status_code, answer.text) == (200, "<title>shell zh</title>")
    english = http.get("/flow/12")
    assert english.text == "<title>not found</title>"  # Reflex's own shell
    assert "cookie" in english.headers["vary"].lower()  # a cache keeps the two apart
    # not a page of the app: 404, the shell in the reader's language (the app says so)
    nowhere = http.get("/nowhere", cookie="bpflow_lang=zh-CN")
    assert (nowhere.status_code, nowhere.text) == (404, "<title>shell zh</title>")
    assert http.head("/nowhere/else").status_code == 404
    assert http.get("/nowhere").status_code == 404
    assert http.get("/" + "x" * 300).status_code == 404  # a name too long for a file
    assert http.get("/" + "x" * 300, cookie="bpflow_lang=zh-CN").status_code == 404
    # the drawings themselves, and files, are served as they are
    assert http.get("/_lang/zh-CN/flows/").text == "<title>flows zh</title>"
    assert http.get("/assets/root-abc123.js", cookie="bpflow_lang=zh-CN").text == "export {}"
