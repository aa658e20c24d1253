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
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


def pages_without_redirect(app: ASGIApp,
                           build_dir: Callable[[], Path | None] = frontend_build_dir
                           ) -> ASGIApp:
    """ASGI middleware: a GET or HEAD of `/route` whose page the build holds as
    `route/index.html` is passed on as `/route/` (which the static mount answers with
    the page), instead of being redirected there."""
    root: list[Path | None] = []  # looked up at the first request (the build is done then)

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            scope = _as_directory(scope, root)
        await app(scope, receive, send)

    def _as_directory(scope: Scope, root: list[Path | None]) -> Scope:
        path: str = scope["path"]
        name = path.rsplit("/", 1)[-1]
        if (not name or "." in name or path.startswith(("/api/", "/_"))
                or ".." in path.split("/")):
            return scope  # a directory already, a file, the API or Reflex's endpoints
        if not root:
            root.append(build_dir())
        if root[0] is None or not (root[0] / path.lstrip("/") / "index.html").is_file():
            return scope
        scope = {**scope, "path": path + "/"}
        if scope.get("raw_path"):
            scope["raw_path"] = scope["raw_path"] + b"/"
        return scope

    return wrapped
