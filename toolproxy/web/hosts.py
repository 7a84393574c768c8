"""Which `Host` names the proxy answers to: the defence against DNS rebinding (Ollama CVE-2024-28224), where a
page on evil.example gets its name resolved to 127.0.0.1 and then talks to the proxy as its own origin.

A rebinding attack needs a public DNS name that the attacker controls, so what has none passes: an IP literal
(`127.0.0.1:8003`, `[::1]`, `10.0.0.5`) and a name without a dot (`localhost`, `gpu-box` on the LAN: public DNS
has no dotless names). Dotted names pass when they are the name the proxy is bound to, this machine's name, or
listed in `allowed_hosts` (`*` turns the check off), so a proxy bound to 0.0.0.0 answers at its IP address and
its host name with no setting, and at `models.example.lan` once that is listed.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from flask import Flask, request

from toolproxy.config.settings import Settings
from toolproxy.errors import InvalidRequest

LOOPBACK_NAMES = ("localhost.localdomain",)  # (dotless loopback names pass anyway)


def install(app: Flask, settings: Settings) -> None:
    """Every request, pages and API alike, is checked before anything else runs."""
    names = allowed_names(settings.bind, settings.allowed_hosts)

    @app.before_request
    def require_known_host() -> None:
        host = request.headers.get("Host", "")
        if not is_allowed(host, names):
            raise InvalidRequest(f"this proxy does not answer to the host name {host[:100]!r}; if it is yours, add "
                                 "it to TOOLPROXY_ALLOWED_HOSTS", status=403, code="host_not_allowed")


def allowed_names(bind: str, extra: Iterable[str]) -> frozenset[str]:
    """Built once per app: the host part of `bind`, this machine's names, loopback names and the allowlist."""
    names = {*LOOPBACK_NAMES, _normalise(_without_port(bind)), _normalise(socket.gethostname())}
    names.update(_normalise(name) for name in extra)
    return frozenset(name for name in names if name)


def is_allowed(host_header: str, names: frozenset[str]) -> bool:
    if "*" in names:
        return True
    host = _normalise(_without_port(host_header.strip()))
    if not host:
        return True  # HTTP/1.0 without Host: the server fills in its bound address, no name to rebind
    return "." not in host or _is_ip(host) or host in names


def _without_port(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host  # no port, or a bare IPv6 address


def _normalise(name: str) -> str:
    return name.strip().strip("[]").rstrip(".").lower()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
