"""Pages answered at their own address, without a redirect.

The production build writes each page as `<route>/index.html` (`flows/index.html`), and
the static files server Reflex mounts for them (Starlette's, `html=True`) answers
`/flows` with a redirect to `/flows/`: one more round trip before a page starts loading
(≈ 0.6 s on a phone). This middleware serves such a path as its `index.html` at once; the
page's router matches `/flows` as it matched `/flows/`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

# The server's own paths, never pages.
NOT_PAGES = ("/api", "/_event", "/_upload", "/ping", "/_health", "/assets/")


@cache
def _pages_dir() -> Path:
    """Where the build's pages are (as `reflex.utils.exec.get_frontend_mount` finds them)."""
    from reflex import constants
    from reflex.config import get_config
    from reflex.utils import prerequisites

    return (prerequisites.get_web_dir() / constants.Dirs.STATIC
            / get_config().frontend_path.strip("/")).resolve()


def page_file(path: str, pages: Path) -> str | None:
    """The `index.html` of the page `path` names (`/flows` → `/flows/index.html`), or None
    when it names no built page (a file, a directory URL, another route)."""
    if (path == "/" or path.endswith("/") or path.startswith(NOT_PAGES)
            or "." in path.rsplit("/", 1)[-1]):
        return None
    index = f"{path}/index.html"
    try:
        found = (pages / index.lstrip("/")).resolve()
    except (OSError, ValueError):
        return None
    return index if found.is_relative_to(pages) and found.is_file() else None


def pages_without_redirect(app: ASGIApp) -> ASGIApp:
    """ASGI middleware: `GET /flows` answered with the page itself, not a redirect."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            index = page_file(scope["path"], _pages_dir())
            if index is not None:
                scope = {**scope, "path": index, "raw_path": index.encode()}
        await app(scope, receive, send)

    return wrapped
