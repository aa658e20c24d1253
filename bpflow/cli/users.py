"""`bpflow user add|password|disable`: the people of a tenant (SPEC §7, §13, §17): an
account with its roles and a password read from stdin or generated; a new password for an
account (read or generated alike), which ends every session of theirs; an account
disabled, never deleted."""

from __future__ import annotations

import argparse

from bpflow import admin
from bpflow.access import ROLES, USER
from bpflow.cli.common import (
    EXIT_OK,
    Subparsers,
    add_password_stdin,
    add_tenant,
    add_url,
    command,
    read_password,
    refuse,
    tenant_store,
)
from bpflow.security import normal_username


def register(sub: Subparsers) -> None:
    user = sub.add_parser("user", help="users")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    add = command(user_sub, "add", _add, "add a user")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--role", action="append", metavar="ROLE",
                     help=f"a role: {', '.join(ROLES)} or a custom one such as finance"
                          " (repeatable or comma-separated; default: user)")
    add_password_stdin(add, "read the password from stdin (otherwise one is generated)")
    add_tenant(add, "the tenant the user belongs to")
    add_url(add)
    pw = command(user_sub, "password", _password,
                 "give a user a new password (their sessions end)")
    pw.add_argument("name", metavar="NAME")
    add_password_stdin(pw, "read the new password from stdin (otherwise one is generated)")
    add_tenant(pw, "the user's tenant")
    add_url(pw)
    off = command(user_sub, "disable", _disable, "disable a user (users are never deleted)")
    off.add_argument("name", metavar="NAME")
    add_tenant(off, "the user's tenant")
    add_url(off)


def _add(args: argparse.Namespace) -> int:
    return user_add(args.name, role_names(args.role), args.password_stdin, args.url,
                    args.tenant)


def _password(args: argparse.Namespace) -> int:
    return user_password(args.name, args.password_stdin, args.url, args.tenant)


def _disable(args: argparse.Namespace) -> int:
    return user_disable(args.name, args.url, args.tenant)


def role_names(given: list[str] | None) -> list[str]:
    """The roles of `--role` options, each one or several comma-separated (`user` when
    none is given); their names are checked by the store."""
    names = [r.strip() for option in given or () for r in option.split(",")]
    return [r for r in names if r] or ([USER] if not given else [])


def user_add(name: str, roles: list[str], password_stdin: bool, url: str | None,
             tenant: str = "default") -> int:
    try:
        password, generated = read_password(password_stdin)
        store = tenant_store(url, tenant)
    except ValueError as exc:
        return refuse(exc)
    try:
        admin.add_user(store, None, name, password, roles)
    except ValueError as exc:
        return refuse(exc)
    finally:
        store.close()
    where = "" if tenant == "default" else f" in tenant {tenant}"
    print(f"user {normal_username(name)} added{where} with roles"
          f" {', '.join(sorted(set(roles)))}")
    if generated:
        print(f"password: {password}")
    return EXIT_OK


def user_disable(name: str, url: str | None, tenant: str = "default") -> int:
    """Disable an account (users are never deleted): no more sign-ins, its tokens are
    refused within seconds."""
    from bpflow.errors import NotFound
    try:
        store = tenant_store(url, tenant)
    except ValueError as exc:
        return refuse(exc)
    try:
        changed = admin.disable_user(store, None, name)
    except NotFound as exc:
        return refuse(exc)
    finally:
        store.close()
    print(f"user {normal_username(name)} " + ("disabled" if changed else "was disabled already"))
    return EXIT_OK


def user_password(name: str, password_stdin: bool, url: str | None,
                  tenant: str = "default") -> int:
    """A new password for an account (as an admin's reset: the rule of every password,
    every session of theirs ends)."""
    from bpflow.accounts import reset_password
    from bpflow.errors import NotFound
    from bpflow.forms import FormError
    try:
        password, generated = read_password(password_stdin)
        store = tenant_store(url, tenant)
    except ValueError as exc:
        return refuse(exc)
    try:
        reset_password(store, name, password)
    except FormError as exc:
        return refuse(exc.errors["password"])
    except NotFound as exc:
        return refuse(exc)
    finally:
        store.close()
    print(f"user {normal_username(name)} has a new password; their sessions have ended")
    if generated:
        print(f"password: {password}")
    return EXIT_OK
