"""Route 1 with `stream_strategy: incremental`: the upstream streams, text goes on to the client as it arrives,
calls (written as text, or the server's own native deltas) go out once complete and judged, and the whole
stream equals what `buffered` would have sent (transform/live.py holds the proof obligations).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolproxy.dialects.base import Call
from toolproxy.routes.exchange import Exchange
from toolproxy.routes.offload import off_loop
from toolproxy.routes.streams import Stream, relay
from toolproxy.transform import request_transform
from toolproxy.transform.live import Delta as LiveDelta
from toolproxy.transform.live_channels import LiveReply
from toolproxy.transform.response import ToolRequest, finish_reason, new_call_id
from toolproxy.transform.turn import CallOut, CallReady, Delta, Envelope, Finished, Item, UsageReport
from toolproxy.wire import cleaning, jsonwire


def fallback_reason(exchange: Exchange) -> str | None:
    """Why this request cannot be answered incrementally with the same result, or None when it can."""
    target = exchange.target
    demand = request_transform.demand_of(exchange.request.body.get("tool_choice"))
    if target.repair_rounds:
        return "a repair round needs the whole answer before the client hears anything"
    if demand is None:
        return "tool_choice none: there is nothing to hold back, and nothing to gain"
    if demand.required:
        return "tool_choice is kept by a corrective round when the model answers without the call"
    if target.tool_mode == "native" and not exchange.backend.streams_tools:
        return f"{exchange.backend.kind} cannot stream an answer with tools"
    if target.reasoning == "keep":
        return "reasoning keep puts the reasoning markup in front of the content, wherever the model wrote it"
    return None


def respond(exchange: Exchange) -> Stream:
    exchange.record.route, exchange.record.strategy = "tools_stream", "incremental"
    stream = exchange.open_stream()
    converter = LiveConverter(exchange)
    return relay(exchange, stream, converter.convert, converter.finish)


@dataclass(slots=True)
class _State:
    """One choice on its way: its live extraction and what has been sent of it."""

    live: LiveReply
    raw: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    calls: list[CallOut] = field(default_factory=list)
    finished: bool = False


class LiveConverter:
    """Upstream chunks in, neutral events out, choice by choice; `finish` ends choices the upstream never
    finished (servers that send no finish chunk) and puts the usage last. `limit`: what a call in progress may
    hold (by default the upstream's size limit: held whole, as buffered does)."""

    def __init__(self, exchange: Exchange, limit: int | None = None, in_order: bool = False) -> None:
        self._exchange = exchange
        # Text as written, and calls in their place in it (VTC), not text first and calls after it.
        self._in_order = in_order
        self._request: ToolRequest = exchange.tool_request()
        self._limit = exchange.settings.max_upstream_bytes if limit is None else limit
        self._choices: dict[int, _State] = {}
        self._envelope: Envelope = {"object": "chat.completion.chunk"}
        self._usage: dict[str, Any] | None = None
        self._ids: set[str] = set()

    def convert(self, chunk: dict[str, Any]) -> list[Item]:
        return off_loop(lambda: self._convert(chunk), _delta_size(chunk))

    def _convert(self, chunk: dict[str, Any]) -> list[Item]:
        chunk = cleaning.clean_chunk(chunk, self._exchange.target.reasoning)
        if self._exchange.target.upstream_model:
            chunk["model"] = self._exchange.request.model
        self._envelope = {key: value for key, value in chunk.items() if key not in ("choices", "usage")}
        if chunk.get("usage") is not None:
            self._usage = chunk  # usage goes last, after every finish
        out: list[Item] = []
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict):
                out += self._convert_choice(choice)
        return out

    def finish(self) -> list[Item]:
        out: list[Item] = []
        for index, state in sorted(self._choices.items()):
            if not state.finished:
                self._exchange.outcome.issues.append("stream: the upstream sent no finish chunk; one was added")
                out += self._end(index, state, None)
        if self._usage is not None:
            out.append(UsageReport(self._usage.get("usage"), self._usage))
        return out

    def _state(self, index: int) -> _State:
        if index not in self._choices:
            self._choices[index] = _State(LiveReply(self._request, self._limit, verbatim=self._in_order))
        return self._choices[index]

    def _convert_choice(self, choice: dict[str, Any]) -> list[Item]:
        index = choice["index"] if isinstance(choice.get("index"), int) else 0
        state = self._state(index)
        if state.finished:
            return []
        delta: dict[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
        out: list[Item] = [Delta(index, role=delta["role"], envelope=self._envelope)] if delta.get("role") else []
        if delta.get("tool_calls") is not None:
            state.live.native.add(delta["tool_calls"])
        live = LiveDelta()
        if isinstance(delta.get("reasoning_content"), str) and delta["reasoning_content"]:
            live.reasoning += state.live.feed_reasoning(delta["reasoning_content"]).reasoning
        if isinstance(delta.get("content"), str) and delta["content"]:
            state.raw.append(delta["content"])
            live.extend(state.live.feed(delta["content"]))
        out += self._deltas(index, state, live)
        if choice.get("finish_reason"):
            out += self._end(index, state, choice["finish_reason"])
        return out

    def _end(self, index: int, state: _State, upstream_finish: Any) -> list[Item]:
        state.finished = True
        out = self._deltas(index, state, state.live.finish())
        reason = finish_reason(upstream_finish, state.calls)
        self._record(index, state, reason)
        return [*out, Finished(index, reason, self._envelope)]

    def _deltas(self, index: int, state: _State, live: LiveDelta) -> list[Item]:
        """The choice's new text (with its reasoning) then its new calls; or, `in_order`, text and calls in the
        order the model wrote them, each run of text one event."""
        state.sent.append(live.content)
        if not self._in_order:
            text = Delta(index, live.content, live.reasoning, envelope=self._envelope)
            return [*([text] if text.text or text.reasoning else []), *self._ready(index, state, live.calls)]
        out: list[Item] = [Delta(index, reasoning=live.reasoning, envelope=self._envelope)] if live.reasoning else []
        run: list[str] = []
        for piece in [*live.pieces, None]:
            if isinstance(piece, str):
                run.append(piece)
                continue
            if run:
                out.append(Delta(index, "".join(run), envelope=self._envelope))
                run = []
            if piece is not None:
                out += self._ready(index, state, [piece])
        return out

    def _ready(self, index: int, state: _State, calls: list[Call]) -> list[Item]:
        ready: list[Item] = []
        for call in calls:
            out = self._call_out(call.name, call.arguments)
            ready.append(CallReady(index, len(state.calls), out, self._envelope))
            state.calls.append(out)
        return ready

    def _call_out(self, name: str, arguments: Any) -> CallOut:
        call_id = new_call_id(self._request.id_style)
        while call_id in self._ids:
            call_id = new_call_id(self._request.id_style)
        self._ids.add(call_id)
        return CallOut(call_id, name, jsonwire.dumps_text(arguments))

    def _record(self, index: int, state: _State, reason: str) -> None:
        """The outcome (every choice) and the transform log's view (the first choice, as buffered records it)."""
        live, outcome = state.live, self._exchange.outcome
        outcome.dialects.extend(call.dialect for call in live.calls)
        outcome.issues.extend(live.extraction.issues)
        outcome.failures.extend(live.extraction.failures)
        outcome.denied.extend(live.extraction.denied)
        outcome.attempts.extend(live.extraction.attempts)
        outcome.calls.extend(call.name for call in state.calls)
        # Each call the client got is one the reply found, in the same order (`_ready`): its record refers to it.
        wires = [out.arguments for out in state.calls] if len(state.calls) == len(live.calls) else []
        outcome.details.extend({"name": call.name, "arguments": call.arguments, "raw_arguments": call.source,
                                "source": call.source, "dialect": call.dialect,
                                **({"wire": wires[number]} if wires else {})}
                               for number, call in enumerate(live.calls))
        if index != min(self._choices):
            return
        native = [{"name": call.name, "arguments": call.arguments} for call in live.native.calls()]
        raw = "".join(state.raw) + (f"\n\n[native tool_calls] {json.dumps(native)}" if native else "")
        message: dict[str, Any] = {"content": "".join(state.sent) or None}
        if state.calls:
            message["tool_calls"] = [{"id": call.id, "type": "function",
                                      "function": {"name": call.name, "arguments": call.arguments}}
                                     for call in state.calls]
        self._exchange.answered([raw], {"choices": [{"message": message, "finish_reason": reason}]})


def _delta_size(chunk: dict[str, Any]) -> int:
    """The characters of text a streamed chunk brings (a whole answer may come in one event)."""
    size = 0
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict):
            size += sum(len(value) for key in ("content", "reasoning_content")
                        if isinstance(value := delta.get(key), str))
    return size
