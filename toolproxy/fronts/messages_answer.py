"""Anthropic Messages answers: a finished answer as one `message`, a stream's neutral items as Messages events,
and errors as Anthropic error objects.

A stream is, exactly: `message_start`; per content block `content_block_start`, its deltas, `content_block_stop`
(a thinking block closed by its `signature_delta` before any text or tool block starts; a tool_use block opened
with `input: {}`, its arguments in one `input_json_delta`, then its stop: Claude Code builds a call's input only
from the fragments and parses it at the stop); `message_delta` with the stop reason and the usage;
`message_stop`. `ping` while the answer is made; `error` when it fails. A finished answer told as a stream goes
through the same block writers as a whole message's content, so the message a client accumulates from the
stream is the whole message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolproxy.errors import ProxyError
from toolproxy.fronts.base import StreamEncoder
from toolproxy.transform.tokens import estimate_written
from toolproxy.transform.turn import (
    Answer,
    CallOut,
    CallReady,
    Delta,
    Done,
    Failed,
    Finished,
    Item,
    KeepAlive,
    Relayed,
    Turn,
    Usage,
    UsageReport,
    Whole,
    events_of,
)
from toolproxy.wire import jsonwire
from toolproxy.wire.ids import random_id

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error",
               504: "timeout_error", 529: "overloaded_error"}


@dataclass(frozen=True, slots=True)
class Framing:
    """What every answer to one request says besides the model's words."""

    model: str  # as the client named it
    thinking: bool  # reasoning goes out as thinking blocks
    prompt_tokens: Callable[[], int]  # the estimate, for when the upstream did not count the prompt


def message_of(answer: Answer, framing: Framing) -> dict[str, Any]:
    """A finished answer as Anthropic's `message` (its first choice: Messages has no `n`)."""
    turns = answer.turns()
    turn = turns[0] if turns else Turn(0, None, None, (), "stop")
    content: list[dict[str, Any]] = []
    if framing.thinking and turn.reasoning:
        content.append({"type": "thinking", "thinking": turn.reasoning, "signature": signature(turn.reasoning)})
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    content += [_tool_use(call, call.input()) for call in turn.calls]
    return {**_head(new_message_id(), framing, _input_tokens(answer.usage, framing)), "content": content,
            "stop_reason": stop_reason(turn.finish), "usage": usage_of(answer.usage, framing, _said(turn))}


def stop_reason(finish: str | None) -> str:
    return STOP_REASONS.get(finish or "stop", "end_turn")


