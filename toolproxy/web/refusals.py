"""Requests refused before any route ran: a wrong key (401), an unknown host name (403), a body too slow (408) or
too large (413), a body that is not JSON (415). No route makes a record of them, so they are counted here, every
one in `/metrics` (`toolproxy_requests_total{route="refused"}`), and the first few each minute are written to the
transform log, so the dashboard shows them while a flood cannot fill it (a record says how many it left out)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from flask import g, request

from toolproxy.errors import ProxyError, UpstreamError
from toolproxy.observe.record import new_record, new_request_id
from toolproxy.routes.proxy import Proxy

logger = logging.getLogger(__name__)
# The codes web/ gives these refusals (api.py, hosts.py, body.py, browsers.py, application.py's 413).
REFUSAL_CODES = frozenset({"invalid_api_key", "host_not_allowed", "request_timeout", "request_too_large",
                           "unsupported_media_type"})
RECORDS_PER_MINUTE = 10
REFUSALS = "toolproxy.refusals"  # app.extensions key
MAX_CLIENT_CHARS = 200


class Refusals:
    def __init__(self, proxy: Proxy, clock: Callable[[], float] = time.monotonic,
                 per_minute: int = RECORDS_PER_MINUTE) -> None:
        self._proxy = proxy
        self._clock = clock
        self._per_minute = per_minute
        self._minute = clock()
        self._written = 0  # records written in the minute that began at `_minute`
        self._left_out = 0  # refusals counted but not recorded since the last record
        self._lock = threading.Lock()

    def note(self, error: ProxyError) -> None:
        """Count `error` if it refused the request before routing; record it if this minute has room."""
        if error.code not in REFUSAL_CODES or isinstance(error, UpstreamError):
            return  # an upstream's own 401 passed on, or an error of a route, which has its record
        g.refused = True
        try:
            self._count(error)
        except Exception:  # an outer edge: counting a refusal must never change its answer into a 500
            logger.exception("could not count a refused request")

    def _count(self, error: ProxyError) -> None:
        self._proxy.metrics.refused(error.status, getattr(g.get("front"), "protocol", ""),
                                    request.headers.get("User-Agent", ""))
        left_out = self._admit()
        if left_out is None:
            return
        record = new_record(request.headers.get("User-Agent", "")[:MAX_CLIENT_CHARS], request.remote_addr or "",
                            _declared_length(), request_id=g.setdefault("request_id", new_request_id()),
                            client_request_id=g.get("client_request_id", ""),
                            protocol=getattr(g.get("front"), "protocol", "chat"))
        record.route, record.status, record.error, record.error_code = "refused", error.status, error.message, \
            error.code
        if left_out:
            record.issues.append(f"{left_out} more refusals came since the last one recorded: counted in /metrics, "
                                 f"not recorded (at most {self._per_minute} a minute are)")
        self._proxy.translog.add(record)

    def _admit(self) -> int | None:
        """How many refusals went unrecorded before this one, or None when this minute's records are used up."""
        with self._lock:
            now = self._clock()
            if now - self._minute >= 60:
                self._minute, self._written = now, 0
            if self._written >= self._per_minute:
                self._left_out += 1
                return None
            self._written += 1
            left_out, self._left_out = self._left_out, 0
            return left_out


def _declared_length() -> int:
    text = request.headers.get("Content-Length", "")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else 0
