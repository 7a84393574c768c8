"""Waiting on the upstream without going silent: a blocking upstream call runs in its own greenlet while the
response generator hands its items on, or a heartbeat when there is nothing to say.

Heartbeats matter twice: clients with idle timeouts keep waiting, and writing one is the only way a gevent
worker learns that the client has gone. When the client goes, gunicorn closes the generator; closing the relay
kills the greenlet, which closes the upstream connection, so vLLM stops generating for nobody.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, cast

import gevent
import gevent.queue

from toolproxy.errors import UpstreamTimeout

T = TypeVar("T")


class Heartbeat:
    """Nothing arrived within the interval."""


class Finished:
    """The producer has no more items."""


HEARTBEAT = Heartbeat()
FINISHED = Finished()
_END = object()
# Items produced but not yet written to the client. Bounded (and so is what `merge` adds to one), so a client that
# stops reading stops the pump, and TCP back-pressure stops the upstream: memory per request stays flat whatever
# the client does.
QUEUE_ITEMS = 8


class Relay(Generic[T]):
    def __init__(self, produce: Callable[[], Iterator[T]], *, deadline_seconds: float,
                 merge: Callable[[T, T], bool] | None = None) -> None:
        """`merge(queued, item)` may add an item to the last one still queued (returning True), so that what
        was read while the consumer was busy is handed over in one piece, not one queue round each."""
        self._deadline = time.monotonic() + deadline_seconds
        self._deadline_seconds = deadline_seconds
        self._queue = gevent.queue.Queue(QUEUE_ITEMS)
        self._merge = merge
        self._greenlet = gevent.spawn(self._pump, produce)
        self.waited = 0.0  # seconds spent waiting for the producer: the upstream's share of the time

    def next(self, wait: float) -> T | Heartbeat | Finished:
        """The next item; HEARTBEAT after `wait` seconds without one; FINISHED at the end; the producer's
        exception as it was raised; UpstreamTimeout once the whole request has run out of time."""
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            self.close()
            raise UpstreamTimeout(f"the upstream did not finish within {self._deadline_seconds:g} seconds")
        if self._queue.empty():
            started = time.monotonic()
            try:
                kind, value = self._queue.get(timeout=min(wait, remaining))
            except gevent.queue.Empty:
                return HEARTBEAT
            finally:
                self.waited += time.monotonic() - started
        else:
            kind, value = self._queue.get_nowait()
        if kind is _END:
            return FINISHED
        if isinstance(value, BaseException):
            raise value
        return cast(T, value)

    def has_ready(self) -> bool:
        """Whether `next` would answer at once with something the producer already handed over."""
        return not self._queue.empty()

    def close(self) -> None:
        if not self._greenlet.dead:
            self._greenlet.kill(block=True, timeout=2)

    def _pump(self, produce: Callable[[], Iterator[T]]) -> None:
        try:
            first, queued = True, None
            for item in produce():
                # The last item put is still queued while the queue is not empty (first in, first out), and no
                # other greenlet runs between this check and the merge.
                if queued is not None and self._merge and not self._queue.empty() and self._merge(queued, item):
                    continue
                self._queue.put((None, item))
                queued = item
                if first:
                    # The consumer sends the first item before this greenlet works through the rest of the read
                    # it came in (a fast upstream's whole answer): the client's first byte does not wait for them.
                    gevent.sleep(0)
                    first = False
        except Exception as error:  # handed to the consumer, who decides how the client hears of it
            self._queue.put((None, error))
        else:
            self._queue.put((_END, None))
