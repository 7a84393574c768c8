"""Whether each upstream answers, for the dashboard. Checks run in the background, at most one per upstream at a
time in a worker, and their last result is shared by every page for `ttl` seconds: a page never waits for a
check (a trickling or hung upstream would hold it), it shows the last result, or that the first is under way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from toolproxy.upstream.client import ModelsCheck, public_url

logger = logging.getLogger(__name__)

TTL_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Health:
    """What a page shows for one upstream: `ok` is None until its first check is in."""

    url: str  # scheme://host:port, never a path or credentials
    ok: bool | None
    detail: str
    age: float | None = None  # seconds since the result shown was found


@dataclass(frozen=True, slots=True)
class _Found:
    check: ModelsCheck
    at: float  # time.monotonic()


class HealthChecks:
    def __init__(self, check: Callable[[str], ModelsCheck], ttl: float = TTL_SECONDS) -> None:
        self._check = check
        self._ttl = ttl
        self._found: dict[str, _Found] = {}
        self._running: set[str] = set()
        self._lock = threading.Lock()  # gevent's under gunicorn; held only to read or write the two above

    def current(self, urls: Iterable[str]) -> list[Health]:
        """Each upstream's last known health, at once; a background check starts for each result that is
        missing or older than `ttl`, unless one is running already."""
        now = time.monotonic()
        with self._lock:
            wanted = sorted(set(urls))
            due = [url for url in wanted if url not in self._running
                   and (url not in self._found or now - self._found[url].at >= self._ttl)]
            self._running.update(due)
            found = [(url, self._found.get(url)) for url in wanted]
        for url in due:
            # Under gunicorn's gevent worker a patched Thread is a greenlet on the hub: no OS thread per check.
            threading.Thread(target=self._refresh, args=(url,), name="toolproxy-health", daemon=True).start()
        return [_shown(url, result, now) for url, result in found]

    def _refresh(self, url: str) -> None:
        try:
            check = self._check(url)
        except Exception:  # an outer edge: a failed check is a result, never a dead worker
            logger.exception("health check of %s failed", public_url(url))
            check = ModelsCheck(False, "the check failed; the proxy's log has the details")
        with self._lock:
            before = self._found.get(url)
            self._found[url] = _Found(check, time.monotonic())
            self._running.discard(url)
        if before is None or before.check.ok != check.ok:
            level = logging.INFO if check.ok else logging.WARNING
            logger.log(level, "upstream %s %s (%s)", public_url(url), "answers" if check.ok else "does not answer",
                       check.detail)


def _shown(url: str, result: _Found | None, now: float) -> Health:
    if result is None:
        return Health(public_url(url), None, "checking")
    return Health(public_url(url), result.check.ok, result.check.detail, max(0.0, now - result.at))
