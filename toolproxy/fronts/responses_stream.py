"""The core's stream items as Responses events: `response.created` and `response.in_progress` first; then
each output item opened (`response.output_item.added`), written (text, reasoning summary, a call's arguments
or a freeform call's input, as deltas) and closed (`response.output_item.done`, the whole item under the same
id); finally `response.completed` (or `response.incomplete`) with the whole response, or `response.failed`.
Every event carries its type on an `event:` line and a `sequence_number`. Pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolproxy.errors import ProxyError
from toolproxy.fronts.base import StreamEncoder
from toolproxy.fronts.responses_output import (
    ResponseHeader,
    call_item,
    message_item,
    new_id,
    reasoning_item,
    status_of,
    text_part,
    usage_of,
)
from toolproxy.fronts.responses_tools import ToolNames
from toolproxy.transform.turn import (
    Answer,
    CallReady,
    Delta,
    Done,
    Event,
    Failed,
    Finished,
    Item,
    KeepAlive,
    Relayed,
    UsageReport,
    Whole,
    events_of,
)
from toolproxy.wire import sse

KEEP_ALIVE = sse.encode_comment("keep-alive")
Sent = dict[str, Any]  # one event, before its sequence number


@dataclass(slots=True)
class _Writing:
    """The reasoning or message item whose text is still coming."""

    kind: str  # "reasoning" or "message"
    id: str
    index: int
    text: str = ""


class ResponsesEncoder(StreamEncoder):
    """One response's events; `header` is the response the events belong to, `names` map calls back to the
    client's tools."""

    def __init__(self, header: ResponseHeader, names: ToolNames) -> None:
        self._header = header
        self._names = names
        self._sequence = 0
        self._started = False
        self._output: list[dict[str, Any]] = []  # finished items, in order
        self._writing: _Writing | None = None
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None

    def encode(self, batch: list[Item]) -> bytes:
        events: list[Sent] = []
        if not self._started:
            self._started = True
            snapshot = self._header.response("in_progress", [])
            events += [{"type": "response.created", "response": snapshot},
                       {"type": "response.in_progress", "response": snapshot}]
        out = [self._encoded(events)]
        for item in batch:
            if isinstance(item, KeepAlive):
                out.append(KEEP_ALIVE)
            else:
                out.append(self._encoded(self._events(item)))
        return b"".join(out)

    def _encoded(self, events: list[Sent]) -> bytes:
        out = []
        for event in events:
            out.append(sse.encode_named(event["type"], {"type": event["type"], "sequence_number": self._sequence,
                                                        **event}))
            self._sequence += 1
        return b"".join(out)

    def _events(self, item: Item) -> list[Sent]:
        if isinstance(item, Relayed):
            return [sent for event in events_of(item.chunk) for sent in self._event(event)]
        if isinstance(item, (Delta, CallReady, Finished, UsageReport)):
            return self._event(item)
        if isinstance(item, Whole):
            return [sent for event in _as_events(item.answer) for sent in self._event(event)]
        if isinstance(item, Failed):
            return self._failed(item.error)
        if isinstance(item, Done):
            return self._completed()
        return []  # Opened: the response was announced already; bytes: this front has no shortcut

    def _event(self, event: Event) -> list[Sent]:
        if isinstance(event, UsageReport):
            self._usage = usage_of(event.usage)
            return []
        if event.index != 0:  # Responses has one choice; the core asks for one
            return []
        if isinstance(event, Delta):
            return [*self._written("reasoning", event.reasoning), *self._written("message", event.text)]
        if isinstance(event, CallReady):
            return [*self._closed(), *self._call(call_item(event.call, self._names))]
        self._finish = event.reason
        return self._closed()

    def _written(self, kind: str, text: str) -> list[Sent]:
        if not text:
            return []
        events = [] if self._writing is not None and self._writing.kind == kind else self._opened(kind)
        writing = self._writing
        assert writing is not None
        writing.text += text
        if kind == "message":
            return [*events, {"type": "response.output_text.delta", **_at(writing), "content_index": 0,
                              "delta": text, "logprobs": []}]
        return [*events, {"type": "response.reasoning_summary_text.delta", **_at(writing), "summary_index": 0,
                          "delta": text}]

    def _opened(self, kind: str) -> list[Sent]:
        events = self._closed()
        writing = self._writing = _Writing(kind, new_id("msg" if kind == "message" else "rs"), len(self._output))
        if kind == "message":
            added, part = message_item(writing.id, None, "in_progress"), {"content_index": 0, "part": text_part("")}
            name = "response.content_part.added"
        else:
            added, part = reasoning_item(writing.id, None), {"summary_index": 0,
                                                             "part": {"type": "summary_text", "text": ""}}
            name = "response.reasoning_summary_part.added"
        return [*events, {"type": "response.output_item.added", "output_index": writing.index, "item": added},
                {"type": name, **_at(writing), **part}]

    def _closed(self, status: str | None = None) -> list[Sent]:
        """The item being written, finished: its last text event, its part closed, then the whole item."""
        writing, self._writing = self._writing, None
        if writing is None:
            return []
        if writing.kind == "message":
            item = message_item(writing.id, writing.text, status or status_of(self._finish)[0])
            events: list[Sent] = [
                {"type": "response.output_text.done", **_at(writing), "content_index": 0, "text": writing.text,
                 "logprobs": []},
                {"type": "response.content_part.done", **_at(writing), "content_index": 0,
                 "part": text_part(writing.text)}]
        else:
            item = reasoning_item(writing.id, writing.text)
            events = [{"type": "response.reasoning_summary_text.done", **_at(writing), "summary_index": 0,
                       "text": writing.text},
                      {"type": "response.reasoning_summary_part.done", **_at(writing), "summary_index": 0,
                       "part": {"type": "summary_text", "text": writing.text}}]
        self._output.append(item)
        return [*events, {"type": "response.output_item.done", "output_index": writing.index, "item": item}]

    def _call(self, item: dict[str, Any]) -> list[Sent]:
        """A call arrives complete: opened, its whole arguments (or input) as one delta, closed."""
        index, at = len(self._output), {"item_id": item["id"], "output_index": len(self._output)}
        self._output.append(item)
        if item["type"] == "custom_tool_call":
            field, name, extra = "input", "response.custom_tool_call_input", {}
        else:
            field, name, extra = "arguments", "response.function_call_arguments", {"name": item["name"]}
        return [{"type": "response.output_item.added", "output_index": index,
                 "item": {**item, "status": "in_progress", field: ""}},
                {"type": f"{name}.delta", **at, "delta": item[field]},
                {"type": f"{name}.done", **at, **extra, field: item[field]},
                {"type": "response.output_item.done", "output_index": index, "item": item}]

    def _completed(self) -> list[Sent]:
        events = self._closed()
        status, reason = status_of(self._finish)
        response = self._header.response(status, self._output, self._usage, incomplete=reason)
        return [*events, {"type": f"response.{status}", "response": response}]

    def _failed(self, error: ProxyError) -> list[Sent]:
        events = self._closed("incomplete")
        failure = {"code": error.code, "message": error.message}
        response = self._header.response("failed", self._output, self._usage, error=failure)
        return [*events, {"type": "response.failed", "response": response}]


def _at(writing: _Writing) -> dict[str, Any]:
    return {"item_id": writing.id, "output_index": writing.index}


def _as_events(answer: Answer) -> list[Event]:
    """A finished answer told as the events of its first choice: reasoning, text, calls, finish, usage."""
    events: list[Event] = []
    for turn in answer.turns()[:1]:
        events.append(Delta(0, reasoning=turn.reasoning or ""))
        events.append(Delta(0, text=turn.text or ""))
        events += [CallReady(0, position, call) for position, call in enumerate(turn.calls)]
        events.append(Finished(0, turn.finish))
    return [*events, UsageReport(answer.completion.get("usage"))]
