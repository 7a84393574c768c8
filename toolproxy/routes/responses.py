"""How a chat route answers: a JSON body, an SSE stream, a finished answer replayed as a stream, and the guard
around every committed stream."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from flask import Response

from toolproxy.errors import ProxyError
from toolproxy.routes.exchange import Exchange
from toolproxy.transform.response import ChunkHeader, completion_chunks
from toolproxy.wire import jsonwire, sse

logger = logging.getLogger("toolproxy.routes.chat")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def whole_answer(exchange: Exchange, answer: dict[str, Any]) -> Response:
    """A finished answer as the client asked for it: one JSON object, or replayed as a stream."""
    if not exchange.request.stream:
        return json_response(answer)
    return sse_response(iter(answer_chunks(exchange, answer, ChunkHeader.new(exchange.request.model),
                                            role_sent=False)))


def answer_chunks(exchange: Exchange, answer: dict[str, Any], header: ChunkHeader,
                   role_sent: bool) -> list[bytes]:
    chunks = completion_chunks(answer, header, include_usage=exchange.request.include_usage, role_sent=role_sent)
    return [*map(sse.encode_event, chunks), sse.DONE]


def guarded(exchange: Exchange, produce: Callable[[], Iterator[bytes]],
             close: Callable[[], None]) -> Iterator[bytes]:
    """The outer edge of every committed stream: an error becomes an SSE error event and `[DONE]`, never a
    silent end; a client that goes away (GeneratorExit) closes the upstream."""
    status: int | str = 200
    error_text: str | None = None
    error_code: str | None = None
    try:
        yield from produce()
    except ProxyError as error:
        status, error_text, error_code = error.status, error.message, error.code
        logger.warning("stream ended with an error: %s", error.message)
        yield sse.encode_event(error.body())
        yield sse.DONE
    except GeneratorExit:
        status = "client_disconnected"
        raise
    except Exception:
        status = 500
        logger.exception("unexpected failure while streaming")
        yield sse.encode_event(ProxyError("the proxy failed while streaming; see its log").body())
        yield sse.DONE
    finally:
        close()
        exchange.log(status, error_text, error_code)


def sse_response(body: Iterator[bytes]) -> Response:
    return Response(body, status=200, mimetype="text/event-stream", headers=SSE_HEADERS)


def json_response(payload: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(jsonwire.dumps(payload), status=status, mimetype="application/json", headers=headers)
