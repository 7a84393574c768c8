"""The cap on in-flight upstream requests: a local server has a fixed number of slots, and a request it cannot
start at once only waits in its own queue, holding a connection. A short bounded queue here, then 503 with
`Retry-After`, tells clients (the OpenAI SDKs honour it) to come back instead of piling up.

Per worker: with several gunicorn workers the cap applies to each.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from toolproxy.errors import Overloaded

RETRY_AFTER_SECONDS = 1


class Ticket:
    """One admitted request; `leave` frees its slot, once, however often it is called."""

    def __init__(self, gate: Gate) -> None:
        self._gate: Gate | None = gate

    def leave(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.release()


class Gate:
    def __init__(self, limit: int, queue_size: int, queue_timeout: float,
                 on_queue: Callable[[int], None] = lambda change: None) -> None:
        self._slots = threading.Semaphore(limit)  # patched by gevent in the worker: waits are cooperative
        self._lock = threading.Lock()
        self._waiting = 0
        self._queue_size = queue_size
        self._queue_timeout = queue_timeout
        self._on_queue = on_queue  # told +1 and -1 as a request starts and ends its wait (the metrics' gauge)

    def enter(self) -> Ticket:
        """A slot at once, or after waiting in the queue up to `queue_timeout`; else Overloaded (503)."""
        if self._slots.acquire(blocking=False):
            return Ticket(self)
        with self._lock:
            if self._waiting >= self._queue_size:
                raise _overloaded("the upstream is busy and the queue is full")
            self._waiting += 1
        self._on_queue(1)
        try:
            if not self._slots.acquire(timeout=self._queue_timeout):
                raise _overloaded(f"the upstream stayed busy for {self._queue_timeout:g} seconds")
        finally:
            with self._lock:
                self._waiting -= 1
            self._on_queue(-1)
        return Ticket(self)

    def release(self) -> None:
        self._slots.release()


def _overloaded(message: str) -> Overloaded:
    return Overloaded(f"{message}; try again shortly", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
