"""The egress guard: the one place that says whether bpflow may call a URL (webhook
deliveries, `http` actions).

A URL is refused when it is not `http` or `https`, or when its host is, or resolves to, an
address that is not public: loopback, link-local, private, shared (carrier-grade NAT),
multicast, reserved or unspecified, IPv4-mapped ones included. Every address a name
resolves to must pass, since the client may connect to any of them.

`BPFLOW_EGRESS_ALLOW` names what is allowed anyway, separated by commas: host names
(`localhost`, `hooks.internal`), addresses (`127.0.0.1`, `::1`) and networks
(`10.0.0.0/8`). Empty or unset (the default) allows no internal address at all.

The check runs when a webhook is created and again before every call (what a name
resolves to may change).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from functools import lru_cache
from urllib.parse import urlsplit

from engine.messages import N_, message_of

ALLOW_ENV = "BPFLOW_EGRESS_ALLOW"
SCHEMES = ("http", "https")
MAX_URL = 2000
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_SHARED = ipaddress.ip_network("100.64.0.0/10")


class EgressRefused(ValueError):
    """A URL bpflow may not call; the message says why."""


# what makes an address internal, as a refusal names it
KINDS = {"unspecified": N_("unspecified"), "loopback": N_("loopback"),
         "link_local": N_("link-local"), "multicast": N_("multicast"),
         "reserved": N_("reserved"), "private": N_("private")}


@lru_cache(maxsize=8)
def _parse_allow(raw: str) -> tuple[frozenset[str], tuple[Network, ...]]:
    names, networks = set(), []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return frozenset(names), tuple(networks)


def allow_list() -> tuple[frozenset[str], tuple[Network, ...]]:
    """The host names and networks `BPFLOW_EGRESS_ALLOW` names (read on every check, so a
    change of the setting applies without a restart of the worker)."""
    return _parse_allow(os.environ.get(ALLOW_ENV, ""))


def _kind(ip: Address) -> str | None:
    """What makes `ip` internal, or None for a public address."""
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    for kind in ("unspecified", "loopback", "link_local", "multicast", "reserved",
                 "private"):
        if getattr(ip, f"is_{kind}"):
            return KINDS[kind]
    if ip.version == 4 and ip in _SHARED:
        return N_("shared (carrier-grade NAT)")
    return None if ip.is_global else N_("non-public")


def _resolve(host: str, port: int) -> list[Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise EgressRefused(N_("host %(host)s does not resolve: %(error)s", host=host,
                               error=str(exc))) from None
    found: list[Address] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in found:
            found.append(ip)
    return found


def check(url: str) -> list[Address]:
    """The addresses `url`'s host resolves to, all allowed; EgressRefused otherwise."""
    if len(url) > MAX_URL:
        raise EgressRefused(N_("the URL is longer than %(most)s characters", most=MAX_URL))
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise EgressRefused(N_("not a valid URL: %(error)s", error=str(exc))) from None
    if parts.scheme.lower() not in SCHEMES:
        raise EgressRefused(N_("only http and https URLs may be called, not %(url)s",
                               url=repr(url[:80])))
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise EgressRefused(N_("the URL has no host"))
    names, networks = allow_list()
    addresses = _resolve(host, port or (443 if parts.scheme.lower() == "https" else 80))
    if host.lower() in names:
        return addresses
    for ip in addresses:
        kind = _kind(ip)
        if kind is None or any(ip.version == n.version and ip in n for n in networks):
            continue
        if str(ip) == host.strip("[]"):
            raise EgressRefused(N_("host %(host)s is a %(kind)s address; bpflow calls only"
                                   " public addresses unless %(setting)s allows it",
                                   host=host, kind=kind, setting=ALLOW_ENV))
        raise EgressRefused(N_("host %(host)s resolves to %(ip)s, which is a %(kind)s address;"
                               " bpflow calls only public addresses unless %(setting)s allows"
                               " it", host=host, ip=str(ip), kind=kind, setting=ALLOW_ENV))
    return addresses


def refusal(url: str) -> str | None:
    """Why `url` may not be called, or None when it may."""
    try:
        check(url)
    except EgressRefused as exc:
        return message_of(exc)
    return None
