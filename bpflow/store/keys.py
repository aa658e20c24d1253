"""The server secret (HMAC for bookmarks and approvals, JWT signing) and the keys derived
from it: below the services because the store signs bookmarks with one (`Store.engine`)
and opens with the configured secret; `bpflow.security` gives the services the same.

The secret comes from `BPFLOW_SECRET`, else from a file generated once with owner-only
permissions (`$BPFLOW_HOME/secret`, default `.bpflow/secret`, in a folder only its owner
may enter). Keys for each purpose are derived from it, so one leaked purpose key does not
reveal the others. A secret that could be guessed or read by others is refused
(`SecretError`): shorter than 32 bytes, or a file others may read or replace.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

MIN_SECRET_BYTES = 32


class SecretError(Exception):
    """The server secret cannot be used (too short, not private, or the file cannot be
    made); the message says why and what to do. The server and the CLI stop on it."""


def home() -> Path:
    return Path(os.environ.get("BPFLOW_HOME", ".bpflow"))


def load_secret() -> bytes:
    """The configured secret: `BPFLOW_SECRET`, else `$BPFLOW_HOME/secret` (made on first
    use). SecretError when it is too short or not private."""
    env = os.environ.get("BPFLOW_SECRET")
    if env is not None:
        value = env.encode()
        if len(value) < MIN_SECRET_BYTES:
            raise SecretError(f"BPFLOW_SECRET has {len(value)} bytes; it needs at least"
                              f" {MIN_SECRET_BYTES} (unset it to have one generated in"
                              f" {home() / 'secret'})")
        return value
    path = home() / "secret"
    try:
        value = _read_private(path)
    except (FileNotFoundError, NotADirectoryError):
        value = _generate(path)
    if len(value) < MIN_SECRET_BYTES:
        raise SecretError(f"the secret in {path} has {len(value)} bytes; it needs at least"
                          f" {MIN_SECRET_BYTES} (remove the file to have one generated)")
    return value


def _read_private(path: Path) -> bytes:
    """The secret file's contents, if only its owner may read or change it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):  # none yet: it is made
        raise
    except OSError as exc:
        raise SecretError(f"cannot read the secret file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise SecretError(f"the secret file {path} is not a regular file")
        if mode & 0o077:
            raise SecretError(f"the secret file {path} is open to others (mode"
                              f" {stat.S_IMODE(mode):04o}); chmod 600 {path}")
        folder = path.parent.stat().st_mode
        if folder & 0o022 and not folder & stat.S_ISVTX:  # others could replace the file
            raise SecretError(f"the folder of the secret file, {path.parent}, is writable by"
                              f" others (mode {stat.S_IMODE(folder):04o}); chmod 700"
                              f" {path.parent}")
        return f.read().strip()


def _generate(path: Path) -> bytes:
    """A new random secret in a new file (mode 0600, its folder 0700 when made here);
    another process making it at the same moment wins, and its secret is used."""
    folder = path.parent
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(folder, 0o700)  # whatever the umask
        value = secrets.token_urlsafe(48).encode()
        # Written whole under a private name, then linked into place: another process
        # sees either no file or the complete secret, never an empty one.
        draft = path.with_name(f".secret-{os.getpid()}-{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(value)
                f.flush()
                os.fsync(f.fileno())
            os.link(draft, path)
        except FileExistsError:  # another process won the race: use its secret
            value = _read_private(path)
        finally:
            draft.unlink(missing_ok=True)
    except OSError as exc:
        raise SecretError(f"cannot create the secret file {path}:"
                          f" {exc.strerror or exc} (set BPFLOW_HOME to a folder this user"
                          " may write, or BPFLOW_SECRET)") from None
    return value


def derive(secret: bytes, purpose: str) -> bytes:
    """The key of one purpose (`bookmarks`, `approvals`, `jwt`, ...)."""
    return hmac.new(secret, f"bpflow:{purpose}".encode(), hashlib.sha256).digest()
