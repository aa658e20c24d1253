"""`bpflow seed-demo`: on a first run, demo users with generated passwords, kept in a
private file beside the server secret."""

from __future__ import annotations

import argparse
from pathlib import Path

from bpflow.cli.common import EXIT_OK, Subparsers, add_url, command

DEMO_USERS = {"admin": ["admin"], "alice": ["user"], "approver": ["approver"],
              "finance": ["user", "finance"]}


def register(sub: Subparsers) -> None:
    add_url(command(sub, "seed-demo", _run, "first run: add demo users (admin, alice,"
                    " approver) with generated passwords"))


def _run(args: argparse.Namespace) -> int:
    return seed_demo(args.url)


def demo_users_file(url: str | None) -> tuple[Path, str]:
    """Where the demo users' passwords of the database at `url` are kept, and the line
    naming the database that begins the file: $BPFLOW_HOME/demo-users.txt, unless it
    holds another database's, then a file of this database's own beside it."""
    import hashlib

    from sqlalchemy.engine import make_url

    from bpflow.security import home
    from bpflow.store.public import database_url
    header = "# " + make_url(database_url(url)).render_as_string(hide_password=True)
    path = home() / "demo-users.txt"
    try:
        first = path.read_text().splitlines()[0]
    except (OSError, IndexError):
        return path, header
    if first == header or not first.startswith("# "):  # ours (or from before the header)
        return path, header
    digest = hashlib.sha256(header.encode()).hexdigest()[:12]
    return home() / f"demo-users-{digest}.txt", header


def seed_demo(url: str | None) -> int:
    """First run only (no users yet): demo users with generated passwords, written to
    $BPFLOW_HOME/demo-users.txt (owner-only; the first line names the database) and
    printed. Another database's are kept: `demo_users_file`."""
    import os
    import secrets

    from bpflow.store import Store
    path, header = demo_users_file(url)
    store = Store(url)
    try:
        if any(store.username_taken(name) for name in DEMO_USERS) or store.has_users():
            print("users exist already: no demo users added"
                  + (f" (the demo users' passwords are in {path})" if path.exists() else ""))
            return EXIT_OK
        lines = []
        for name, roles in DEMO_USERS.items():
            password = secrets.token_urlsafe(9)
            store.add_user(name, password, roles)
            lines.append(f"{name:<10} {password:<14} {', '.join(roles)}")
    finally:
        store.close()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join([header, *lines]) + "\n")
    print(f"demo users (also in {path}):")
    print("\n".join("  " + line for line in lines))
    return EXIT_OK
