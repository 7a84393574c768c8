"""A deadline for a whole upstream exchange. `requests` only knows per-read timeouts: an upstream that sends a
byte every few seconds never trips one, so the total time is enforced here (nginx and Envoy separate the two too).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import gevent

from toolproxy.errors import UpstreamTimeout


@contextmanager
def enforced(deadline: float | None) -> Iterator[None]:
    """Under gevent, the block is cut at `deadline` (a `time.monotonic()` value) wherever it waits: connect,
    headers, body. Without a running hub the reader's own checks (`check`) still end it between reads."""
    if deadline is None:
        yield
        return
    timer = gevent.Timeout(max(0.0, deadline - time.monotonic()))
    timer.start()
    try:
        yield
    except gevent.Timeout as fired:
        if fired is not timer:
            raise
        raise expired() from None
    finally:
        timer.cancel()


def capped(timeouts: tuple[float, float], deadline: float | None) -> tuple[float, float]:
    """(connect, read) timeouts for `requests`, neither outlasting what is left before the deadline."""
    if deadline is None:
        return timeouts
    left = max(0.01, deadline - time.monotonic())
    return min(timeouts[0], left), min(timeouts[1], left)


def check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise expired()


def expired() -> UpstreamTimeout:
    return UpstreamTimeout("the upstream did not answer within the request's time limit")
