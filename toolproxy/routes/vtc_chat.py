"""`POST /v1/chat/completions` for virtual-tool-calling clients (Cline, Roo Code, Kilo Code): their calls go
through the core (validation, loop guard, access policy, log) and come back as XML in content.

Streaming text goes out live; only what may be the start of a call is held back, up to `max_buffer_bytes`.
With `vtc_native_bridge`, the client's prompt is turned into native `tools` and its XML history into
`tool_calls`, the backend answers natively, and the answer is turned back into the client's XML.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Response

from toolproxy.clients import vtc
from toolproxy.clients.history import history_to_native
from toolproxy.clients.prompt import ClientTools
from toolproxy.dialects.base import Call, Segment, Text
from toolproxy.meaning.extraction import accept, scanner
from toolproxy.meaning.holdback import BoundedScanner
from toolproxy.routes.chat import loop_guard_answer, loop_guard_reason
from toolproxy.routes.exchange import Exchange
from toolproxy.routes.responses import relay_response, whole_answer
from toolproxy.transform.native_stream import NativeCalls
from toolproxy.transform.response import police
from toolproxy.wire import cleaning

logger = logging.getLogger(__name__)


def answer(exchange: Exchange) -> Response:
    """The VTC counterpart of chat.answer."""
    messages = exchange.request.messages
    client = vtc.client_tools(messages)
    exchange.tools = {**client.index(), **exchange.request.tools}
    reason = loop_guard_reason(exchange, vtc.structured_history(messages, exchange.tools, exchange.target.dialects))
    if reason is not None:
        return loop_guard_answer(exchange, reason)
    form = vtc.xml_form(messages)

    def writer() -> vtc.XmlWriter:  # one per choice: a writer remembers the line breaks its text ended with
        return vtc.XmlWriter(form, exchange.settings.vtc_newlines, client)

    if exchange.target.vtc_native_bridge and _bridge(exchange, client):
        return _complete(exchange, writer)
    if exchange.request.stream:
        return _stream(exchange, writer)
    return _complete(exchange, writer)


def _bridge(exchange: Exchange, parsed: ClientTools) -> bool:
    """Native tools and history from the client's prompt; False (plain VTC, with the reason recorded) when the
    prompt cannot be understood."""
    if not parsed.tools:
        exchange.outcome.issues.append(f"vtc bridge: falling back to plain VTC: {parsed.problem}")
        return False
    native = history_to_native(exchange.request.messages, parsed)
    exchange.body = {**exchange.request.body, "tools": list(parsed.tools), "messages": native}
    exchange.route = "vtc_bridge"
    return True


def _complete(exchange: Exchange, writer: Callable[[], vtc.XmlWriter]) -> Response:
    """A whole answer (the bridge always asks for one): calls as XML in content, as JSON or as a stream."""
    exchange.route = exchange.route or "vtc"
    answer = to_client(exchange.complete_tools(), writer)
    exchange.log(200)
    return whole_answer(exchange, answer)


def to_client(answer: dict[str, Any], writer: Callable[[], vtc.XmlWriter]) -> dict[str, Any]:
    """Each choice's calls written into its content as XML; `tool_calls` removed, finish_reason `stop`."""
    for choice in answer["choices"]:
        message = choice["message"]
        calls = message.pop("tool_calls", None) or []
        if calls:
            segments: list[Segment] = [Text(message.get("content") or "")]
            segments += [Call(c["function"]["name"], _arguments(c), "", "native") for c in calls]
            message["content"] = writer().write(segments)
            choice["finish_reason"] = "stop"
    return answer


def _stream(exchange: Exchange, writer: Callable[[], vtc.XmlWriter]) -> Response:
    exchange.route = "vtc_stream"
    stream = exchange.upstream.stream(exchange.upstream_request(stream=True))
    return relay_response(exchange, stream, StreamConverter(exchange, writer).convert)


class StreamConverter:
    """Upstream chunks in, client chunks out: content scanned as it arrives, calls (from the text or from native
    tool-call deltas) judged and written as XML, finish_reason `stop`."""

    def __init__(self, exchange: Exchange, writer: Callable[[], vtc.XmlWriter]) -> None:
        self._exchange = exchange
        self._request = exchange.tool_request()
        self._writer = writer
        self._choices: dict[int, _Choice] = {}  # each choice is scanned on its own (n > 1)

    def convert(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        chunk = cleaning.clean_chunk(chunk, self._exchange.target.reasoning)
        if self._exchange.target.upstream_model:
            chunk["model"] = self._exchange.request.model
        out: list[dict[str, Any]] = []
        for choice in chunk.get("choices") or []:
            out += self._convert_choice(chunk, choice)
        if not chunk.get("choices"):
            out.append(chunk)  # the usage chunk
        return out

    def _state(self, index: int) -> _Choice:
        if index not in self._choices:
            make = lambda: scanner(self._request.tools, self._request.dialects)  # noqa: E731
            self._choices[index] = _Choice(BoundedScanner(make, self._exchange.settings.max_buffer_bytes),
                                           self._writer())
        return self._choices[index]

    def _convert_choice(self, chunk: dict[str, Any], choice: dict[str, Any]) -> list[dict[str, Any]]:
        state = self._state(int(choice.get("index") or 0))
        delta = dict(choice.get("delta") or {})
        text = delta.pop("content", None) or ""
        native = delta.pop("tool_calls", None)
        if native is not None:
            state.native.add(native)
        content = state.writer.write(self._judge(state.scanner.feed(text))) if text else ""
        finish = choice.get("finish_reason")
        out = []
        state.raw.append(text)
        if finish:
            content += state.writer.write(self._judge(state.scanner.finish() + state.native_calls()))
            self._record(state, content, finish)
        state.sent.append(content)
        if content or (delta and not finish):
            out.append({**chunk, "choices": [{**choice, "delta": {**delta, **({"content": content} if content
                                                                                else {})}, "finish_reason": None}]})
        if finish:
            out.append({**chunk, "choices": [{**choice, "delta": {}, "finish_reason":
                                              "stop" if finish == "tool_calls" else finish}]})
        return out

    def _record(self, state: _Choice, content: str, finish: str) -> None:
        if state is not self._choices.get(0):
            return  # the transform log shows the first choice
        self._exchange.raw_texts = ["".join(state.raw)]
        self._exchange.final = {"choices": [{"message": {"content": "".join(state.sent) + content},
                                             "finish_reason": "stop" if finish == "tool_calls" else finish}]}

    def _judge(self, segments: list[Segment]) -> list[Segment]:
        """The same judgement as for any answer: policy, schema typing, access policy."""
        extraction = accept(segments, self._request.tools, self._request.policy)
        extraction.segments = police(extraction, self._request.access)
        self._exchange.outcome.add(extraction)
        self._exchange.outcome.returned(extraction.calls)
        return extraction.segments


@dataclass(slots=True)
class _Choice:
    """What one streamed choice holds: its scanner, its writer, native call deltas, and its text for the log."""

    scanner: BoundedScanner
    writer: vtc.XmlWriter
    native: NativeCalls = field(default_factory=NativeCalls)  # repaired as for any native stream
    raw: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)

    def native_calls(self) -> list[Segment]:
        calls: list[Segment] = list(self.native.calls())
        self.native = NativeCalls()
        return calls


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(call["function"]["arguments"])
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
