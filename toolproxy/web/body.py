"""Reading a request body with a size limit and a deadline, chunked bodies included.

gunicorn has neither (benoitc/gunicorn#1659, #2222): a body over the limit must be refused while it is read,
with or without Content-Length, and a client dripping its body must not hold a connection for ever.
"""

from __future__ import annotations

from typing import Any

import gevent
import gevent.socket

from toolproxy.errors import InvalidRequest

READ_SIZE = 64 * 1024  # for a chunked body, whose length is not known before its last chunk


def read_body(environ: dict[str, Any], *, limit: int, timeout: float) -> bytes:
    """The whole body; 413 as soon as it passes `limit` bytes, 408 when it takes longer than `timeout`
    seconds (the deadline holds under gevent, where every socket wait is a switch to the hub)."""
    declared = _declared_length(environ)
    if declared is not None and declared > limit:
        raise _too_large(limit)
    stream = environ["wsgi.input"]
    remaining = limit + 1 if declared is None else declared
    # A declared length is asked for in one read: gunicorn's reader (http/unreader.py) copies what it holds
    # beyond each read, so 64 KiB reads of a 1 MB body copied about 8 MB. Short reads still loop.
    step = READ_SIZE if declared is None else declared
    chunks: list[bytes] = []
    size = 0
    with gevent.Timeout(timeout, False):
        while remaining > 0 and (chunk := stream.read(min(step, remaining))):
            chunks.append(chunk)
            size += len(chunk)
            remaining -= len(chunk)
        if size > limit:
            raise _too_large(limit)
        return b"".join(chunks)
    raise InvalidRequest(f"the request body did not arrive within {timeout:g} seconds", status=408,
                         code="request_timeout")


def _declared_length(environ: dict[str, Any]) -> int | None:
    """Content-Length, or None for a chunked body (gunicorn and Werkzeug then end the input at the last chunk)."""
    text = environ.get("CONTENT_LENGTH") or ""
    if not text:
        return None if environ.get("wsgi.input_terminated") else 0
    if not text.isdigit():
        raise InvalidRequest("Content-Length is not a number", code="invalid_request")
    return int(text)


def _too_large(limit: int) -> InvalidRequest:
    return InvalidRequest(f"the request body is larger than the limit of {limit} bytes", status=413,
                          code="request_too_large")
