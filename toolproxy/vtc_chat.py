"""`POST /v1/chat/completions` for virtual-tool-calling clients (Cline, Roo Code, Kilo Code): their calls go
through the core (validation, loop guard, access policy, log) and come back as XML in content.

Streaming text goes out live; only what may be the start of a call is held back, up to `max_buffer_bytes`.
With `vtc_native_bridge`, the client's prompt is turned into native `tools` and its XML history into
`tool_calls`, the backend answers natively, and the answer is turned back into the client's XML.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Response

from toolproxy import cleaning, sse, vtc
from toolproxy.chat import Exchange, json_response, loop_guard_answer, loop_guard_reason, relay_response, sse_response
from toolproxy.client_history import history_to_native
from toolproxy.client_prompt import ClientTools
from toolproxy.dialects.base import Call, Segment, Text
from toolproxy.extraction import accept, scanner
from toolproxy.response_transform import ChunkHeader, completion_chunks, police

logger = logging.getLogger(__name__)


def answer(exchange: Exchange) -> Response:
    """The VTC counterpart of chat.answer."""
    messages = exchange.request.messages
    client = vtc.client_tools(messages)
    exchange.tools = {**client.index(), **exchange.request.tools}
    reason = loop_guard_reason(exchange, vtc.structured_history(messages, exchange.tools, exchange.target.dialects))
    if reason is not None:
        return loop_guard_answer(exchange, reason)
    writer = vtc.XmlWriter(vtc.xml_form(messages), exchange.settings.vtc_newlines, client)
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


def _complete(exchange: Exchange, writer: vtc.XmlWriter) -> Response:
    """A whole answer (the bridge always asks for one): calls as XML in content, as JSON or as a stream."""
    exchange.route = exchange.route or "vtc"
    answer = to_client(exchange.complete_tools(), writer)
    exchange.log(200)
    if not exchange.request.stream:
        return json_response(answer)
    chunks = completion_chunks(answer, ChunkHeader.new(exchange.request.model),
                               include_usage=exchange.request.include_usage, role_sent=False)
    return sse_response(iter([*map(sse.encode_event, chunks), sse.DONE]))


def to_client(answer: dict[str, Any], writer: vtc.XmlWriter) -> dict[str, Any]:
    """Each choice's calls written into its content as XML; `tool_calls` removed, finish_reason `stop`."""
    for choice in answer["choices"]:
        message = choice["message"]
        calls = message.pop("tool_calls", None) or []
        if calls:
            segments: list[Segment] = [Text(message.get("content") or "")]
            segments += [Call(c["function"]["name"], _arguments(c), "", "native") for c in calls]
            message["content"] = writer.write(segments)
            choice["finish_reason"] = "stop"
    return answer


def _stream(exchange: Exchange, writer: vtc.XmlWriter) -> Response:
    exchange.route = "vtc_stream"
    stream = exchange.upstream.stream(exchange.upstream_request(stream=True))
    return relay_response(exchange, stream, StreamConverter(exchange, writer).convert)


class StreamConverter:
    """Upstream chunks in, client chunks out: content scanned as it arrives, calls (from the text or from native
    tool-call deltas) judged and written as XML, finish_reason `stop`."""

    def __init__(self, exchange: Exchange, writer: vtc.XmlWriter) -> None:
        self._exchange = exchange
        self._request = exchange.tool_request()
        settings = exchange.settings
        self._scanner = vtc.BoundedScanner(lambda: scanner(self._request.tools, self._request.dialects),
                                           settings.max_buffer_bytes)
        self._writer = writer
        self._native: dict[int, dict[str, str]] = {}
        self._raw: list[str] = []  # for the transform log
        self._sent: list[str] = []

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

    def _convert_choice(self, chunk: dict[str, Any], choice: dict[str, Any]) -> list[dict[str, Any]]:
        delta = dict(choice.get("delta") or {})
        text = delta.pop("content", None) or ""
        for call in delta.pop("tool_calls", None) or []:
            self._collect(call)
        content = self._writer.write(self._judge(self._scanner.feed(text))) if text else ""
        finish = choice.get("finish_reason")
        out = []
        self._raw.append(text)
        if finish:
            content += self._writer.write(self._judge(self._scanner.finish() + self._native_calls()))
            self._record(content, finish)
        self._sent.append(content)
        if content or (delta and not finish):
            out.append({**chunk, "choices": [{**choice, "delta": {**delta, **({"content": content} if content
                                                                                else {})}, "finish_reason": None}]})
        if finish:
            out.append({**chunk, "choices": [{**choice, "delta": {}, "finish_reason":
                                              "stop" if finish == "tool_calls" else finish}]})
        return out

    def _record(self, content: str, finish: str) -> None:
        self._exchange.raw_texts = ["".join(self._raw)]
        self._exchange.final = {"choices": [{"message": {"content": "".join(self._sent) + content},
                                             "finish_reason": "stop" if finish == "tool_calls" else finish}]}

    def _collect(self, call: dict[str, Any]) -> None:
        slot = self._native.setdefault(int(call.get("index") or 0), {"name": "", "arguments": ""})
        function = call.get("function") or {}
        slot["name"] += function.get("name") or ""
        slot["arguments"] += function.get("arguments") or ""

    def _native_calls(self) -> list[Segment]:
        calls: list[Segment] = [Call(slot["name"], slot["arguments"], f'{{"name": "{slot["name"]}", "arguments": '
                                     f'{slot["arguments"] or "{}"}}}', "native")
                                for _, slot in sorted(self._native.items())]
        self._native.clear()
        return calls

    def _judge(self, segments: list[Segment]) -> list[Segment]:
        """The same judgement as for any answer: policy, schema typing, access policy."""
        extraction = accept(segments, self._request.tools, self._request.policy)
        extraction.segments = police(extraction, self._request.access)
        self._exchange.outcome.add(extraction)
        self._exchange.outcome.calls.extend(call.name for call in extraction.calls)
        return extraction.segments


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(call["function"]["arguments"])
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
