"""`POST /v1/chat/completions`: the four routes, chosen by whether the client sent tools and wants a stream.

1. tools + stream: non-streaming upstream call, calls extracted, answer re-wrapped as SSE (with heartbeats).
2. tools, no stream: extracted, returned as one chat.completion.
3. stream, no tools: passthrough, event by event, cleaned per chunk.
4. neither: forwarded and cleaned.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from flask import Response

from toolproxy.config.settings import ModelSettings, Settings
from toolproxy.dialects.base import ToolIndex
from toolproxy.errors import ProxyError
from toolproxy.meaning import loopguard
from toolproxy.meaning.access import AccessPolicy
from toolproxy.meaning.extraction import Policy
from toolproxy.observe.translog import TransformRecord
from toolproxy.routes import recording, repair
from toolproxy.transform import request_transform
from toolproxy.transform.chat_request import ChatRequest
from toolproxy.transform.response import (
    ChunkHeader,
    Outcome,
    ToolRequest,
    assistant_completion,
    check_completion,
    completion_chunks,
    role_chunk,
    transform_completion,
)
from toolproxy.upstream.client import EventStream, Upstream, UpstreamRequest
from toolproxy.upstream.relay import HEARTBEAT, Relay
from toolproxy.wire import cleaning, jsonwire, sse

logger = logging.getLogger(__name__)
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass(slots=True)
class Exchange:
    """One request on its way through the proxy; each stage reads what the earlier ones settled."""

    request: ChatRequest
    target: ModelSettings
    settings: Settings
    upstream: Upstream
    upstream_api_key: str | None
    started: float = field(default_factory=time.monotonic)
    route: str = ""
    outcome: Outcome = field(default_factory=Outcome)
    repairs: int = 0
    vtc: bool = False  # a client that carries tool calls as XML in content (vtc.py)
    tools: ToolIndex = field(default_factory=dict)  # the tools calls may name: the request's, or the client prompt's
    body: dict[str, Any] = field(default_factory=dict)  # what goes upstream (before the per-model transform)
    record: TransformRecord | None = None  # what the transform log will show
    sink: Callable[[TransformRecord], None] | None = None  # where the record goes when the request is over
    raw_texts: list[str] = field(default_factory=list)  # the model's text, per choice, as the upstream wrote it
    final: dict[str, Any] | None = None  # the answer as the client got it (non-streaming shape)
    upstream_seconds: float = 0.0
    relay: Relay[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        self.tools = self.tools or self.request.tools
        self.body = self.body or self.request.body

    def upstream_request(self, *, stream: bool) -> UpstreamRequest:
        body = request_transform.upstream_body(self.body, self.target, stream=stream)
        return UpstreamRequest(self.target.upstream or "", body, self.upstream_api_key)

    def tool_request(self) -> ToolRequest:
        """The tools the answer may call: all, the one tool_choice names, or none."""
        target, demand = self.target, request_transform.demand_of(self.request.body.get("tool_choice"))
        tools = self.tools
        if demand is not None and demand.name:
            tools = {demand.name: tools[demand.name]}
        return ToolRequest(tools, target.dialects, Policy(target.unknown_tools, target.invalid_arguments,
                                                          target.reasoning),
                           parallel_calls=self.request.body.get("parallel_tool_calls") is not False,
                           allow_calls=demand is not None, id_style=target.id_style,
                           access=AccessPolicy(target.allow_tools, target.deny_tools, target.deny_arguments))

    def transform(self, completion: dict[str, Any]) -> dict[str, Any]:
        self.raw_texts = [model_text(choice) for choice in completion.get("choices") or []]
        answer, self.outcome = transform_completion(
            completion, self.tool_request(), model=self.request.model if self.target.upstream_model else None)
        self.outcome.repairs = self.repairs
        self.final = answer
        return answer

    def complete(self, upstream_request: UpstreamRequest) -> dict[str, Any]:
        started = time.monotonic()
        try:
            return self.upstream.complete(upstream_request)
        finally:
            self.upstream_seconds += time.monotonic() - started

    def complete_tools(self) -> dict[str, Any]:
        """The upstream's answer with its calls extracted; when a call attempt failed or a required call is
        missing, the upstream is asked once more (per `repair_rounds`) with the exact error."""
        upstream_request = self.upstream_request(stream=False)
        completion = self.complete(upstream_request)
        answer = self.transform(completion)
        for _ in range(self.target.repair_rounds):
            reason = repair.reason(answer, self.outcome, request_transform.demand_of(
                self.request.body.get("tool_choice")))
            if reason is None:
                break
            self.repairs += 1
            upstream_request = repair.ask_again(upstream_request, completion, reason)
            completion = self.complete(upstream_request)
            answer = self.transform(completion)
        return answer

    def log(self, status: int | str, error: str | None = None, error_code: str | None = None) -> None:
        if self.record is not None and self.sink is not None:
            try:
                self.sink(recording.fill(self.record, self, status, error, error_code))
            except Exception:  # an outer edge: the transform log must never fail a request
                logger.exception("could not record the transform")
        logger.info("chat route=%s mode=%s model=%s status=%s calls=%s dialects=%s repairs=%d issues=%s ms=%d",
                    self.route, self.target.tool_mode, self.request.model, status,
                    ",".join(self.outcome.calls) or "-", ",".join(sorted(set(self.outcome.dialects))) or "-",
                    self.repairs, "; ".join(self.outcome.issues) or "-", (time.monotonic() - self.started) * 1000)


def model_text(choice: dict[str, Any]) -> str:
    """What the model wrote in one choice: its content, and native calls as the server returned them."""
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return ""
    calls = message.get("tool_calls")
    return str(message.get("content") or "") + (f"\n\n[native tool_calls] {json.dumps(calls)}" if calls else "")


def answer(exchange: Exchange) -> Response:
    request = exchange.request
    reason = loop_guard_reason(exchange, request.messages)
    if reason is not None:
        return loop_guard_answer(exchange, reason)
    if request.tools and request.stream:
        return _rewrap_stream(exchange)
    if request.tools:
        exchange.route = "tools"
        answer = exchange.complete_tools()
        exchange.log(200)
        return json_response(answer)
    if request.stream:
        return _passthrough_stream(exchange)
    exchange.route = "plain"
    raw = exchange.complete(exchange.upstream_request(stream=False))
    check_completion(raw)  # forwarded, but only when it is a chat completion: anything else is a 502
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


def whole_answer(exchange: Exchange, answer: dict[str, Any]) -> Response:
    """A finished answer as the client asked for it: one JSON object, or replayed as a stream."""
    if not exchange.request.stream:
        return json_response(answer)
    return sse_response(iter(_answer_chunks(exchange, answer, ChunkHeader.new(exchange.request.model),
                                            role_sent=False)))


def _rewrap_stream(exchange: Exchange) -> Response:
    """Route 1. An upstream error that comes back within `commit_after` gets a real HTTP status; after that
    the stream is committed (headers and role chunk) and heartbeats keep it alive until the answer is in."""
    exchange.route = "tools_stream"
    settings, request = exchange.settings, exchange.request
    relay: Relay[dict[str, Any]] = Relay(lambda: iter([exchange.complete_tools()]),
                                         deadline_seconds=settings.request_timeout)
    header = ChunkHeader.new(request.model)
    try:
        first = relay.next(settings.commit_after)
        if first is not HEARTBEAT:
            assert isinstance(first, dict)
            chunks = _answer_chunks(exchange, first, header, role_sent=False)
            exchange.log(200)
            return sse_response(iter(chunks))
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
        yield from _answer_chunks(exchange, item, header, role_sent=True)

    return guarded(exchange, produce, relay.close)


def _answer_chunks(exchange: Exchange, answer: dict[str, Any], header: ChunkHeader,
                   role_sent: bool) -> list[bytes]:
    chunks = completion_chunks(answer, header, include_usage=exchange.request.include_usage, role_sent=role_sent)
    return [*map(sse.encode_event, chunks), sse.DONE]


def _passthrough_stream(exchange: Exchange) -> Response:
    """Route 3: events go on as they arrive; only backend-only fields are removed."""
    exchange.route = "stream"
    stream = exchange.upstream.stream(exchange.upstream_request(stream=True))
    rename = exchange.request.model if exchange.target.upstream_model else None
    text = StreamText(exchange.settings.log_field_chars)

    def convert(item: dict[str, Any]) -> list[dict[str, Any]]:
        chunk = cleaning.clean_chunk(item, exchange.target.reasoning)
        if rename:
            chunk["model"] = rename
        text.add(chunk, exchange)
        return [chunk]

    return relay_response(exchange, stream, convert)


def relay_response(exchange: Exchange, stream: EventStream,
                   convert: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> Response:
    """A streaming upstream relayed event by event as it arrives, each chunk converted on the way, with
    heartbeats while the upstream is silent; closing the response closes the upstream."""
    relay: Relay[dict[str, Any]] = Relay(lambda: iter(stream), deadline_seconds=exchange.settings.request_timeout)
    exchange.relay = relay

    def produce() -> Iterator[bytes]:
        while True:
            item = relay.next(exchange.settings.heartbeat_interval)
            if item is HEARTBEAT:
                yield sse.encode_comment("keep-alive")
            elif isinstance(item, dict):
                yield from map(sse.encode_event, convert(item))
            else:
                yield sse.DONE
                return

    def close() -> None:
        relay.close()
        stream.close()

    return sse_response(guarded(exchange, produce, close))


class StreamText:
    """The text of a passthrough stream, kept for the transform log up to its field limit."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pieces: list[str] = []
        self._size = 0

    def add(self, chunk: dict[str, Any], exchange: Exchange) -> None:
        for choice in chunk.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content") or ""
            if piece and self._size < self._limit:
                self._pieces.append(piece)
                self._size += len(piece)
            if choice.get("finish_reason"):
                text = "".join(self._pieces)
                exchange.raw_texts = [text]
                exchange.final = {"choices": [{"message": {"content": text},
                                               "finish_reason": choice["finish_reason"]}]}


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
