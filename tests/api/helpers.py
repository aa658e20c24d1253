"""What the tests of hostile input share: a store on SQLite with users and templates, an
in-process client, the security headers every answer must carry."""

from __future__ import annotations

from typing import Any

import httpx

from bpflow.auth import issue_token
from bpflow.store import Store
from tests.conftest import SECRET, run_async, sqlite_database

FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer", "required": True}]}},
    {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "t", "type": "string"}]}},
    {"uri": "end", "deps": [["b"]]}]}
NEEDS = {"name": "needs", "inputs": {"amount": "number"}, "circles": [{"uri": "x"}]}
HAND = {"name": "hand", "circles": [  # an action bpflow runs: an admin completes it by hand
    {"uri": "h", "box": {"action": {"type": "http", "url": "http://127.0.0.1:9/"}}}]}
JSON = {"Content-Type": "application/json"}
SECURITY = {"x-content-type-options": "nosniff", "x-frame-options": "DENY",
            "content-security-policy": "frame-ancestors 'none'"}


class Client:
    """Requests to one app in-process, as `who` (a username, or None for no token)."""

    def __init__(self, store: Store, app):
        self.store, self.app = store, app

    def auth(self, who: str | None) -> dict[str, str]:
        if who is None:
            return {}
        return {"Authorization": f"Bearer {issue_token(self.store.user(who), SECRET)}"}

    def __call__(self, method: str, path: str, body: Any = None, who: str | None = "alice",
                 headers: dict[str, str] | None = None) -> httpx.Response:
        sent = {**(JSON if body is not None else {}), **self.auth(who), **(headers or {})}
        content = body.encode() if isinstance(body, str) else body

        async def send():
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.request(method, path, content=content, headers=sent)
        return run_async(send())


def hostile_store(tmp_path) -> Store:
    """A store on SQLite with admin, alice and ann, and the templates above."""
    s = Store(sqlite_database(tmp_path / "hostile.db"), secret=SECRET)
    for name, roles in {"admin": ["admin"], "alice": ["user"], "ann": ["approver"]}.items():
        s.add_user(name, f"pw-{name}", roles)
    for body in (FORM, NEEDS, HAND):
        s.put_template(body)
    return s


def secured(r: httpx.Response) -> bool:
    return all(r.headers.get(name) == value for name, value in SECURITY.items())
