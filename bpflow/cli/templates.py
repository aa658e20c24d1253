"""`bpflow import DIR`: the *.json templates of a folder loaded as versions (SPEC §7)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bpflow.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNREADABLE,
    Subparsers,
    add_tenant,
    add_url,
    command,
    refuse,
    tenant_store,
)


def register(sub: Subparsers) -> None:
    imp = command(sub, "import", _run, "load the *.json templates of DIR as versions")
    imp.add_argument("dir", metavar="DIR")
    imp.add_argument("--new-only", action="store_true",
                     help="add only templates whose name is unknown (as the app does at"
                          " start-up), leaving known ones as they are")
    add_tenant(imp, "the tenant the templates belong to")
    add_url(imp)


def _run(args: argparse.Namespace) -> int:
    return import_dir(args.dir, args.url, args.new_only, args.tenant)


def import_dir(folder: str, url: str | None, only_new: bool = False,
               tenant: str = "default") -> int:
    from engine.errors import DefinitionError
    if not Path(folder).is_dir():
        return refuse(f"{folder} is not a folder", EXIT_UNREADABLE)
    try:
        store = tenant_store(url, tenant)
    except ValueError as exc:
        return refuse(exc)
    try:
        for name, version, created in store.import_dir(folder, only_new):
            print(f"{name}: version {version}" + (" (new)" if created else " (unchanged)"))
    except DefinitionError as exc:
        return refuse(f"a template is invalid: {exc}", EXIT_INVALID)
    except (OSError, ValueError) as exc:
        return refuse(f"cannot import {folder}: {exc}", EXIT_UNREADABLE)
    finally:
        store.close()
    return EXIT_OK
