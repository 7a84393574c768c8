"""requests' and urllib3's failures in the client's terms, translated once for the client and its streams, and
each upstream error knowing the URL that was called: the log line and the transform log name it (an operator with
several upstreams must know which failed); the client's message does not (it may be an internal host)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import NewConnectionError, ReadTimeoutError

from toolproxy.errors import UpstreamDisconnected, UpstreamError, UpstreamTimeout, UpstreamUnavailable


@contextlib.contextmanager
def calling(url: str) -> Iterator[None]:
    """Any upstream error raised within names `url`."""
    try:
        yield
    except UpstreamError as error:
        raise naming(error, url) from None


def naming(error: UpstreamError, url: str) -> UpstreamError:
    """The error, knowing the URL called (the first one named: never credentials, a query or a fragment)."""
    error.upstream_url = error.upstream_url or shown_url(url)
    return error


def shown_url(url: str) -> str:
    """scheme://host:port/path of a URL: what it is safe to name in an error, a log line or a page."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"


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
