"""`bpflow tenant add|quota|list`: organisations served apart (SPEC §12), each with its
first admin and its quotas."""

from __future__ import annotations

import argparse

from bpflow import admin
from bpflow.cli.common import (
    EXIT_OK,
    Subparsers,
    add_password_stdin,
    add_url,
    command,
    read_password,
    refuse,
    tenant_store,
)
from bpflow.security import normal_username

QUOTA_OPTIONS = {"max_instances": "instances", "max_templates": "templates",
                 "max_variables_bytes": "variables_bytes"}


def register(sub: Subparsers) -> None:
    ten = sub.add_parser("tenant", help="tenants: organisations served apart (SPEC §12)")
    ten_sub = ten.add_subparsers(dest="tenant_command", required=True)
    tadd = command(ten_sub, "add", _add, "add a tenant and its first admin")
    tadd.add_argument("name", metavar="NAME")
    tadd.add_argument("--admin", required=True, metavar="USER", help="its first admin")
    add_password_stdin(tadd, "read the admin's password from stdin (else one is generated)")
    tquota = command(ten_sub, "quota", _quota, "show or change a tenant's quotas")
    tquota.add_argument("name", metavar="NAME")
    for parser in (tadd, tquota):
        parser.add_argument("--max-instances", metavar="N|none",
                            help="running instances (running, failed, suspended)")
        parser.add_argument("--max-templates", metavar="N|none", help="template names")
        parser.add_argument("--max-variables-bytes", metavar="N|none",
                            help="bytes of variables one instance may store")
        add_url(parser)
    add_url(command(ten_sub, "list", _list, "the tenants and what they use"))


def _add(args: argparse.Namespace) -> int:
    try:
        quotas = quota_values(args)
    except ValueError as exc:
        return refuse(exc)
    return tenant_add(args.name, args.admin, args.password_stdin, quotas, args.url)


def _quota(args: argparse.Namespace) -> int:
    try:
        quotas = quota_values(args)
    except ValueError as exc:
        return refuse(exc)
    return tenant_quota(args.name, quotas, args.url)


def _list(args: argparse.Namespace) -> int:
    return tenant_list(args.url)


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
        return refuse(exc)
    store = Store(url)
    try:
        tenant = create_tenant(store, name, admin, password, quotas)
    except ValueError as exc:
        return refuse(exc)
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
        return refuse(exc)
    try:
        stored = admin.set_quotas(store, None, quotas) if quotas else store.quotas()
        used = store.usage()
    except ValueError as exc:
        return refuse(exc)
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
