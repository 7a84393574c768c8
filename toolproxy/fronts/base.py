"""What every front end is: how it reads its client's key and request, and how it answers, streams and fails in
its client's protocol; and the HTTP responses they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

import gevent
from flask import Response
from werkzeug.datastructures import Headers

from toolproxy.clients.vtc import RouteChoice
from toolproxy.config.settings import Settings
from toolproxy.errors import ProxyError
from toolproxy.routes.chat import Reply
from toolproxy.routes.exchange import Exchange
from toolproxy.routes.streams import Stream
from toolproxy.transform.chat_request import ChatRequest
from toolproxy.transform.turn import Answer, Item
from toolproxy.upstream.events import Shortcut
from toolproxy.wire import jsonwire

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
NATIVE = RouteChoice(False, "native: this protocol carries tool calls of its own")


class StreamEncoder(ABC):
    """One stream's items as its client's bytes, a batch (one write) at a time; it may keep state between them."""

    @abstractmethod
    def encode(self, batch: list[Item]) -> bytes: ...


class Front(ABC):
    """One request in one wire protocol: a new instance per request, so that it may remember what it decoded."""

    protocol: ClassVar[str]  # the transform log's name for it
    key_hint: ClassVar[str] = "Authorization: Bearer <key>"  # how its clients send a key, for a refusal to say

    def presented_key(self, headers: Headers) -> str | None:
        """The API key the client presented, as its protocol sends it (a bearer token by default)."""
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" and token else None

    @abstractmethod
    def decode(self, data: bytes, settings: Settings) -> ChatRequest:
        """The core's chat request; a ProxyError naming what is wrong when it is not a valid request."""

    def notes(self) -> list[str]:
        """What decoding left out or changed, for the transform log's issues (nothing by default)."""
        return []

    def route(self, headers: Headers, chat: ChatRequest, settings: Settings) -> RouteChoice:
        """Native tool calls, or calls written as XML for a client that reads them so (chat only)."""
        return NATIVE

    def forward(self, passthrough: Any) -> Shortcut | None:
        """A shortcut for upstream events this protocol's client may get as they came (none by default)."""
        return None

    @abstractmethod
    def whole(self, exchange: Exchange, answer: Answer) -> Response:
        """A finished answer, as one body, or as a stream when the client asked for one."""

    @abstractmethod
    def encoder(self, exchange: Exchange) -> StreamEncoder: ...

    @abstractmethod
    def error(self, error: ProxyError) -> Response: ...

    def respond(self, exchange: Exchange, reply: Reply) -> Response:
        if isinstance(reply, Answer):
            return self.whole(exchange, reply)
        return sse_response(encoded(reply, self.encoder(exchange)))


def cooperate() -> None:
    """Let the worker's other greenlets run between the costly steps of one big request (its decode, a large
    tool schema's first check): no single request may hold the event loop for more than 100 ms."""
    gevent.sleep(0)


def encoded(stream: Stream, encoder: StreamEncoder) -> Iterator[bytes]:
    """The stream's batches as bytes; closing this (the client went away) closes the stream, and so the upstream."""
    try:
        for batch in stream:
            data = encoder.encode(batch)
            if data:
                yield data
    finally:
        stream.close()


def sse_response(body: Iterator[bytes]) -> Response:
    return Response(body, status=200, mimetype="text/event-stream", headers=SSE_HEADERS)


def json_response(payload: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(jsonwire.dumps(payload), status=status, mimetype="application/json", headers=headers)
