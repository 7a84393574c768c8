"""How a chat route answers: a JSON body, an SSE stream, a finished answer replayed as a stream, a streaming
upstream relayed chunk by chunk, and the guard around every committed stream."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from flask import Response

from toolproxy.errors import ProxyError
from toolproxy.routes.exchange import Exchange
from toolproxy.transform.response import ChunkHeader, completion_chunks
from toolproxy.upstream.events import Batch, EventStream, Shortcut
from toolproxy.upstream.relay import FINISHED, HEARTBEAT, Finished, Heartbeat, Relay
from toolproxy.wire import jsonwire, sse

logger = logging.getLogger("toolproxy.routes.chat")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def whole_answer(exchange: Exchange, answer: dict[str, Any]) -> Response:
    """A finished answer as the client asked for it: one JSON object, or replayed as a stream."""
    if not exchange.request.stream:
        return json_response(answer)
    return sse_response(iter([answer_chunks(exchange, answer, ChunkHeader.new(exchange.request.model),
                                            role_sent=False)]))


def answer_chunks(exchange: Exchange, answer: dict[str, Any], header: ChunkHeader, role_sent: bool) -> bytes:
    """A finished answer's events, [DONE] included, as one piece: the server writes it to the client at once
    instead of once per event (a socket send and an HTTP chunk each), and the client reads the same events."""
    chunks = completion_chunks(answer, header, include_usage=exchange.request.include_usage, role_sent=role_sent)
    return b"".join([*map(sse.encode_event, chunks), sse.DONE])


def relay_response(exchange: Exchange, stream: EventStream,
                   convert: Callable[[dict[str, Any]], list[dict[str, Any]]],
                   finish: Callable[[], list[dict[str, Any]]] = list, shortcut: Shortcut | None = None) -> Response:
    """A streaming upstream relayed event by event as it arrives, each chunk converted on the way, with
    heartbeats while the upstream is silent (or talks while nothing can go out yet: a long call held whole);
    `finish` says what goes after the upstream's last event; `shortcut` lets events that need nothing go out as
    they came (see `EventStream.batches`); closing the response closes the upstream."""
    # Merging is for the byte path, where it was measured to pay; the tool routes' converters ran slower fed
    # merged batches (bench/incremental.py: 96 -> 52 req/s), so they get one read per hand-over as before.
    relay: Relay[Batch] = Relay(lambda: stream.batches(shortcut), deadline_seconds=exchange.settings.request_timeout,
                                merge=_merge if shortcut is not None else None)
    exchange.relay = relay

    def produce() -> Iterator[bytes]:
        said = time.monotonic()  # when the client last heard something
        while True:
            item = relay.next(exchange.settings.heartbeat_interval)
            if item is HEARTBEAT:
                yield sse.encode_comment("keep-alive")
                said = time.monotonic()
                continue
            data, end = _ready_events(exchange, relay, item, convert, finish, said)
            if data:
                yield data
                said = time.monotonic()
            elif time.monotonic() - said >= exchange.settings.heartbeat_interval:
                yield sse.encode_comment("keep-alive")
                said = time.monotonic()
            if isinstance(end, BaseException):
                raise end
            if end is FINISHED:
                return

    def close() -> None:
        relay.close()
        stream.close()

    return sse_response(guarded(exchange, produce, close))


Convert = Callable[[dict[str, Any]], list[dict[str, Any]]]
MERGED_EVENTS = 16  # at most this many events in one queued batch: with QUEUE_ITEMS, what a slow client holds


def _merge(queued: Batch, batch: Batch) -> bool:
    """Events read while those before them still wait for the client join them: they leave in the same write,
    as events that arrived together do, and cost one hand-over instead of one each."""
    if len(queued) + len(batch) > MERGED_EVENTS:
        return False
    queued.extend(batch)
    return True


def _ready_events(exchange: Exchange, relay: Relay[Batch], item: Batch | Heartbeat | Finished,
                  convert: Convert, finish: Callable[[], list[dict[str, Any]]], said: float
                  ) -> tuple[bytes, Finished | Exception | None]:
    """`item` and every batch the relay already holds, converted and encoded as one write, with how the run
    ended: FINISHED (`[DONE]` is in the write), an error to raise once the write is out, or None.

    Nothing waits for more: events that arrived together leave together (one send instead of one per event,
    the largest cost of a fast stream), and an event that arrives alone leaves alone, at once."""
    pieces: list[bytes] = []
    try:
        while True:
            if isinstance(item, Finished):
                pieces.extend(_events(exchange, finish()))
                pieces.append(sse.DONE)
                return b"".join(pieces), FINISHED
            if isinstance(item, list):
                for event in item:
                    if isinstance(event, bytes):
                        pieces.append(event)  # ready: the shortcut made it and kept the record
                    else:
                        pieces.extend(_events(exchange, convert(event)))
            # A run that has said nothing for a heartbeat interval returns, so a keep-alive can go out.
            quiet = not pieces and time.monotonic() - said >= exchange.settings.heartbeat_interval
            if not relay.has_ready() or quiet:
                return b"".join(pieces), None
            item = relay.next(0)
    except Exception as error:  # handed on after the events before it are out, as when each went alone
        return b"".join(pieces), error


def _events(exchange: Exchange, chunks: list[dict[str, Any]]) -> Iterator[bytes]:
    """Chunks as SSE events, noting when the first content (or call) goes out."""
    if exchange.first_byte is None and any(carries_content(chunk) for chunk in chunks):
        exchange.first_byte = time.monotonic()
    return map(sse.encode_event, chunks)


def carries_content(chunk: dict[str, Any]) -> bool:
    return any((choice.get("delta") or {}).get("content") or (choice.get("delta") or {}).get("tool_calls")
               for choice in chunk.get("choices") or [] if isinstance(choice, dict))


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
