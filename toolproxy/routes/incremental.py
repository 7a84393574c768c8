"""Route 1 with `stream_strategy: incremental`: the upstream streams, text goes on to the client as it arrives,
calls (written as text, or the server's own native deltas) go out once complete and judged, and the whole
stream equals what `buffered` would have sent (transform/live.py holds the proof obligations).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from flask import Response

from toolproxy.routes.exchange import Exchange
from toolproxy.routes.responses import relay_response
from toolproxy.transform import request_transform
from toolproxy.transform.live import Delta
from toolproxy.transform.live_channels import LiveReply
from toolproxy.transform.response import ToolRequest, finish_reason, new_call_id
from toolproxy.wire import cleaning, jsonwire


def fallback_reason(exchange: Exchange) -> str | None:
    """Why this request cannot be answered incrementally with the same result, or None when it can."""
    target = exchange.target
    demand = request_transform.demand_of(exchange.request.body.get("tool_choice"))
    if target.repair_rounds:
        return "a repair round needs the whole answer before the client hears anything"
    if demand is None:
        return "tool_choice none: there is nothing to hold back, and nothing to gain"
    if demand.required and target.tool_mode == "prompt":
        return "tool_choice is emulated in prompt mode, which must see the whole answer"
    if target.reasoning == "keep":
        return "reasoning keep puts the reasoning markup in front of the content, wherever the model wrote it"
    return None


def respond(exchange: Exchange) -> Response:
    exchange.route, exchange.strategy = "tools_stream", "incremental"
    stream = exchange.upstream.stream(exchange.upstream_request(stream=True))
    converter = LiveConverter(exchange)
    return relay_response(exchange, stream, converter.convert, converter.finish)


@dataclass(slots=True)
class _State:
    """One choice on its way: its live extraction and what has been sent of it."""

    live: LiveReply
    raw: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False


class LiveConverter:
    """Upstream chunks in, client chunks out, choice by choice; `finish` ends choices the upstream never
    finished (servers that send no finish chunk) and puts the usage chunk last."""

    def __init__(self, exchange: Exchange) -> None:
        self._exchange = exchange
        self._request: ToolRequest = exchange.tool_request()
        self._choices: dict[int, _State] = {}
        self._base: dict[str, Any] = {"object": "chat.completion.chunk"}
        self._usage: dict[str, Any] | None = None
        self._ids: set[str] = set()

    def convert(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        chunk = cleaning.clean_chunk(chunk, self._exchange.target.reasoning)
        if self._exchange.target.upstream_model:
            chunk["model"] = self._exchange.request.model
        self._base = {key: value for key, value in chunk.items() if key not in ("choices", "usage")}
        if chunk.get("usage") is not None:
            self._usage = chunk  # usage goes last, after every finish chunk
        out: list[dict[str, Any]] = []
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict):
                out += self._convert_choice(choice)
        return out

    def finish(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for index, state in sorted(self._choices.items()):
            if not state.finished:
                self._exchange.outcome.issues.append("stream: the upstream sent no finish chunk; one was added")
                out += self._end(index, state, None)
        if self._usage is not None:
            out.append({**self._usage, "choices": []})
        return out

    def _state(self, index: int) -> _State:
        if index not in self._choices:
            limit = self._exchange.settings.max_upstream_bytes  # a call in progress is held whole, as buffered does
            self._choices[index] = _State(LiveReply(self._request, limit))
        return self._choices[index]

    def _convert_choice(self, choice: dict[str, Any]) -> list[dict[str, Any]]:
        index = choice["index"] if isinstance(choice.get("index"), int) else 0
        state = self._state(index)
        if state.finished:
            return []
        delta: dict[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
        out = [self._chunk(index, {"role": delta["role"]})] if delta.get("role") else []
        if delta.get("tool_calls") is not None:
            state.live.native.add(delta["tool_calls"])
        live = Delta()
        if isinstance(delta.get("reasoning_content"), str) and delta["reasoning_content"]:
            live.reasoning += state.live.feed_reasoning(delta["reasoning_content"]).reasoning
        if isinstance(delta.get("content"), str) and delta["content"]:
            state.raw.append(delta["content"])
            _join(live, state.live.feed(delta["content"]))
        out += self._deltas(index, state, live)
        if choice.get("finish_reason"):
            out += self._end(index, state, choice["finish_reason"])
        return out

    def _end(self, index: int, state: _State, upstream_finish: Any) -> list[dict[str, Any]]:
        state.finished = True
        out = self._deltas(index, state, state.live.finish())
        reason = finish_reason(upstream_finish, state.calls)
        self._record(index, state, reason)
        return [*out, self._chunk(index, {}, reason)]

    def _deltas(self, index: int, state: _State, live: Delta) -> list[dict[str, Any]]:
        out = []
        text = {key: value for key, value in (("content", live.content), ("reasoning_content", live.reasoning))
                if value}
        if text:
            state.sent.append(live.content)
            out.append(self._chunk(index, text))
        for call in live.calls:
            wire = self._wire(call.name, call.arguments, len(state.calls))
            state.calls.append(wire)
            out.append(self._chunk(index, {"tool_calls": [wire]}))
        return out

    def _wire(self, name: str, arguments: Any, position: int) -> dict[str, Any]:
        call_id = new_call_id(self._request.id_style)
        while call_id in self._ids:
            call_id = new_call_id(self._request.id_style)
        self._ids.add(call_id)
        encoded = jsonwire.dumps_text(arguments)
        return {"index": position, "id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}

    def _chunk(self, index: int, delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {**self._base, "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": reason}]}

    def _record(self, index: int, state: _State, reason: str) -> None:
        """The outcome (every choice) and the transform log's view (the first choice, as buffered records it)."""
        live, outcome = state.live, self._exchange.outcome
        outcome.dialects.extend(call.dialect for call in live.calls)
        outcome.issues.extend(live.extraction.issues)
        outcome.failures.extend(live.extraction.failures)
        outcome.denied.extend(live.extraction.denied)
        outcome.calls.extend(call["function"]["name"] for call in state.calls)
        outcome.details.extend({"name": call.name, "arguments": call.arguments, "raw_arguments": call.source,
                                "source": call.source, "dialect": call.dialect} for call in live.calls)
        if index != min(self._choices):
            return
        native = [{"name": call.name, "arguments": call.arguments} for call in live.native.calls()]
        self._exchange.raw_texts = ["".join(state.raw) + (f"\n\n[native tool_calls] {json.dumps(native)}"
                                                          if native else "")]
        message: dict[str, Any] = {"content": "".join(state.sent) or None}
        if state.calls:
            message["tool_calls"] = [{key: value for key, value in call.items() if key != "index"}
                                     for call in state.calls]
        self._exchange.final = {"choices": [{"message": message, "finish_reason": reason}]}


def _join(into: Delta, more: Delta) -> None:
    into.content += more.content
    into.reasoning += more.reasoning
    into.calls += more.calls
