"""The server secret (HMAC for bookmarks and approvals, JWT signing) and password hashes.

The secret comes from `BPFLOW_SECRET`, else from a file generated once with owner-only
permissions (`$BPFLOW_HOME/secret`, default `.bpflow/secret`, in a folder only its owner
may enter). Keys for each purpose are derived from it, so one leaked purpose key does not
reveal the others. A secret that could be guessed or read by others is refused
(`SecretError`): shorter than 32 bytes, or a file others may read or replace.

Usernames are NFKC-normalised and made of letters, digits, marks (not first) and
`. _ - @ + '`: no spaces, control or invisible characters, so no two accounts look alike
through a trailing newline or a zero-width character.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import stat
import unicodedata
from pathlib import Path

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
MIN_SECRET_BYTES = 32
USERNAME_MAX = 100
USERNAME_PUNCTUATION = frozenset("._-@+'")
# Letters (category L*) that show as nothing: Hangul fillers; and the blank Braille cell.
INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


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
    return hmac.new(secret, f"bpflow:{purpose}".encode(), hashlib.sha256).digest()


def hash_password(password: str) -> str:
    """scrypt with a random salt, in a self-describing string."""
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P,
                            dklen=32)
    b64 = base64.b64encode
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${b64(salt).decode()}${b64(digest).decode()}"


def check_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r),
                             p=int(p), dklen=len(expected))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def normal_username(name: str) -> str:
    """The form a username is stored and looked up in (NFKC)."""
    return unicodedata.normalize("NFKC", name) if isinstance(name, str) else ""


def username_problem(name: str) -> str | None:
    """Why `name` (normalised) cannot be a username, or None."""
    if not 1 <= len(name) <= USERNAME_MAX:
        return f"a username has 1 to {USERNAME_MAX} characters"
    for i, ch in enumerate(name):
        kind = unicodedata.category(ch)
        if ch in INVISIBLE_LETTERS or not (
                kind[0] in "LN" or ch in USERNAME_PUNCTUATION or (kind[0] == "M" and i)):
            return (f"a username has letters, digits and {' '.join(sorted(USERNAME_PUNCTUATION))}"
                    f" only (not {unicodedata.name(ch, f'U+{ord(ch):04X}')})")
    return None


def valid_username(name: str) -> str:
    """`name` normalised, if it can be a username; ValueError otherwise."""
    normal = normal_username(name)
    problem = username_problem(normal)
    if problem:
        raise ValueError(problem)
    return normal
