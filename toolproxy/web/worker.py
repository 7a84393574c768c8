"""The gunicorn worker: gevent's, with gunicorn's own error answers as OpenAI error objects.

gunicorn answers a request it cannot parse (a bad request line, 431 for too many or too large headers, 414 for
a long URI) itself, before the app sees it, with an HTML page that no OpenAI client can read. This worker keeps
gunicorn's choice of status and message and writes them as JSON. The master loads this module (gunicorn.conf.py
names it), so it imports only gunicorn and the standard library: nothing that must wait for monkey-patching.
"""

from __future__ import annotations

import json
import socket

from gunicorn import util
from gunicorn.workers import ggevent


def write_json_error(sock: socket.socket, status: int, reason: str, message: str) -> None:
    """gunicorn's `util.write_error`, in the OpenAI error shape."""
    body = json.dumps({"error": {
        "message": message or reason,
        "type": "invalid_request_error" if status < 500 else "server_error",
        "param": None,
        "code": reason.lower().replace(" ", "_"),
    }}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin-1") + body)


class GeventWorker(ggevent.GeventWorker):  # type: ignore[misc]  # gunicorn ships no type hints
    def init_process(self) -> None:
        # gunicorn's handle_error maps each parse error to its status, then calls util.write_error: replacing
        # that one function, in this worker process only, keeps the mapping and changes only the body.
        util.write_error = write_json_error
        super().init_process()
