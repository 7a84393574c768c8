"""The four routes of a chat request, chosen by whether the client sent tools and wants a stream; each returns a
finished `Answer` or a stream of events (transform/turn.py), which the client's front end encodes.

1. tools + stream: non-streaming upstream call, calls extracted, the answer sent whole (with keep-alives while it
   is made), or `stream_strategy: incremental`.
2. tools, no stream: extracted, answered whole.
3. stream, no tools: passthrough, event by event, cleaned per chunk.
4. neither: forwarded and cleaned.
"""

from __future__ import annotations

import logging
from typing import Any

from toolproxy.meaning import loopguard
from toolproxy.routes import incremental
from toolproxy.routes.exchange import Exchange, model_text
from toolproxy.routes.passthrough import Passthrough
from toolproxy.routes.streams import Stream, guarded, relay
from toolproxy.transform.response import assistant_completion
from toolproxy.transform.turn import DONE, KEEP_ALIVE, Answer, Opened, Whole
from toolproxy.upstream.relay import HEARTBEAT, Relay
from toolproxy.wire import cleaning, stencil
from toolproxy.wire.shape import check_completion, check_forwardable

logger = logging.getLogger(__name__)
Reply = Answer | Stream  # a finished answer (the front end may replay it as a stream), or a stream


def answer(exchange: Exchange) -> Reply:
    request = exchange.request
    reason = loop_guard_reason(exchange, request.messages)
    if reason is not None:
        return loop_guard_answer(exchange, reason)
    if request.tools and request.stream:
        return _tools_stream(exchange)
    if request.tools:
        exchange.record.route = "tools"
        completion = exchange.complete_tools()
        exchange.log(200)
        return Answer(completion)
    if request.stream:
        return _passthrough_stream(exchange)
    exchange.record.route = "plain"
    raw = exchange.complete(exchange.upstream_request(stream=False))
    check_forwardable(check_completion(raw))  # forwarded, but only when it is a chat completion: else a 502
    completion = cleaning.clean_completion(raw, exchange.target.reasoning)
    if exchange.target.upstream_model:
        completion["model"] = request.model
    exchange.answered([model_text(choice) for choice in completion.get("choices") or []], completion)
    exchange.log(200)
    return Answer(completion)


def loop_guard_reason(exchange: Exchange, messages: list[dict[str, Any]]) -> str | None:
    settings = exchange.settings
    return loopguard.check(messages, repeats=settings.loop_repeats, max_tool_messages=settings.loop_max_tool_messages)


def loop_guard_answer(exchange: Exchange, reason: str) -> Answer:
    exchange.record.route = "loop_guard"
    exchange.outcome.issues.append(reason)
    logger.warning("loop guard fired for model %s: %s", exchange.request.model, reason)
    completion = assistant_completion(reason, exchange.request.model)
    exchange.answered([], completion)
    exchange.log(200)
    return Answer(completion)


def _tools_stream(exchange: Exchange) -> Reply:
    """Route 1, by the model's `stream_strategy`; incremental falls back to buffered, saying why, where it could
    not give the same answer."""
    if exchange.target.stream_strategy == "incremental":
        reason = incremental.fallback_reason(exchange)
        if reason is None:
            return incremental.respond(exchange)
        exchange.notes.append(f"incremental: fell back to buffered: {reason}")
    return _buffered_stream(exchange)


def _buffered_stream(exchange: Exchange) -> Reply:
    """Route 1. An upstream error that comes back within `commit_after` gets a real HTTP status, and an answer
    that comes back as soon goes out whole; after that the stream is committed (`Opened`) and keep-alives hold it
    until the answer is in."""
    exchange.record.route, exchange.record.strategy = "tools_stream", "buffered"
    settings = exchange.settings
    pump: Relay[dict[str, Any]] = Relay(lambda: iter([exchange.complete_tools()]),
                                        deadline_seconds=settings.request_timeout)
    try:
        first = pump.next(settings.commit_after)
        if first is not HEARTBEAT:
            assert isinstance(first, dict)
            exchange.first_byte()
            exchange.log(200)
            return Answer(first)
    except BaseException:
        pump.close()
        raise
    return _committed(exchange, pump)


def _committed(exchange: Exchange, pump: Relay[dict[str, Any]]) -> Stream:
    def produce() -> Stream:
        yield [Opened(exchange.request.choices)]
        while (item := pump.next(exchange.settings.heartbeat_interval)) is HEARTBEAT:
            yield [KEEP_ALIVE]
        assert isinstance(item, dict)
        exchange.first_byte()
        yield [Whole(Answer(item)), DONE]

    return guarded(exchange, produce, pump.close)


def _passthrough_stream(exchange: Exchange) -> Stream:
    """Route 3: events go on as they arrive; only backend-only fields are removed. A front end that speaks the
    upstream's protocol may send some as they came, undecoded (its shortcut, `Exchange.forward`)."""
    exchange.record.route = "stream"
    stream = exchange.open_stream()
    rename = exchange.request.model if exchange.target.upstream_model else None
    passthrough = Passthrough(exchange, stencil.clean(exchange.target.reasoning, rename))
    shortcut = exchange.forward(passthrough) if exchange.forward is not None else None
    return relay(exchange, stream, passthrough.items, shortcut=shortcut)
