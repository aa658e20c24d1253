"""What the command groups share: the exit codes, the options several commands take
(each defined here once), the one way a refusal is said, and the store seen from a
tenant. Heavy imports wait for the command that needs them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from bpflow.store import Store

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2
URL_HELP = "database URL (default: $DATABASE_URL, else sqlite:///bpflow.db)"

Handler = Callable[[argparse.Namespace], int]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def command(sub: Subparsers, name: str, handler: Handler, help: str,
            database: bool = True) -> argparse.ArgumentParser:
    """A subcommand run by `handler(args)`. One that opens the database (`database`)
    has the server secret checked before it runs, as the server does (`cli.main`)."""
    parser = sub.add_parser(name, help=help)
    parser.set_defaults(func=handler, opens_database=database)
    return parser


def add_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help=URL_HELP)


def add_tenant(parser: argparse.ArgumentParser, whose: str) -> None:
    parser.add_argument("--tenant", default="default", metavar="TENANT",
                        help=f"{whose} (default: default)")


def add_password_stdin(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--password-stdin", action="store_true", help=help)


def refuse(problem: object, code: int = EXIT_INVALID) -> int:
    """Say on stderr why a command did nothing; its exit code."""
    print(f"bpflow: {problem}", file=sys.stderr)
    return code


def read_password(password_stdin: bool) -> tuple[str, bool]:
    """(password, generated): the first line of stdin with `--password-stdin` (an empty
    one, or one breaking the rule of every password, is a ValueError), else a generated
    one."""
    import secrets

    from bpflow.accounts import password_problem
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
        if not password:
            raise ValueError("empty password on stdin")
        problem = password_problem(password)
        if problem:
            raise ValueError(str(problem))
        return password, False
    return secrets.token_urlsafe(12), True


def tenant_store(url: str | None, tenant: str) -> Store:
    """The store of `url` seen from `tenant`; ValueError for a tenant that does not exist."""
    from bpflow.store import Store
    store = Store(url)
    if not store.has_tenant(tenant):
        store.close()
        raise ValueError(f"no tenant '{tenant}' (bpflow tenant add creates one)")
    return store.of(tenant)
