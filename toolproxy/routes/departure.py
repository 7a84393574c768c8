"""Noticing a client that leaves while the proxy waits on the upstream and writes nothing.

A gevent worker learns of a closed connection only when a write fails, and a non-streaming answer writes nothing
until the upstream is done: vLLM would generate on for nobody. So the wait runs beside a watch on the client's
socket (gunicorn hands it to the app as `gunicorn.socket`): the request body has been read, so the socket turns
readable only when the client closes it (EOF) or resets it. The upstream call is then killed, which closes its
connection, and the request ends as `client_disconnected`.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, TypeVar

import gevent
import gevent.socket
from gevent.event import Event

from toolproxy.errors import ClientDisconnected

T = TypeVar("T")


def call_watching(work: Callable[[], T], client: Any) -> T:
    """`work()`, abandoned with ClientDisconnected as soon as `client` (a socket, or None) goes away."""
    if not isinstance(client, socket.socket):
        return work()
    worker = gevent.spawn(work)
    watcher = gevent.spawn(_wait_for_departure, client)
    try:
        gevent.wait([worker, watcher], count=1)
        if worker.ready():
            result: T = worker.get()
            return result
        worker.kill(block=True, timeout=2)
        raise ClientDisconnected("the client closed the connection before the answer was ready")
    finally:
        watcher.kill(block=False)
        if not worker.ready():
            worker.kill(block=False)


def _wait_for_departure(client: socket.socket) -> None:
    """Returns once the client has closed or reset its connection; never while it is only waiting."""
    try:
        gevent.socket.wait_read(client.fileno())
        if client.recv(1, socket.MSG_PEEK):
            Event().wait()  # bytes of a pipelined request, not a departure: nothing more to learn here
    except OSError:
        pass  # reset by the peer: gone
