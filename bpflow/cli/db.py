"""`bpflow db upgrade`: create or migrate the schema of the database (SPEC §7)."""

from __future__ import annotations

import argparse

from bpflow.cli.common import EXIT_OK, Subparsers, add_url, command


def register(sub: Subparsers) -> None:
    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    add_url(command(db_sub, "upgrade", _upgrade, "create or migrate the schema"))


def _upgrade(args: argparse.Namespace) -> int:
    return db_upgrade(args.url)


def db_upgrade(url: str | None) -> int:
    """Says what it did: created the database, found it up to date or upgraded it."""
    from sqlalchemy.engine import make_url

    from bpflow.store.public import database_url, upgrade
    before, after = upgrade(url)
    where = make_url(database_url(url)).render_as_string(hide_password=True)
    if before is None:
        print(f"database {where} created (schema {after})")
    elif before == after:
        print(f"database {where} is up to date (schema {after})")
    else:
        print(f"database {where} upgraded from schema {before} to {after}")
    return EXIT_OK
