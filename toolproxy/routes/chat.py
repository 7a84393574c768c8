"""`POST /v1/chat/completions`: the four routes, chosen by whether the client sent tools and wants a stream.

1. tools + stream: non-streaming upstream call, calls extracted, answer re-wrapped as SSE (with heartbeats).
2. tools, no stream: extracted, returned as one chat.completion.
3. stream, no tools: passthrough, event by event, cleaned per chunk.
4. neither: forwarded and cleaned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from flask import Response

from toolproxy.meaning import loopguard
from toolproxy.routes import incremental
from toolproxy.routes.exchange import Exchange, model_text
from toolproxy.routes.responses import (
    answer_chunks,
    carries_content,
    guarded,
    json_response,
    relay_response,
    sse_response,
    whole_answer,
)
from toolproxy.transform.response import (
    ChunkHeader,
    assistant_completion,
    role_chunk,
)
from toolproxy.upstream.relay import HEARTBEAT, Relay
from toolproxy.wire import cleaning, jsonwire, sse, stencil
from toolproxy.wire.shape import check_completion, check_forwardable

logger = logging.getLogger(__name__)


def answer(exchange: Exchange) -> Response:
    request = exchange.request
    reason = loop_guard_reason(exchange, request.messages)
    if reason is not None:
        return loop_guard_answer(exchange, reason)
    if request.tools and request.stream:
        return _tools_stream(exchange)
    if request.tools:
        exchange.route = "tools"
        answer = exchange.complete_tools()
        exchange.log(200)
        return json_response(answer)
    if request.stream:
        return _passthrough_stream(exchange)
    exchange.route = "plain"
    raw = exchange.complete(exchange.upstream_request(stream=False))
    check_forwardable(check_completion(raw))  # forwarded, but only when it is a chat completion: else a 502
    completion = cleaning.clean_completion(raw, exchange.target.reasoning)
    exchange.raw_texts = [model_text(choice) for choice in completion.get("choices") or []]
    exchange.final = completion
    if exchange.target.upstream_model:
        completion["model"] = request.model
    exchange.log(200)
    return json_response(completion)


def loop_guard_reason(exchange: Exchange, messages: list[dict[str, Any]]) -> str | None:
    settings = exchange.settings
    return loopguard.check(messages, repeats=settings.loop_repeats, max_tool_messages=settings.loop_max_tool_messages)


def loop_guard_answer(exchange: Exchange, reason: str) -> Response:
    exchange.route = "loop_guard"
    exchange.outcome.issues.append(reason)
    logger.warning("loop guard fired for model %s: %s", exchange.request.model, reason)
    completion = assistant_completion(reason, exchange.request.model)
    exchange.log(200)
    return whole_answer(exchange, completion)


def _tools_stream(exchange: Exchange) -> Response:
    """Route 1, by the model's `stream_strategy`; incremental falls back to buffered, saying why, where it could
    not give the same answer."""
    if exchange.target.stream_strategy == "incremental":
        reason = incremental.fallback_reason(exchange)
        if reason is None:
            return incremental.respond(exchange)
        exchange.notes.append(f"incremental: fell back to buffered: {reason}")
    return _rewrap_stream(exchange)


def _rewrap_stream(exchange: Exchange) -> Response:
    """Route 1. An upstream error that comes back within `commit_after` gets a real HTTP status; after that
    the stream is committed (headers and role chunk) and heartbeats keep it alive until the answer is in."""
    exchange.route, exchange.strategy = "tools_stream", "buffered"
    settings, request = exchange.settings, exchange.request
    relay: Relay[dict[str, Any]] = Relay(lambda: iter([exchange.complete_tools()]),
                                         deadline_seconds=settings.request_timeout)
    header = ChunkHeader.new(request.model)
    try:
        first = relay.next(settings.commit_after)
        if first is not HEARTBEAT:
            assert isinstance(first, dict)
            events = answer_chunks(exchange, first, header, role_sent=False)
            exchange.first_byte = time.monotonic()
            exchange.log(200)
            return sse_response(iter([events]))
    except BaseException:
        relay.close()
        raise
    return sse_response(_committed(exchange, relay, header))


def _committed(exchange: Exchange, relay: Relay[dict[str, Any]], header: ChunkHeader) -> Iterator[bytes]:
    def produce() -> Iterator[bytes]:
        for index in range(exchange.request.choices):
            yield sse.encode_event(role_chunk(header, index))
        while (item := relay.next(exchange.settings.heartbeat_interval)) is HEARTBEAT:
            yield sse.encode_comment("keep-alive")
        assert isinstance(item, dict)
        exchange.first_byte = time.monotonic()
        yield answer_chunks(exchange, item, header, role_sent=True)

    return guarded(exchange, produce, relay.close)


def _passthrough_stream(exchange: Exchange) -> Response:
    """Route 3: events go on as they arrive; only backend-only fields are removed. An event that differs from
    one before it only in its text goes on as bytes (wire/stencil.py)."""
    exchange.route = "stream"
    stream = exchange.upstream.stream(exchange.upstream_request(stream=True))
    rename = exchange.request.model if exchange.target.upstream_model else None
    passthrough = Passthrough(exchange, stencil.clean(exchange.target.reasoning, rename))
    return relay_response(exchange, stream, passthrough.chunks, shortcut=passthrough)


LITERAL_BYTES = 16 * 1024  # text pieces gathered undecoded at most
LEARN_UNUSED = 4  # a stream whose events never fit the one before (a changing id) stops learning after these


class Passthrough:
    """Route 3's events as the client gets them, with the record kept as they go by: decoded ones cleaned and
    each teaching the stencil, the next ones filled into the stencil last learnt when they fit."""

    def __init__(self, exchange: Exchange, clean: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self._exchange, self._clean = exchange, clean
        self._text = StreamText(exchange.settings.log_field_chars)
        self._stencil: stencil.Stencil | None = None
        self._unused = 0  # stencils learnt since one last fitted a read

    def chunks(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """A decoded chunk, cleaned and recorded."""
        cleaned = self._clean(chunk)
        self._text.add(cleaned, self._exchange)
        return [cleaned]

    def convert(self, chunk: dict[str, Any], data: bytes | None) -> bytes:
        (cleaned,) = self.chunks(chunk)
        if data is not None and self._unused < LEARN_UNUSED:
            learnt = stencil.learn(data, chunk, self._clean)
            if learnt is not None:
                self._stencil, self._unused = learnt, self._unused + 1
        if self._exchange.first_byte is None and carries_content(cleaned):
            self._exchange.first_byte = time.monotonic()
        return sse.encode_event(cleaned)

    def forward(self, read: bytes) -> bytes | None:
        filled = self._stencil.fill(read) if self._stencil is not None else None
        if filled is None:
            return None
        self._unused = 0
        event, literal = filled
        if literal is not None:  # content, never empty
            self._text.add_literal(literal)
            if self._exchange.first_byte is None:
                self._exchange.first_byte = time.monotonic()
        return event


class StreamText:
    """The text of a passthrough stream, kept for the transform log up to its field limit. Pieces that came as
    bytes stay JSON strings until the text is read or a few KiB have gathered: then one decode takes them all."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pieces: list[str] = []
        self._size = 0
        self._literals: list[bytes] = []
        self._pending = 0

    def add(self, chunk: dict[str, Any], exchange: Exchange) -> None:
        self._decode()
        for choice in chunk.get("choices") or []:
            self.add_piece((choice.get("delta") or {}).get("content") or "")
            if choice.get("finish_reason"):
                text = "".join(self._pieces)
                exchange.raw_texts = [text]
                exchange.final = {"choices": [{"message": {"content": text},
                                               "finish_reason": choice["finish_reason"]}]}

    def add_piece(self, piece: str) -> None:
        if piece and self._size < self._limit:
            self._pieces.append(piece)
            self._size += len(piece)

    def add_literal(self, literal: bytes) -> None:
        """A piece still as its JSON string (a well-formed one: wire/stencil.py checked it)."""
        if self._size < self._limit:
            self._literals.append(literal)
            self._pending += len(literal)
            if self._pending >= LITERAL_BYTES:
                self._decode()

    def _decode(self) -> None:
        if self._literals:
            pieces = jsonwire.loads_fast(b"[" + b",".join(self._literals) + b"]")
            self._literals, self._pending = [], 0
            for piece in pieces:
                self.add_piece(piece)
