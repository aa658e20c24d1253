"""How the built frontend is served, around Reflex's own static mount (`reflex run --env
prod --single-port`, `python -m bpflow_app.serve`): two ASGI middlewares, wrapped around
the whole app (the REST API, the event socket and the pages; bpflow_app/bpflow_app.py).

- Long-lived caching of the fingerprinted files. The production build names every script
  and stylesheet under `/assets/` by a hash of its content, so a browser may keep them
  for good; without this header it revalidates each of the ~25 chunks on every page
  load, which costs more than the page's own data.
- Pages without a redirect. The build writes each page as `<route>/index.html`, and
  Starlette's static files answer `/flows` with a 307 to `/flows/`: one more round trip
  before anything is drawn (0.6 s on a phone, by Lighthouse's mobile preset;
  bench/RESULTS.md). A page's path without its trailing slash is served that page
  directly, under the address the browser asked for.
- Pages in the reader's language. The build draws each page in every language
  (bpflow_app/prerender.py); a page is served drawn in the language its reader's pages
  are in, so that it is not English until it has hydrated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bpflow import languages
from bpflow_app import prerender

IMMUTABLE = b"public, max-age=31536000, immutable"


def cache_fingerprinted_assets(app: ASGIApp) -> ASGIApp:
    """ASGI middleware: `Cache-Control: immutable` on successful `/assets/*` answers."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/assets/"):
            await app(scope, receive, send)
            return

        async def send_cached(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower() != b"cache-control"]
                message = {**message, "headers": [*headers, (b"cache-control", IMMUTABLE)]}
            await send(message)

        await app(scope, receive, send_cached)

    return wrapped


def frontend_build_dir() -> Path | None:
    """Where Reflex's static mount serves the pages from, when it mounts them (as
    `reflex.utils.exec.get_frontend_mount` computes it); None when this process serves
    no pages (`--backend-only`)."""
    from reflex.utils import prerequisites
    from reflex_base import constants
    from reflex_base.config import get_config
    from reflex_base.environment import environment

    if not environment.REFLEX_MOUNT_FRONTEND_COMPILED_APP.get():
        return None
    path = get_config().frontend_path.strip("/")
    return (prerequisites.get_web_dir() / constants.Dirs.STATIC / path).resolve()


def routable_pages() -> Callable[[str], str | None] | None:
    """Which paths are pages of the app without HTML of their own (`/flow/<id>`): the
    matcher Reflex's static mount serves its page shell by (`get_frontend_mount`, from
    the routes the build wrote), or None without a build."""
    from reflex.utils import exec as rx_exec

    router = rx_exec.get_routes_manifest_router()
    if router is None:
        return None
    return functools.partial(rx_exec._match_routable_page, router)


def language_of(scope: Scope) -> str:
    """The language a request's page is drawn in: the page's last (the `bpflow_lang`
    cookie the pages keep), else the best `Accept-Language` asks for, else English — as
    `LangState.lang` decides once the page is connected (bpflow_app/prerender.py)."""
    headers = Headers(scope=scope)
    kept = cookie_parser(headers.get("cookie", "")).get(prerender.COOKIE)
    return languages.known(kept) or languages.best(headers.get("accept-language"))


def pages_without_redirect(app: ASGIApp,
                           build_dir: Callable[[], Path | None] = frontend_build_dir,
                           routes: Callable[[], Callable[[str], str | None] | None]
                           = routable_pages) -> ASGIApp:
    """ASGI middleware for a GET or HEAD of a page:

    - `/route`, whose page the build holds as `route/index.html`, is passed on as
      `/route/` (which the static mount answers with the page), instead of being
      redirected there;
    - in a language other than English (`language_of`), the page drawn in it is passed
      on instead (`_lang/<code>/route/`; for a page without HTML of its own, the page
      shell drawn in it; for a path that is no page, that shell with status 404, where
      the app then says "Page not found"), when the build has it.

    Every page's answer says it varies by cookie and language."""
    found: list[tuple[Path | None, Callable[[str], str | None] | None]] = []  # at the
    # first request (the build is done then)

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            page = _page(scope)
            if page is not None:
                await app(page[0], receive, _varying(send, page[1]))
                return
        await app(scope, receive, send)

    def _page(scope: Scope) -> tuple[Scope, int | None] | None:
        """The request as the static mount is to see it, and the status to answer with
        (None: the mount's), if it asks for a page."""
        path: str = scope["path"]
        name = path.rsplit("/", 1)[-1]
        if ("." in name or path.startswith(("/api/", "/_"))
                or ".." in path.split("/")):
            return None  # a file, the API, Reflex's endpoints
        if not found:
            found.append((build_dir(), routes()))
        root, routable = found[0]
        if root is None:
            return None
        rel = path.strip("/")
        lang = language_of(scope)
        drawn = root / prerender.VARIANTS / lang
        other = lang != languages.DEFAULT
        shell = f"/{prerender.VARIANTS}/{lang}/{prerender.SPA_FALLBACK}"
        if _is_file(root / rel / "index.html"):
            if other and _is_file(drawn / rel / "index.html"):
                return _at(scope, f"/{prerender.VARIANTS}/{lang}/{rel}/".replace("//", "/")), None
            return _at(scope, path if path.endswith("/") else path + "/"), None
        if not (other and _is_file(drawn / prerender.SPA_FALLBACK)):
            return scope, None
        if routable is not None and routable(path):
            return _at(scope, shell), None
        return _at(scope, shell), 404

    return wrapped


def _is_file(path: Path) -> bool:
    """Whether the build holds this file (a name too long for the system: no)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _at(scope: Scope, path: str) -> Scope:
    """The request for another path of the build (the address bar keeps the one asked)."""
    return {**scope, "path": path, "raw_path": path.encode()}


def _varying(send: Send, status: int | None = None) -> Send:
    """`send`, with `Vary: Cookie, Accept-Language` added to the answer's start (a page
    depends on them), and its status made `status` if one is given."""
    async def varying(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"vary"]
            vary = [v for k, v in message.get("headers", []) if k.lower() == b"vary"]
            message = {**message, "headers": [
                *headers, (b"vary", b", ".join([*vary, b"Cookie, Accept-Language"]))]}
            if status is not None:
                message["status"] = status
        await send(message)
    return varying
