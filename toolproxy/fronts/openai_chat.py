"""`POST /v1/chat/completions`, the OpenAI chat protocol: the one the upstream speaks too, so a finished answer is
the core's completion as it is, and a passthrough stream's events go on as the upstream sent them (cleaned), some
without being decoded at all (wire/stencil.py)."""

from __future__ import annotations

from typing import Any

from flask import Response
from werkzeug.datastructures import Headers

from toolproxy.clients import vtc
from toolproxy.config.settings import Settings
from toolproxy.errors import ProxyError
from toolproxy.fronts.base import Front, StreamEncoder, cooperate, json_response, sse_response
from toolproxy.fronts.chat_chunks import ChunkHeader, completion_chunks, delta_of, role_chunk
from toolproxy.routes.exchange import Exchange
from toolproxy.routes.passthrough import Passthrough
from toolproxy.transform.chat_request import ChatRequest, parse_chat_request
from toolproxy.transform.turn import (
    Answer,
    CallReady,
    Delta,
    Envelope,
    Failed,
    Finished,
    Item,
    KeepAlive,
    Opened,
    Relayed,
    UsageReport,
    Whole,
)
from toolproxy.upstream.events import Shortcut
from toolproxy.wire import sse, stencil

LEARN_UNUSED = 4  # a stream whose events never fit the one before (a changing id) stops learning after these
KEEP_ALIVE = sse.encode_comment("keep-alive")


class OpenAIChat(Front):
    protocol = "chat"

    def decode(self, data: bytes, settings: Settings) -> ChatRequest:
        return parse_chat_request(data, settings.max_json_depth, settings.max_json_containers, cooperate)

    def route(self, headers: Headers, chat: ChatRequest, settings: Settings) -> vtc.RouteChoice:
        return vtc.choose_route(headers.get("User-Agent", ""), headers.get(vtc.HEADER),
                                settings.vtc_client_patterns, has_tools=bool(chat.tools))

    def forward(self, passthrough: Any) -> Shortcut | None:
        assert isinstance(passthrough, Passthrough)
        return StencilShortcut(passthrough)

    def whole(self, exchange: Exchange, answer: Answer) -> Response:
        if not exchange.request.stream:
            return json_response(answer.completion)
        return sse_response(iter([ChatEncoder(exchange.request).encode([Whole(answer)]) + sse.DONE]))

    def encoder(self, exchange: Exchange) -> StreamEncoder:
        return ChatEncoder(exchange.request)

    def error(self, error: ProxyError) -> Response:
        return json_response(error.body(), status=error.status, headers=error.headers)


class ChatEncoder(StreamEncoder):
    """Items as chat-completion chunks: an event made by the core under the upstream's own envelope (its id,
    created, model), a buffered answer under one header of the proxy's."""

    def __init__(self, request: ChatRequest) -> None:
        self._request = request
        self._header: ChunkHeader | None = None
        self._opened = False

    def encode(self, batch: list[Item]) -> bytes:
        return b"".join(map(self._encode, batch))

    def _encode(self, item: Item) -> bytes:
        if isinstance(item, bytes):
            return item
        if isinstance(item, Relayed):
            return sse.encode_event(item.chunk)
        if isinstance(item, (Delta, CallReady, Finished)):
            return sse.encode_event(_chunk(item))
        if isinstance(item, UsageReport):
            return sse.encode_event({**_base(item.envelope), "choices": []})
        if isinstance(item, KeepAlive):
            return KEEP_ALIVE
        if isinstance(item, Failed):
            return sse.encode_event(item.error.body()) + sse.DONE
        if isinstance(item, (Opened, Whole)):
            return self._buffered(item)
        return sse.DONE

    def _buffered(self, item: Opened | Whole) -> bytes:
        """A buffered answer: role chunks when the stream is committed, the rest when the answer is in."""
        header = self._header = self._header or ChunkHeader.new(self._request.model)
        if isinstance(item, Opened):
            self._opened = True
            return b"".join(sse.encode_event(role_chunk(header, index)) for index in range(item.choices))
        chunks = completion_chunks(item.answer.completion, header, include_usage=self._request.include_usage,
                                   role_sent=self._opened)
        return b"".join(map(sse.encode_event, chunks))


def _chunk(event: Delta | CallReady | Finished) -> dict[str, Any]:
    return {**_base(event.envelope), "choices": [delta_of(event.index, *_delta(event))]}


def _base(envelope: Envelope | None) -> Envelope:
    return envelope or {"object": "chat.completion.chunk"}


def _delta(event: Delta | CallReady | Finished) -> tuple[dict[str, Any], str | None]:
    if isinstance(event, Finished):
        return {}, event.reason
    if isinstance(event, CallReady):
        call = event.call
        return {"tool_calls": [{"index": event.position, "id": call.id, "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments}}]}, None
    delta: dict[str, Any] = {"role": event.role} if event.role else {}
    if event.text:
        delta["content"] = event.text
    if event.reasoning:
        delta["reasoning_content"] = event.reasoning
    return delta, None


class StencilShortcut:
    """A passthrough stream's events for a chat client: decoded ones cleaned and each teaching the stencil, the
    next ones filled into the stencil last learnt when they fit, undecoded (wire/stencil.py)."""

    def __init__(self, passthrough: Passthrough) -> None:
        self._passthrough = passthrough
        self._stencil: stencil.Stencil | None = None
        self._unused = 0  # stencils learnt since one last fitted a read

    def convert(self, chunk: dict[str, Any], data: bytes | None) -> bytes:
        cleaned = self._passthrough.take(chunk)
        if data is not None and self._unused < LEARN_UNUSED:
            learnt = stencil.learn(data, chunk, self._passthrough.clean)
            if learnt is not None:
                self._stencil, self._unused = learnt, self._unused + 1
        return sse.encode_event(cleaned)

    def forward(self, read: bytes) -> bytes | None:
        filled = self._stencil.fill(read) if self._stencil is not None else None
        if filled is None:
            return None
        self._unused = 0
        event, literal = filled
        if literal is not None:  # content, never empty
            self._passthrough.take_literal(literal)
        return event
