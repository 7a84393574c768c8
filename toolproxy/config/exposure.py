"""Whether a bind address would expose an open proxy: anyone on the network could use the upstream."""

from __future__ import annotations

import ipaddress

from toolproxy.config.settings import Settings


def exposure_problem(hosts: list[str], settings: Settings) -> str | None:
    """Why binding these hosts would expose an open proxy, or None when it is safe or explicitly allowed."""
    if settings.api_keys or settings.allow_open:
        return None
    exposed = [host for host in hosts if not _is_loopback(host)]
    if not exposed:
        return None
    return (
        f"refusing to listen on {', '.join(exposed)} without API keys: anyone on the network could use the "
        "upstream. Set TOOLPROXY_API_KEYS, bind 127.0.0.1, or set TOOLPROXY_ALLOW_OPEN=1 to accept the risk."
    )


def _is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
