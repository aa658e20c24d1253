"""The people of the team journeys: the shipped expense claim's manager (`approver`, the
claim form's default) and someone in finance, added to the server's database the first
time a journey needs them (unless the session's accounts have them already)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import expect

TEAM = {"approver": ("approver-pass-1", ["approver"]),
        "finance": ("finance-pass-1", ["finance"])}


@pytest.fixture(scope="session")
def team(app_store, accounts) -> Callable[..., None]:
    """`team(page, name, path)`: sign `name` in (any account of the session or of TEAM)
    through the outer circle's form, opening `path` first."""
    passwords = {name: password for name, (password, _) in accounts.items()}
    for name, (password, roles) in TEAM.items():
        if name not in passwords:
            if app_store.user(name) is None:
                app_store.add_user(name, password, roles)
            passwords[name] = password

    def go(page, name: str, path: str = "/flows") -> None:
        if path:
            page.goto(path)
        page.get_by_label("Username").fill(name)
        page.get_by_label("Password").fill(passwords[name])
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#user-menu")).to_contain_text(name)

    return go
