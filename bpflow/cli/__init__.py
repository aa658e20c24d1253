"""The `bpflow` command line (SPEC §7): one module per group of commands, each registering
its subcommands with their handlers (`register(subparsers)`, `set_defaults(func=...)`);
`main` parses, refuses a command that opens the database when the server secret is
weak (as the server does), runs the handler and turns a refusal into a message and an
exit code. Heavy imports wait for the command that needs them."""

from __future__ import annotations

import argparse

from bpflow.cli import db, demo, templates, tenants, users, validate, worker
from bpflow.cli.common import EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE, refuse

__all__ = ["EXIT_INVALID", "EXIT_OK", "EXIT_UNREADABLE", "build_parser", "main"]

GROUPS = (validate, db, templates, users, tenants, demo, worker)  # in the order of `--help`


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bpflow", description="bpflow business-flow engine")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.opens_database:
        return args.func(args)
    from sqlalchemy.exc import SQLAlchemyError

    from bpflow.security import SecretError, load_secret
    try:
        load_secret()  # the server's check (SPEC §13): a weak secret opens no database
        return args.func(args)
    except SecretError as exc:
        return refuse(exc, EXIT_UNREADABLE)
    except SQLAlchemyError as exc:
        return refuse(f"database error: {str(exc).splitlines()[0]}"
                      " (did you run `bpflow db upgrade`?)", EXIT_UNREADABLE)

