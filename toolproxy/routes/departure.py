"""Noticing a client that leaves while the proxy waits on the upstream and writes nothing.

A gevent worker learns of a closed connection only when a write fails, and a non-streaming answer writes nothing
until the upstream is done: vLLM would generate on for nobody. So the wait runs under a watch on the client's
socket (gunicorn hands it to the app as `gunicorn.socket`): the request body has been read, so the socket turns
readable only when the client closes it (EOF) or resets it. The waiting greenlet is then interrupted, which
closes its upstream connection, and the request ends as `client_disconnected`.

The watch is an event-loop watcher on the socket, not a greenlet: the way `gevent.Timeout` interrupts a wait,
it throws into the waiting greenlet from the loop. Two greenlets per request (the work and a watcher) cost a
twentieth of a small request's time.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, TypeVar

import gevent

from toolproxy.errors import ClientDisconnected

T = TypeVar("T")


class _Departed(BaseException):
    """Thrown into the waiting greenlet; a BaseException, so no `except Exception` on the way can swallow it."""


def call_watching(work: Callable[[], T], client: Any) -> T:
    """`work()`, abandoned with ClientDisconnected as soon as `client` (a socket, or None) goes away."""
    if not isinstance(client, socket.socket):
        return work()
    waiting = gevent.getcurrent()
    watch = gevent.get_hub().loop.io(client.fileno(), 1)  # 1: readable

    def readable() -> None:
        watch.stop()  # once: bytes of a pipelined request are not a departure, and nothing more is learnt here
        if _has_left(client):
            waiting.throw(_Departed)

    watch.start(readable)
    try:
        return work()
    except _Departed:
        raise ClientDisconnected("the client closed the connection before the answer was ready") from None
    finally:
        watch.stop()
        watch.close()


def _has_left(client: socket.socket) -> bool:
    """Whether a readable socket is at its end (or reset). Peeked on a non-blocking duplicate: this runs in the
    event loop, which must never wait, and gunicorn's socket keeps its own settings."""
    try:
        with socket.fromfd(client.fileno(), client.family, client.type) as peek:
            peek.setblocking(False)
            return not peek.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset by the peer: gone
