"""The `bpflow` command line (SPEC §7); heavy imports wait for the command that needs them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bpflow.access import ROLES, USER
from bpflow.security import normal_username
from engine.analysis import analyze

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2
DEFAULT_TEMPLATE_DIRS = (Path("upload/workflow"), Path(__file__).resolve().parents[1] / "upload"
                         / "workflow")


class Unreadable(Exception):
    pass


class TooLarge(Unreadable):
    """JSON that parses in principle, but is beyond what the reader takes: the analysis's
    `too_large`, reported as an invalid template."""


def read_template(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unreadable(f"{path} is not JSON: {exc.msg} at line {exc.lineno}"
                         f" column {exc.colno}") from exc
    except RecursionError as exc:
        raise TooLarge(f"{path} is nested too deeply (objects and lists) to be read") from exc
    except ValueError as exc:  # an integer of more digits than Python converts
        raise TooLarge(f"{path} holds a number too large to be read (more than"
                       f" {sys.get_int_max_str_digits()} digits)") from exc


def known_templates(dirs: tuple[Path, ...] = DEFAULT_TEMPLATE_DIRS) -> dict[str, Any]:
    """Templates of upload/workflow/ by name, for nested flows named by template."""
    found: dict[str, Any] = {}
    for folder in dirs:
        for file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                body = read_template(file)
            except Unreadable:
                continue
            if isinstance(body, dict) and isinstance(body.get("name"), str):
                found.setdefault(body["name"], body)
    return found


def validate(files: list[str], as_json: bool) -> int:
    bodies: list[tuple[str, Any]] = []
    results: list[dict[str, Any]] = []
    for name in files:
        try:
            bodies.append((name, read_template(Path(name))))
        except Unreadable as exc:
            bodies.append((name, exc))
    registry = known_templates()
    for _, body in bodies:  # templates named together may nest each other
        if isinstance(body, dict) and isinstance(body.get("name"), str):
            registry[body["name"]] = body
    code = EXIT_OK
    for name, body in bodies:
        if isinstance(body, TooLarge):
            code = EXIT_INVALID if code == EXIT_OK else code
            results.append({"file": name, "valid": False, "errors": [
                {"code": "too_large", "path": "", "message": str(body)}], "analysis": None})
            continue
        if isinstance(body, Unreadable):
            code = EXIT_UNREADABLE
            results.append({"file": name, "valid": False, "errors": [
                {"code": "unreadable", "path": "", "message": str(body)}], "analysis": None})
            continue
        report = analyze(body, registry.get)
        if not report.valid and code == EXIT_OK:
            code = EXIT_INVALID
        results.append({"file": name, "valid": report.valid, "errors": report.errors,
                        "analysis": report.analysis})
    if as_json:
        out = results[0] if len(results) == 1 else results
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        for result in results:
            print(_describe(result))
    return code


def _describe(result: dict[str, Any]) -> str:
    if result["errors"] and result["errors"][0]["code"] == "unreadable":
        return f"{result['file']}: unreadable: {result['errors'][0]['message']}"
    if not result["valid"]:
        n = len(result["errors"])
        lines = [f"{result['file']}: invalid ({n} error{'s' * (n != 1)})"]
        lines += [f"  {e['code']:<19} {e['path'] or '/':<28} {e['message']}"
                  for e in result["errors"]]
        return "\n".join(lines)
    a = result["analysis"]
    lines = [f"{result['file']}: valid",
             f"  entries: {', '.join(a['entries'])}   terminal: {a['terminal']}"
             f"   longest path: {a['longest_path']}   width: {a['width']}"]
    columns: dict[int, list[tuple[int, str]]] = {}
    for uri, pos in a["layout"].items():
        columns.setdefault(pos["col"], []).append((pos["row"], uri))
    for col in sorted(columns):
        lines.append(f"  col {col}: " + ", ".join(uri for _, uri in sorted(columns[col])))
    for uri in sorted(a.get("nested", {})):
        nested = a["nested"][uri]
        lines.append(f"  nested in {uri}: entries {', '.join(nested['entries'])},"
                     f" terminal {nested['terminal']}, longest path {nested['longest_path']}")
    return "\n".join(lines)


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


def import_dir(folder: str, url: str | None, only_new: bool = False,
               tenant: str = "default") -> int:
    from engine.errors import DefinitionError
    if not Path(folder).is_dir():
        print(f"bpflow: {folder} is not a folder", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        store = tenant_store(url, tenant)
    except ValueError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    try:
        for name, version, created in store.import_dir(folder, only_new):
            print(f"{name}: version {version}" + (" (new)" if created else " (unchanged)"))
    except DefinitionError as exc:
        print(f"bpflow: a template is invalid: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except (OSError, ValueError) as exc:
        print(f"bpflow: cannot import {folder}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    finally:
        store.close()
    return EXIT_OK


def role_names(given: list[str] | None) -> list[str]:
    """The roles of `--role` options, each one or several comma-separated (`user` when
    none is given); their names are checked by the store."""
    names = [r.strip() for option in given or () for r in option.split(",")]
    return [r for r in names if r] or ([USER] if not given else [])


def read_password(password_stdin: bool) -> tuple[str, bool]:
    """(password, generated): the first line of stdin with `--password-stdin` (an empty
    one is a ValueError), else a generated one."""
    import secrets
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
        if not password:
            raise ValueError("empty password on stdin")
        return password, False
    return secrets.token_urlsafe(12), True


def tenant_store(url: str | None, tenant: str):
    """The store of `url` seen from `tenant`; ValueError for a tenant that does not exist."""
    from bpflow.store import Store
    store = Store(url)
    if not store.has_tenant(tenant):
        store.close()
        raise ValueError(f"no tenant '{tenant}' (bpflow tenant add creates one)")
    return store.of(tenant)


def user_add(name: str, roles: list[str], password_stdin: bool, url: str | None,
             tenant: str = "default") -> int:
    try:
        password, generated = read_password(password_stdin)
        store = tenant_store(url, tenant)
    except ValueError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    try:
        store.add_user(name, password, roles)
    except ValueError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    finally:
        store.close()
    where = "" if tenant == "default" else f" in tenant {tenant}"
    print(f"user {normal_username(name)} added{where} with roles"
          f" {', '.join(sorted(set(roles)))}")
    if generated:
        print(f"password: {password}")
    return EXIT_OK


QUOTA_OPTIONS = {"max_instances": "instances", "max_templates": "templates",
                 "max_variables_bytes": "variables_bytes"}


def quota_values(args: argparse.Namespace) -> dict[str, int | None]:
    """The quotas named by --max-* options ("none" removes one)."""
    out: dict[str, int | None] = {}
    for option, quota in QUOTA_OPTIONS.items():
        value = getattr(args, option, None)
        if value is None:
            continue
        if value.strip().lower() == "none":
            out[quota] = None
        elif value.strip().isdigit():
            out[quota] = int(value)
        else:
            raise ValueError(f"--{option.replace('_', '-')} takes a whole number or 'none'")
    return out


def tenant_add(name: str, admin: str, password_stdin: bool, quotas: dict[str, int | None],
               url: str | None) -> int:
    from bpflow.store import Store
    from bpflow.tenancy import create_tenant
    try:
        password, generated = read_password(password_stdin)
    except ValueError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    store = Store(url)
    try:
        tenant = create_tenant(store, name, admin, password, quotas)
    except ValueError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    finally:
        store.close()
    print(f"tenant {tenant.tenant} added; its admin is {normal_username(admin)}")
    if generated:
        print(f"password: {password}")
    return EXIT_OK


def tenant_quota(name: str, quotas: dict[str, int | None], url: str | None) -> int:
    try:
        store = tenant_store(url, name)
    except ValueError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    try:
        stored = store.set_quotas(quotas) if quotas else store.quotas()
        used = store.usage()
    except ValueError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    finally:
        store.close()
    print(f"tenant {name}:")
    for quota in ("instances", "templates", "variables_bytes"):
        limit = stored.get(quota)
        use = f"{used[quota]} used, " if quota in used else ""
        print(f"  {quota:<16} {use}quota {'none' if limit is None else limit}")
    return EXIT_OK


def tenant_list(url: str | None) -> int:
    from bpflow.store import Store
    store = Store(url)
    try:
        for name in store.tenant_names():
            used = store.of(name).usage()
            print(f"{name:<20} {used['instances']:>8} running  {used['templates']:>5}"
                  " templates")
    finally:
        store.close()
    return EXIT_OK


def user_disable(name: str, url: str | None, tenant: str = "default") -> int:
    """Disable an account (users are never deleted): no more sign-ins, its tokens are
    refused within seconds."""
    from bpflow.errors import NotFound
    try:
        store = tenant_store(url, tenant)
    except ValueError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    try:
        changed = store.disable_user(name)
    except NotFound as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    finally:
        store.close()
    print(f"user {normal_username(name)} " + ("disabled" if changed else "was disabled already"))
    return EXIT_OK


DEMO_USERS = {"admin": ["admin"], "alice": ["user"], "approver": ["approver"],
              "finance": ["user", "finance"]}


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


def run_worker(url: str | None, once: bool, poll: float, lease: float) -> int:
    import logging
    import signal
    import threading

    from bpflow.store import Store
    from bpflow.worker import Worker
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    store = Store(url)
    worker = Worker(store, lease=lease)
    if once:
        print(f"worked on {worker.run_once()} instance(s)")
        return EXIT_OK
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    worker.run_forever(stop, poll)
    store.close()
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bpflow", description="bpflow business-flow engine")
    sub = parser.add_subparsers(dest="command", required=True)
    val = sub.add_parser("validate", help="analyse template files (SPEC §3)")
    val.add_argument("files", nargs="+", metavar="FILE")
    val.add_argument("--json", action="store_true", help="print the result as JSON")
    url_help = "database URL (default: $DATABASE_URL, else sqlite:///bpflow.db)"
    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="create or migrate the schema")
    up.add_argument("--url", help=url_help)
    imp = sub.add_parser("import", help="load the *.json templates of DIR as versions")
    imp.add_argument("dir", metavar="DIR")
    imp.add_argument("--new-only", action="store_true",
                     help="add only templates whose name is unknown (as the app does at"
                          " start-up), leaving known ones as they are")
    imp.add_argument("--tenant", default="default", metavar="TENANT",
                     help="the tenant the templates belong to (default: default)")
    imp.add_argument("--url", help=url_help)
    user = sub.add_parser("user", help="users")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    add = user_sub.add_parser("add", help="add a user")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--role", action="append", metavar="ROLE",
                     help=f"a role: {', '.join(ROLES)} or a custom one such as finance"
                          " (repeatable or comma-separated; default: user)")
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from stdin (otherwise one is generated)")
    add.add_argument("--tenant", default="default", metavar="TENANT",
                     help="the tenant the user belongs to (default: default)")
    add.add_argument("--url", help=url_help)
    off = user_sub.add_parser("disable", help="disable a user (users are never deleted)")
    off.add_argument("name", metavar="NAME")
    off.add_argument("--tenant", default="default", metavar="TENANT",
                     help="the user's tenant (default: default)")
    off.add_argument("--url", help=url_help)
    ten = sub.add_parser("tenant", help="tenants: organisations served apart (SPEC §12)")
    ten_sub = ten.add_subparsers(dest="tenant_command", required=True)
    tadd = ten_sub.add_parser("add", help="add a tenant and its first admin")
    tadd.add_argument("name", metavar="NAME")
    tadd.add_argument("--admin", required=True, metavar="USER", help="its first admin")
    tadd.add_argument("--password-stdin", action="store_true",
                      help="read the admin's password from stdin (else one is generated)")
    tquota = ten_sub.add_parser("quota", help="show or change a tenant's quotas")
    tquota.add_argument("name", metavar="NAME")
    for parser_ in (tadd, tquota):
        parser_.add_argument("--max-instances", metavar="N|none",
                             help="running instances (running, failed, suspended)")
        parser_.add_argument("--max-templates", metavar="N|none", help="template names")
        parser_.add_argument("--max-variables-bytes", metavar="N|none",
                             help="bytes of variables one instance may store")
        parser_.add_argument("--url", help=url_help)
    tlist = ten_sub.add_parser("list", help="the tenants and what they use")
    tlist.add_argument("--url", help=url_help)
    demo = sub.add_parser("seed-demo", help="first run: add demo users (admin, alice,"
                          " approver) with generated passwords")
    demo.add_argument("--url", help=url_help)
    work = sub.add_parser("worker", help="run due timers, retries, timeouts and HTTP actions")
    work.add_argument("--url", help=url_help)
    work.add_argument("--once", action="store_true", help="one batch, then exit")
    work.add_argument("--poll", type=float, default=0.5, help="idle poll interval (s)")
    work.add_argument("--lease", type=float, default=60.0, help="lease per instance (s)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "validate":
        return validate(args.files, args.json)
    from sqlalchemy.exc import SQLAlchemyError

    from bpflow.security import SecretError
    try:
        if args.command == "db":
            return db_upgrade(args.url)
        if args.command == "import":
            return import_dir(args.dir, args.url, args.new_only, args.tenant)
        if args.command == "user" and args.user_command == "disable":
            return user_disable(args.name, args.url, args.tenant)
        if args.command == "user":
            return user_add(args.name, role_names(args.role), args.password_stdin, args.url,
                            args.tenant)
        if args.command == "tenant" and args.tenant_command == "list":
            return tenant_list(args.url)
        if args.command == "tenant":
            try:
                quotas = quota_values(args)
            except ValueError as exc:
                print(f"bpflow: {exc}", file=sys.stderr)
                return EXIT_INVALID
            if args.tenant_command == "add":
                return tenant_add(args.name, args.admin, args.password_stdin, quotas,
                                  args.url)
            return tenant_quota(args.name, quotas, args.url)
        if args.command == "seed-demo":
            return seed_demo(args.url)
        if args.command == "worker":
            return run_worker(args.url, args.once, args.poll, args.lease)
    except SecretError as exc:
        print(f"bpflow: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except SQLAlchemyError as exc:
        print(f"bpflow: database error: {str(exc).splitlines()[0]}"
              " (did you run `bpflow db upgrade`?)", file=sys.stderr)
        return EXIT_UNREADABLE
    return EXIT_INVALID  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
