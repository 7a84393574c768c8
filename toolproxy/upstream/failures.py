"""requests' and urllib3's failures in the client's terms, translated once for the client and its streams."""

from __future__ import annotations

import requests
from urllib3.exceptions import NewConnectionError, ReadTimeoutError

from toolproxy.errors import UpstreamDisconnected, UpstreamError, UpstreamTimeout, UpstreamUnavailable


def translate(error: Exception) -> UpstreamError:
    """requests/urllib3 failures in the client's terms; the message names no internal host."""
    if isinstance(error, requests.ConnectTimeout):
        return UpstreamTimeout("the upstream did not accept the connection in time")
    if isinstance(error, (requests.ReadTimeout, ReadTimeoutError, TimeoutError)):
        return UpstreamTimeout("the upstream stopped answering (read timeout)")
    if _is_connect_failure(error):
        return UpstreamUnavailable("the upstream refused the connection or is down")
    return UpstreamDisconnected("the connection to the upstream broke before the answer was complete")


def _is_connect_failure(error: BaseException) -> bool:
    """requests wraps urllib3's NewConnectionError (refused, no route, DNS) a level or two deep."""
    seen: BaseException | None = error
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, NewConnectionError):
            return True
        inner = getattr(seen, "reason", None) or (seen.args[0] if seen.args else None)
        seen = inner if isinstance(inner, BaseException) else None
    return False
