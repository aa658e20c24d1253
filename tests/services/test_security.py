"""The server secret (SPEC §13): at least 32 bytes, from the environment or a private
file generated on first use; what is refused says why (the CLI and the server stop with a
message and an exit code, never a traceback). And usernames: NFKC-normalised, no control
or invisible characters, so no two accounts look alike."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bpflow.security import (
    MIN_SECRET_BYTES,
    SecretError,
    load_secret,
    normal_username,
    valid_username,
)
from tests.conftest import SECRET
from tests.services.helpers import ROOT

LONG = "s" * MIN_SECRET_BYTES


@pytest.fixture
def home(tmp_path, monkeypatch):
    """BPFLOW_HOME in a fresh folder, BPFLOW_SECRET unset."""
    monkeypatch.delenv("BPFLOW_SECRET", raising=False)
    monkeypatch.setenv("BPFLOW_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


# ---------------------------------------------------------- the secret
@pytest.mark.parametrize("value", ["abcd", "", "x" * (MIN_SECRET_BYTES - 1)])
def test_a_short_secret_in_the_environment_is_refused(monkeypatch, value):
    monkeypatch.setenv("BPFLOW_SECRET", value)
    with pytest.raises(SecretError, match=f"at least {MIN_SECRET_BYTES}"):
        load_secret()


def test_a_secret_of_32_bytes_is_used(monkeypatch):
    monkeypatch.setenv("BPFLOW_SECRET", LONG)
    assert load_secret() == LONG.encode()


def test_the_length_is_counted_in_bytes(monkeypatch):
    monkeypatch.setenv("BPFLOW_SECRET", "é" * 16)  # 16 characters, 32 bytes
    assert len(load_secret()) == 32


def test_a_generated_secret_is_private_and_kept(home):
    first = load_secret()
    assert len(first) >= MIN_SECRET_BYTES
    assert oct(home.stat().st_mode & 0o777) == "0o700"
    assert oct((home / "secret").stat().st_mode & 0o777) == "0o600"
    assert load_secret() == first
    assert os.listdir(home) == ["secret"]  # no draft left behind


def test_a_generated_secret_folder_is_0700_whatever_the_umask(home):
    old = os.umask(0o000)
    try:
        load_secret()
    finally:
        os.umask(old)
    assert oct(home.stat().st_mode & 0o777) == "0o700"
    assert oct((home / "secret").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o620])
def test_a_secret_file_open_to_others_is_refused(home, mode):
    load_secret()
    (home / "secret").chmod(mode)
    with pytest.raises(SecretError, match="open to others.*chmod 600"):
        load_secret()


def test_a_secret_file_in_a_folder_others_may_write_is_refused(home):
    load_secret()
    home.chmod(0o777)
    with pytest.raises(SecretError, match="writable by others"):
        load_secret()


def test_a_short_secret_file_is_refused(home):
    home.mkdir(mode=0o700)
    (home / "secret").write_bytes(b"abcd")
    (home / "secret").chmod(0o600)
    with pytest.raises(SecretError, match="has 4 bytes"):
        load_secret()


def test_a_home_that_cannot_be_made_is_a_message(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.delenv("BPFLOW_SECRET", raising=False)
    monkeypatch.setenv("BPFLOW_HOME", str(blocker / "home"))
    with pytest.raises(SecretError, match="cannot create the secret file .*BPFLOW_HOME"):
        load_secret()


def test_explicit_store_secrets_are_not_the_configured_secret(store):
    assert store.secret == SECRET  # tests pass short ones; only load_secret checks


def start_backend(**env: str) -> subprocess.CompletedProcess[str]:
    """The web backend's start-up (its lifespan) in a process of its own with `env` added;
    it prints `started` if it got through."""
    code = ("import asyncio\nfrom bpflow.backend import lifespan\n"
            "async def main():\n    async with lifespan():\n        pass\n"
            "asyncio.run(main())\nprint('started')\n")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env},
                          text=True, capture_output=True, timeout=120)


def test_the_server_refuses_to_start_with_a_short_secret(tmp_path):
    """The web backend's start-up (its lifespan) stops the process: a message, exit 2."""
    done = start_backend(BPFLOW_SECRET="abcd", DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}",
                         BPFLOW_INPROCESS_WORKER="0")
    assert done.returncode == 2, done.stderr
    assert "BPFLOW_SECRET has 4 bytes; it needs at least 32" in done.stderr
    assert "Traceback" not in done.stderr and "started" not in done.stdout


# ------------------------------------------------------------ usernames
@pytest.mark.parametrize("name", ["root\n", "root\t", " ", "a b", "ro\u200bot", "root\u200d",
                                  "\u3164", "\u2800", "a\u202eb", "\u0301a", "a\x00", "",
                                  "x" * 101, "root/evil", "<b>"])
def test_look_alike_or_invisible_usernames_are_refused(store, name):
    with pytest.raises(ValueError, match="a username has"):
        store.add_user(name, "pw-long-enough")
    assert store.list_users() == []


@pytest.mark.parametrize("name", ["alice", "ann.b-c@example.org", "José", "नमस्ते", "o'brien",
                                  "user_7"])
def test_ordinary_usernames_are_accepted(name):
    assert valid_username(name) == name


def test_usernames_are_nfkc_normalised_when_added_and_signing_in(store):
    store.add_user("ｒｏｏｔ", "pw-long-enough")  # fullwidth letters
    assert [u["username"] for u in store.list_users()] == ["root"]
    assert store.authenticate("ｒｏｏｔ", "pw-long-enough")["username"] == "root"
    assert store.user("ｒｏｏｔ")["username"] == "root"
    with pytest.raises(ValueError, match="already exists"):
        store.add_user("root", "another-password")
    assert normal_username("ﬁ") == "fi"
