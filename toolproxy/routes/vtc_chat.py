"""`POST /v1/chat/completions` for virtual-tool-calling clients (Cline, Roo Code, Kilo Code): their calls go
through the core (validation, loop guard, access policy, log) and come back as XML in content.

Streaming text goes out live; only what may be the start of a call is held back, up to `max_buffer_bytes`; the
stream is the incremental route's (routes/incremental.py), its calls written as XML.
With `vtc_native_bridge`, the client's prompt is turned into native `tools` and its XML history into
`tool_calls`, the backend answers natively, and the answer is turned back into the client's XML.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from toolproxy.clients import vtc
from toolproxy.clients.history import history_to_native
from toolproxy.clients.prompt import ClientTools
from toolproxy.dialects.base import Call, Segment, Text
from toolproxy.routes import incremental
from toolproxy.routes.chat import Reply, loop_guard_answer, loop_guard_reason
from toolproxy.routes.exchange import Exchange
from toolproxy.routes.streams import relay
from toolproxy.transform.turn import Answer, CallOut, CallReady, Delta, Finished, Item

logger = logging.getLogger(__name__)
Writer = Callable[[], vtc.XmlWriter]


def answer(exchange: Exchange) -> Reply:
    """The VTC counterpart of chat.answer."""
    messages = exchange.request.messages
    client = vtc.client_tools(messages)
    exchange.offer({**client.index(), **exchange.request.tools})
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
    exchange.record.route = "vtc_bridge"
    return True


def _complete(exchange: Exchange, writer: Writer) -> Answer:
    """A whole answer (the bridge always asks for one): calls as XML in content."""
    exchange.record.route = exchange.record.route or "vtc"
    answer = to_client(exchange.complete_tools(), writer)
    exchange.delivered(answer)
    exchange.log(200)
    return Answer(answer)


def to_client(answer: dict[str, Any], writer: Writer) -> dict[str, Any]:
    """Each choice's calls written into its content as XML, after its text; `tool_calls` removed, finish_reason
    `stop`."""
    for choice in answer["choices"]:
        message = choice["message"]
        calls = message.pop("tool_calls", None) or []
        if calls:
            outs = [CallOut(c.get("id") or "", c["function"]["name"], c["function"]["arguments"]) for c in calls]
            message["content"] = writer().write([Text(message.get("content") or ""), *map(_segment, outs)])
            choice["finish_reason"] = "stop"
    return answer


def _stream(exchange: Exchange, writer: Writer) -> Reply:
    """The incremental route's stream with its calls written as XML: the same text and calls as the whole answer
    (`_complete`), text live. Where incremental could not give the same answer, the answer is made whole."""
    reason = incremental.fallback_reason(exchange)
    if reason is not None:
        exchange.notes.append(f"vtc stream: answered whole: {reason}")
        return _complete(exchange, writer)
    exchange.record.route = "vtc_stream"
    stream = exchange.open_stream()
    # Only what may be the start of a call is held back, and no more than max_buffer_bytes of it.
    live = incremental.LiveConverter(exchange, limit=exchange.settings.max_buffer_bytes, in_order=True)
    xml = XmlCalls(exchange, writer)
    return relay(exchange, stream, lambda chunk: xml.rewrite(live.convert(chunk)), lambda: xml.rewrite(live.finish()))


class XmlCalls:
    """Neutral events for a VTC client: text as it comes, each call written as XML where the model wrote it (the
    whole answer puts them after its text: a stream cannot hold back the text that follows a call), finish_reason
    `stop`."""

    def __init__(self, exchange: Exchange, writer: Writer) -> None:
        self._exchange = exchange
        self._writer = writer
        self._choices: dict[int, _Choice] = {}

    def rewrite(self, items: list[Item]) -> list[Item]:
        out: list[Item] = []
        for item in items:
            if isinstance(item, Delta) and item.text:
                out.append(replace(item, text=self._choice(item.index).write(Text(item.text))))
            elif isinstance(item, CallReady):
                xml = self._choice(item.index).write(_segment(item.call))
                out.append(Delta(item.index, xml, envelope=item.envelope))
            elif isinstance(item, Finished):
                out.append(self._finish(item))
            else:
                out.append(item)
        return out

    def _choice(self, index: int) -> _Choice:
        if index not in self._choices:
            self._choices[index] = _Choice(self._writer())
        return self._choices[index]

    def _finish(self, finished: Finished) -> Finished:
        reason = "stop" if finished.reason == "tool_calls" else finished.reason
        if finished.index == min(self._choices, default=finished.index):  # the transform log shows the first
            sent = "".join(self._choice(finished.index).sent)
            self._exchange.delivered({"choices": [{"message": {"content": sent or None}, "finish_reason": reason}]})
        return replace(finished, reason=reason)


class _Choice:
    def __init__(self, writer: vtc.XmlWriter) -> None:
        self._writer = writer
        self.sent: list[str] = []

    def write(self, segment: Segment) -> str:
        written = self._writer.write([segment])
        self.sent.append(written)
        return written


def _segment(call: CallOut) -> Segment:
    return Call(call.name, call.input(), "", "native")
