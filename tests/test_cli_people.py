"""`bpflow user add --role` with custom roles, `bpflow user password` (a new password
ends the user's sessions), `bpflow import` (versions) beside the app's
start-up import (only unknown templates: SPEC §6), on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import sys

import pytest

from bpflow import backend
from bpflow.cli import main
from bpflow.cli.users import role_names
from bpflow.store import Store
from tests.conftest import SECRET

BODY = {"name": "simple", "circles": [{"uri": "a"}]}


@pytest.fixture
def url(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("BPFLOW_SECRET", SECRET.decode() + "-of-32-bytes-or-more")
    monkeypatch.setenv("BPFLOW_HOME", str(tmp_path / "home"))
    return db_url


def test_role_options_are_repeatable_and_comma_separated():
    assert role_names(None) == ["user"]
    assert role_names(["finance"]) == ["finance"]
    assert role_names(["finance,user", " approver "]) == ["finance", "user", "approver"]
    assert role_names([""]) == []  # the store refuses it


def test_user_add_takes_custom_roles(url, capsys):
    assert main(["user", "add", "fay", "--role", "finance", "--role", "user,approver",
                 "--url", url]) == 0
    assert "added with roles approver, finance, user" in capsys.readouterr().out
    assert main(["user", "add", "gus", "--role", "Finance", "--url", url]) == 1
    assert "not a role name: 'Finance'" in capsys.readouterr().err
    assert main(["user", "add", "hal", "--role", "", "--url", url]) == 1
    assert "at least one role" in capsys.readouterr().err
    store = Store(url, secret=b"x")
    try:
        assert store.user("fay")["roles"] == ["approver", "finance", "user"]
        assert store.user("gus") is None and store.user("hal") is None
        assert store.list_users(role="finance") == ["fay"]
    finally:
        store.close()


def test_user_password_gives_a_new_one_and_ends_the_users_sessions(url, capsys, monkeypatch):
    from bpflow.auth import current, issue_token, verify_token
    from bpflow.errors import Unauthorized
    assert main(["user", "add", "fay", "--url", url]) == 0
    store = Store(url, secret=b"x")
    store.account_ttl = 0  # the CLI is another process: no reuse of a lookup
    try:
        token = issue_token(store.user("fay"), b"x" * 32)
        monkeypatch.setattr(sys, "stdin", io.StringIO("short\n"))
        assert main(["user", "password", "fay", "--password-stdin", "--url", url]) == 1
        assert "8 to 1000 characters" in capsys.readouterr().err
        assert main(["user", "password", "nobody", "--url", url]) == 1
        assert "no user named nobody" in capsys.readouterr().err
        assert current(verify_token(token, b"x" * 32), store.account(store.user("fay")["id"]))
        monkeypatch.setattr(sys, "stdin", io.StringIO("fay-new-password\n"))
        assert main(["user", "password", "fay", "--password-stdin", "--url", url]) == 0
        assert "fay has a new password; their sessions have ended" in capsys.readouterr().out
        assert store.authenticate("fay", "fay-new-password") is not None
        with pytest.raises(Unauthorized, match="password was changed"):
            current(verify_token(token, b"x" * 32), store.account(store.user("fay")["id"]))
        assert main(["user", "password", "fay", "--url", url]) == 0  # generated, printed
        generated = capsys.readouterr().out.split("password: ")[1].strip()
        assert store.authenticate("fay", generated) is not None
    finally:
        store.close()


def test_import_loads_versions_and_new_only_leaves_known_templates(url, tmp_path, capsys):
    folder = tmp_path / "workflow"
    folder.mkdir()
    (folder / "simple.json").write_text(json.dumps(BODY))
    assert main(["import", str(folder), "--url", url]) == 0
    (folder / "simple.json").write_text(json.dumps({**BODY, "title": "changed"}))
    assert main(["import", "--new-only", str(folder), "--url", url]) == 0
    assert "simple: version 1 (unchanged)" in capsys.readouterr().out.splitlines()[-1]
    assert main(["import", str(folder), "--url", url]) == 0
    assert "simple: version 2 (new)" in capsys.readouterr().out


def test_a_restart_keeps_what_an_admin_uploaded(url, tmp_path, monkeypatch):
    """The app's start-up (`backend.prepare`) adds the shipped templates whose names are
    unknown, and never a shipped file as a new version over an admin's upload."""
    folder = tmp_path / "workflow"
    folder.mkdir()
    (folder / "simple.json").write_text(json.dumps(BODY))
    monkeypatch.setattr(backend, "TEMPLATES", folder)
    monkeypatch.setenv("DATABASE_URL", url)
    store = Store(url, secret=SECRET)
    try:
        backend.prepare(store)
        assert store.template_versions() == {"simple": [1]}
        store.put_template({**BODY, "title": "uploaded by an admin"})
        (folder / "other.json").write_text(json.dumps({**BODY, "name": "other"}))
        backend.prepare(store)  # a restart
        assert store.template_versions() == {"other": [1], "simple": [1, 2]}
        assert store.latest_body("simple")["title"] == "uploaded by an admin"
        assert store.start("simple").version == 2
    finally:
        store.close()


def test_a_restart_brings_an_old_outer_flow_up_to_the_shipped_one(url, monkeypatch):
    """A database made before sign-in stopped starting claims keeps its admin's templates,
    but the app's own frame (`signin`) becomes the shipped one: signing in starts nothing."""
    from pathlib import Path
    shipped = Path(backend.__file__).resolve().parents[1] / "upload" / "workflow"
    monkeypatch.setattr(backend, "TEMPLATES", shipped)
    monkeypatch.setenv("DATABASE_URL", url)
    store = Store(url, secret=SECRET)
    try:
        old = json.loads((shipped / "signin.json").read_text())
        old["circles"][1]["box"] = {"action": {"type": "flow", "template": "reimbursement"}}
        store.put_template(json.loads((shipped / "reimbursement.json").read_text()))
        store.put_template(old)
        backend.prepare(store)
        body = store.latest_body("signin")
        assert "box" not in body["circles"][1] or not body["circles"][1]["box"]
        assert store.template_versions()["signin"] == [1, 2]
        backend.prepare(store)  # and a further restart changes nothing
        assert store.template_versions()["signin"] == [1, 2]
    finally:
        store.close()
