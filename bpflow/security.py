"""The server secret (HMAC for bookmarks and approvals, JWT signing) and password hashes.

The secret comes from `BPFLOW_SECRET`, else from a file generated once with owner-only
permissions (`$BPFLOW_HOME/secret`, default `.bpflow/secret`). Keys for each purpose are
derived from it, so one leaked purpose key does not reveal the others.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1


def home() -> Path:
    return Path(os.environ.get("BPFLOW_HOME", ".bpflow"))


def load_secret() -> bytes:
    env = os.environ.get("BPFLOW_SECRET")
    if env:
        return env.encode()
    path = home() / "secret"
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = secrets.token_urlsafe(48).encode()
    # Written whole under a private name, then linked into place: another process sees
    # either no file or the complete secret, never an empty one.
    draft = path.with_name(f".secret-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(value)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(draft, path)
    except FileExistsError:  # another process won the race: use its secret
        value = path.read_bytes().strip()
    finally:
        draft.unlink()
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
