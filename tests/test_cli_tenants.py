"""`bpflow tenant add / quota / list` and `bpflow user add / disable --tenant` (SPEC §12),
on SQLite and PostgreSQL: what they create, and a clear message and exit code (never a
traceback) for a taken or bad name or an unknown tenant."""

from __future__ import annotations

import io

import pytest

from bpflow.cli import main
from bpflow.store import Store
from tests.conftest import SECRET


@pytest.fixture
def url(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("BPFLOW_SECRET", SECRET.decode() + "-of-32-bytes-or-more")
    monkeypatch.setenv("BPFLOW_HOME", str(tmp_path / "home"))
    return db_url


def run(monkeypatch, capsys, argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_tenant_add_creates_its_admin_and_frame(url, monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, ["tenant", "add", "acme", "--admin", "boss",
                                               "--password-stdin", "--max-instances", "3",
                                               "--url", url], "s3cret-pw\n")
    assert (code, err) == (0, "")
    assert "tenant acme added; its admin is boss" in out
    assert "password:" not in out  # it was given on stdin
    code, out, _ = run(monkeypatch, capsys, ["tenant", "add", "beta", "--admin", "chief",
                                             "--url", url])
    assert code == 0 and "password: " in out
    generated = out.split("password: ")[1].strip()
    store = Store(url, secret=b"x")
    try:
        assert store.tenant_names() == ["acme", "beta", "default"]
        acme = store.of("acme")
        me = acme.authenticate("boss", "s3cret-pw")
        assert me is not None and me["tenant"] == "acme" and me["roles"] == ["admin"]
        assert store.of("beta").authenticate("chief", generated)["tenant"] == "beta"
        assert acme.authenticate("boss", "wrong") is None
        assert "signin" in acme.template_versions()
        assert "signin" not in store.template_versions()  # default's are its own
        assert store.user("boss") is None  # default does not see acme's admin
        assert acme.quotas() == {"instances": 3}
    finally:
        store.close()
    code, out, _ = run(monkeypatch, capsys, ["tenant", "list", "--url", url])
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == ["acme", "beta", "default"]


GOOD = "long-enough-pw\n"  # a password on stdin of the right length


@pytest.mark.parametrize("argv, stdin, message", [
    (["tenant", "add", "acme", "--admin", "other"], GOOD, "tenant 'acme' already exists"),
    (["tenant", "add", "newco", "--admin", "boss"], GOOD, "user 'boss' already exists"),
    (["tenant", "add", "newco", "--admin", "admin"], GOOD, "user 'admin' already exists"),
    (["tenant", "add", "Bad Name!", "--admin", "x1"], GOOD, "a tenant name is 1-63"),
    (["tenant", "add", "bad-", "--admin", "x2"], GOOD, "a tenant name is 1-63"),
    (["tenant", "add", "newco", "--admin", "bad\nname"], GOOD, "username"),
    (["tenant", "add", "newco", "--admin", "x3"], "\n", "empty password"),
    (["tenant", "add", "newco", "--admin", "x5"], "pw\n", "a password has 8 to 1000 characters"),
    (["user", "add", "zed"], "short\n", "a password has 8 to 1000 characters"),
    (["tenant", "add", "newco", "--admin", "x4", "--max-instances", "-1"], GOOD,
     "--max-instances takes a whole number or 'none'"),
    (["user", "add", "zed", "--tenant", "nowhere"], GOOD, "no tenant 'nowhere'"),
    (["user", "add", "boss", "--tenant", "default"], GOOD, "user 'boss' already exists"),
    (["user", "disable", "boss", "--tenant", "nowhere"], "", "no tenant 'nowhere'"),
    (["user", "disable", "boss", "--tenant", "default"], "", "no user named boss"),
    (["tenant", "quota", "nowhere"], "", "no tenant 'nowhere'"),
    (["tenant", "quota", "acme", "--max-templates", "many"], "",
     "--max-templates takes a whole number or 'none'"),
])
def test_refusals_say_why(url, monkeypatch, capsys, argv, stdin, message):
    assert main(["user", "add", "admin", "--role", "admin", "--url", url]) == 0
    code, _, _ = run(monkeypatch, capsys, ["tenant", "add", "acme", "--admin", "boss",
                                           "--password-stdin", "--url", url], "boss-pass-1\n")
    assert code == 0
    code, out, err = run(monkeypatch, capsys, [*argv, "--password-stdin", "--url", url]
                         if argv[:2] in (["tenant", "add"], ["user", "add"])
                         else [*argv, "--url", url], stdin)
    assert code != 0, out
    assert err.startswith("bpflow: ") and message in err, err
    store = Store(url, secret=b"x")
    try:  # nothing half made
        assert store.tenant_names() == ["acme", "default"]
        assert store.of("acme").user("boss") is not None
        assert {u["username"] for u in store.list_users()} == {"admin"}
        assert not store.username_taken("x1") and not store.username_taken("zed")
    finally:
        store.close()


def test_user_add_and_disable_in_a_tenant(url, monkeypatch, capsys):
    run(monkeypatch, capsys, ["tenant", "add", "acme", "--admin", "boss", "--url", url])
    code, out, err = run(monkeypatch, capsys, ["user", "add", "zed", "--tenant", "acme",
                                               "--role", "finance", "--password-stdin",
                                               "--url", url], "zed-pass-1\n")
    assert code == 0, err
    assert "user zed added in tenant acme with roles finance" in out
    store = Store(url, secret=b"x")
    try:
        assert store.of("acme").user("zed")["roles"] == ["finance"]
        assert store.user("zed") is None
        assert store.authenticate("zed", "zed-pass-1")["tenant"] == "acme"
    finally:
        store.close()
    # the default tenant cannot disable acme's user; acme can
    code, _, err = run(monkeypatch, capsys, ["user", "disable", "zed", "--url", url])
    assert code != 0 and "no user named zed" in err
    code, out, _ = run(monkeypatch, capsys, ["user", "disable", "zed", "--tenant", "acme",
                                             "--url", url])
    assert code == 0 and "user zed disabled" in out
    store = Store(url, secret=b"x")
    try:
        assert store.authenticate("zed", "zed-pass-1") is None
    finally:
        store.close()


def test_quota_shows_and_changes_values(url, monkeypatch, capsys):
    run(monkeypatch, capsys, ["tenant", "add", "acme", "--admin", "boss",
                              "--max-templates", "5", "--url", url])
    code, out, _ = run(monkeypatch, capsys, ["tenant", "quota", "acme", "--url", url])
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert out.splitlines()[0] == "tenant acme:"
    assert "0 used, quota none" in lines["instances"]
    assert "1 used, quota 5" in lines["templates"]  # its frame, signin
    assert "quota none" in lines["variables_bytes"]
    code, out, _ = run(monkeypatch, capsys, ["tenant", "quota", "acme", "--max-instances",
                                             "10", "--max-templates", "none",
                                             "--max-variables-bytes", "4096", "--url", url])
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "quota 10" in lines["instances"] and "quota none" in lines["templates"]
    assert "quota 4096" in lines["variables_bytes"]
    store = Store(url, secret=b"x")
    try:
        assert store.of("acme").quotas() == {"instances": 10, "variables_bytes": 4096}
        assert store.quotas() == {}  # default's are its own
    finally:
        store.close()
    code, out, _ = run(monkeypatch, capsys, ["tenant", "quota", "default", "--url", url])
    assert code == 0 and "tenant default:" in out
