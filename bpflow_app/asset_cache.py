"""Long-lived caching of the built frontend's fingerprinted files.

The production build names every script and stylesheet under `/assets/` by a hash of its
content, so a browser may keep them for good; without this header it revalidates each
of the ~25 chunks on every page load, which costs more than the page's own data.
"""

from __future__ import annotations

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
