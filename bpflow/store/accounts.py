"""Who an account is, as the store keeps it: the `Caller` a token stands for (its id,
username, roles and tenant), role names, usernames and password hashes. Below the
services because the store builds callers (`Users.account`) and checks what it writes;
what a caller may do is `bpflow.access`'s, the only module deciding by roles.

Usernames are NFKC-normalised and made of letters, digits, marks (not first) and
`. _ - @ + '`: no spaces, control or invisible characters, so no two accounts look alike
through a trailing newline or a zero-width character.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.messages import N_
from engine.model import ROLE_NAME

ADMIN, APPROVER, USER = "admin", "approver", "user"
INTEGRATION = "integration"  # service accounts of the systems around bpflow (SPEC §11)
DEFAULT_TENANT = "default"  # a fresh install's one tenant (SPEC §12)
ROLES = (USER, APPROVER, ADMIN)  # built in; admins may name others (SPEC §6, §10)
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
USERNAME_MAX = 100
USERNAME_PUNCTUATION = frozenset("._-@+'")
# Letters (category L*) that show as nothing: Hangul fillers; and the blank Braille cell.
INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


@dataclass(frozen=True, slots=True)
class Standing:
    """Someone the caller is the substitute of (SPEC §15): their id and username, from
    `starts` until `ends`, for the `templates` named (None: every template)."""

    user_id: int
    username: str
    starts: datetime
    ends: datetime
    templates: tuple[str, ...] | None = None

    def active(self, now: datetime) -> bool:
        return self.starts <= now < self.ends

    def covers(self, template: str | None) -> bool:
        """Whether it applies to work of `template` (None: work of no known template,
        which only a substitute for every template gets)."""
        return self.templates is None or (template is not None and template in self.templates)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking (from a verified token). `generation` is the account's token
    generation: the one a token was issued under, or the users table's now (it grows with
    every change of the password, which ends the sessions of the earlier ones); it is not
    part of who the caller is (equality, hashing)."""

    id: int
    username: str
    roles: tuple[str, ...] = (USER,)
    tenant: str = DEFAULT_TENANT  # the organisation they belong to (SPEC §12)
    generation: int = field(default=0, compare=False)
    # whom they are the substitute of (SPEC §15), as the users table had it with the account
    # (`Users.account`); active or not is asked at the time of use (`standing`)
    stands_for: tuple[Standing, ...] = field(default=(), compare=False)

    @classmethod
    def of(cls, user: Caller | Mapping[str, Any]) -> Caller:
        """A caller from a user record (`{"id", "username", "roles", "tenant"}`)."""
        if isinstance(user, Caller):
            return user
        return cls(user["id"], str(user.get("username", "")),
                   tuple(user.get("roles") or (USER,)),
                   str(user.get("tenant") or DEFAULT_TENANT),
                   int(user.get("generation") or 0))

    def as_user(self) -> dict[str, Any]:
        """The user record an instance keeps of its starter."""
        return {"id": self.id, "username": self.username, "roles": list(self.roles)}

    @property
    def is_admin(self) -> bool:
        return ADMIN in self.roles


def reads_guest_mail(caller: Caller) -> bool:
    """Whether the caller reads their tenant's guest messages (mail with no addressee):
    admins. Asked by the mail queries (`mail.visible_mail`) and by `access.may_read_mail`."""
    return caller.is_admin


def standing(caller: Caller, now: datetime, template: str | None = None,
             any_template: bool = False) -> list[Standing]:
    """The people whose work is offered to the caller now, as their substitute, for work
    of `template` (or of any template with `any_template`: the query filters by template
    itself). Asked by the task and mail queries (`Queries.tasks`, `mail.visible_mail`) and
    by `access`'s rules on substitutes."""
    return [s for s in caller.stands_for
            if s.active(now) and (any_template or s.covers(template))]


def acting_for(substitute: str, user: str) -> str:
    """The name a substitute's action is recorded under: "ann for bob" (SPEC §15), within
    the history's 100 characters."""
    return f"{substitute} for {user}"[:USERNAME_MAX]


def valid_roles(roles: Iterable[str]) -> list[str]:
    """The roles, sorted and unique, if there is at least one and each is a role name:
    one of `ROLES` or a custom one an admin names (`finance`: `ROLE_NAME`); ValueError
    otherwise."""
    out = set(roles)
    if not out:
        raise ValueError(N_("a user needs at least one role"))
    bad = sorted(repr(r) for r in out if not isinstance(r, str) or not ROLE_NAME.match(r))
    if bad:
        raise ValueError(N_("not a role name: %(names)s (a role is a lowercase letter, then up"
                            " to 39 lowercase letters, digits, _ or -; built in: %(roles)s)",
                            names=", ".join(bad), roles=", ".join(ROLES)))
    return sorted(out)


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


_NOBODY: dict[int, str] = {}  # work factor -> a hash of no one's password, made once


def check_nobody(password: str) -> bool:
    """The check a sign-in as a name nobody has costs: one scrypt, as for a real account
    (an unknown name must not answer sooner, or later, than a known one); always False."""
    if SCRYPT_N not in _NOBODY:
        _NOBODY[SCRYPT_N] = hash_password(os.urandom(16).hex())
    check_password(password, _NOBODY[SCRYPT_N])
    return False


def normal_username(name: str) -> str:
    """The form a username is stored and looked up in (NFKC)."""
    return unicodedata.normalize("NFKC", name) if isinstance(name, str) else ""


def username_problem(name: str) -> str | None:
    """Why `name` (normalised) cannot be a username, or None."""
    if not 1 <= len(name) <= USERNAME_MAX:
        return N_("a username has 1 to %(n)s characters", n=USERNAME_MAX)
    for i, ch in enumerate(name):
        kind = unicodedata.category(ch)
        if ch in INVISIBLE_LETTERS or not (
                kind[0] in "LN" or ch in USERNAME_PUNCTUATION or (kind[0] == "M" and i)):
            return N_("a username has letters, digits and %(marks)s only (not %(char)s)",
                      marks=" ".join(sorted(USERNAME_PUNCTUATION)),
                      char=unicodedata.name(ch, f"U+{ord(ch):04X}"))
    return None


def valid_username(name: str) -> str:
    """`name` normalised, if it can be a username; ValueError otherwise."""
    normal = normal_username(name)
    problem = username_problem(normal)
    if problem:
        raise ValueError(problem)
    return normal