def usage_of(usage: Usage | None, framing: Framing, said: int) -> dict[str, int]:
    """The upstream's counts where it gave them; else the estimates from the prompt and the `said` characters
    of the answer (never 0 for a prompt: sgl-project/sglang#20678)."""
    output = usage.output_tokens if usage is not None and usage.output_tokens is not None else estimate_written(said)
    return {"input_tokens": _input_tokens(usage, framing), "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "output_tokens": output}


def error_object(error: ProxyError) -> dict[str, Any]:
    kind = ERROR_TYPES.get(error.status) or ("api_error" if error.status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def signature(thinking: str) -> str:
    """An opaque mark for a thinking block (clients send it back; the proxy never sends thinking upstream)."""
    return _signed(hashlib.sha256(_utf8(thinking)))


def new_message_id() -> str:
    return "msg_" + random_id(24)


def tool_use_id(call_id: str) -> str:
    """The call's id as Anthropic writes ids; results name it back, and it goes upstream as it is."""
    return "toolu_" + call_id.removeprefix("call_")


def _head(message_id: str, framing: Framing, input_tokens: int) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": framing.model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                      "output_tokens": 0}}


def _input_tokens(usage: Usage | None, framing: Framing) -> int:
    return usage.input_tokens if usage is not None and usage.input_tokens else framing.prompt_tokens()


def _said(turn: Turn) -> int:
    """The characters of what the model wrote: reasoning, text and calls."""
    return len(turn.reasoning or "") + len(turn.text or "") + sum(len(call.name + call.arguments)
                                                                   for call in turn.calls)


def _tool_use(call: CallOut, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id(call.id), "name": call.name, "input": arguments}


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _signed(digest: Any) -> str:
    return "toolproxy-" + str(digest.hexdigest())[:32]


def event(name: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + jsonwire.dumps({"type": name, **payload}) + b"\n\n"


class MessagesEncoder(StreamEncoder):
    """A stream's items as Messages events; it keeps which block is open, the stop reason and the usage."""

    def __init__(self, framing: Framing) -> None:
        self._framing = framing
        self._out: list[bytes] = []
        self._started = self._ended = False
        self._open: str | None = None  # the kind of the block being written: "text" or "thinking"
        self._index = 0  # the open block's index, or the next one's
        self._thought = hashlib.sha256()
        self._stop: str | None = None
        self._usage: Usage | None = None
        self._said = 0  # characters the model wrote

    def encode(self, batch: list[Item]) -> bytes:
        for item in batch:
            if not self._ended:
                self._item(item)
        out, self._out = b"".join(self._out), []
        return out

    def _item(self, item: Item) -> None:
        if isinstance(item, Relayed):
            for meaning in events_of(item.chunk):
                self._item(meaning)
        elif isinstance(item, Failed):
            self._emit("error", {"error": error_object(item.error)["error"]})
            self._ended = True
        elif isinstance(item, Whole):
            self._whole(item.answer)
        elif not isinstance(item, bytes):  # bytes come only from a front's own shortcut: this one has none
            self._start()
            self._event(item)

    def _event(self, item: Item) -> None:
        if isinstance(item, KeepAlive):
            self._emit("ping", {})
        elif isinstance(item, Delta) and item.index == 0:
            self._said += len(item.reasoning) + len(item.text)
            if item.reasoning and self._framing.thinking:
                self._thinking(item.reasoning)
            if item.text:
                self._text(item.text)
        elif isinstance(item, CallReady) and item.index == 0:
            self._said += len(item.call.name) + len(item.call.arguments)
            self._call(item.call)
        elif isinstance(item, Finished) and item.index == 0:
            self._close()
            self._stop = item.reason
        elif isinstance(item, UsageReport):
            self._usage = Usage.of(item.usage)
        elif isinstance(item, Done):
            self._end()

    def _whole(self, answer: Answer) -> None:
        """A buffered answer: its blocks as `message_of` writes them, then the end."""
        self._usage = answer.usage  # before message_start: it can tell the real prompt count
        self._start()
        turns = answer.turns()
        if turns:
            turn = turns[0]
            self._said += _said(turn)
            if self._framing.thinking and turn.reasoning:
                self._thinking(turn.reasoning)
            if turn.text:
                self._text(turn.text)
            for call in turn.calls:
                self._call(call)
            self._stop = turn.finish
        self._end()

    def _start(self) -> None:
        if not self._started:
            self._started = True
            head = _head(new_message_id(), self._framing, _input_tokens(self._usage, self._framing))
            self._emit("message_start", {"message": head})

    def _thinking(self, text: str) -> None:
        if self._open != "thinking":
            self._close()
            self._begin("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            self._thought = hashlib.sha256()
        self._thought.update(_utf8(text))
        self._delta({"type": "thinking_delta", "thinking": text})

    def _text(self, text: str) -> None:
        if self._open != "text":
            self._close()
            self._begin("text", {"type": "text", "text": ""})
        self._delta({"type": "text_delta", "text": text})

    def _call(self, call: CallOut) -> None:
        self._close()
        self._begin("tool_use", _tool_use(call, {}))
        self._delta({"type": "input_json_delta", "partial_json": call.arguments})
        self._close()

    def _begin(self, kind: str, block: dict[str, Any]) -> None:
        self._open = kind
        self._emit("content_block_start", {"index": self._index, "content_block": block})

    def _delta(self, delta: dict[str, Any]) -> None:
        self._emit("content_block_delta", {"index": self._index, "delta": delta})

    def _close(self) -> None:
        if self._open is None:
            return
        if self._open == "thinking":
            self._delta({"type": "signature_delta", "signature": _signed(self._thought)})
        self._emit("content_block_stop", {"index": self._index})
        self._open = None
        self._index += 1

    def _end(self) -> None:
        self._start()
        self._close()
        delta = {"stop_reason": stop_reason(self._stop), "stop_sequence": None}
        self._emit("message_delta", {"delta": delta, "usage": usage_of(self._usage, self._framing, self._said)})
        self._emit("message_stop", {})
        self._ended = True

    def _emit(self, name: str, payload: dict[str, Any]) -> None:
        self._out.append(event(name, payload))
