"""What the routes produce, in no client's wire protocol: a finished answer, or a stream of events (text and
reasoning deltas, a complete validated call, a finish, usage, a keep-alive, a failure). Each front end
(`toolproxy/fronts/`) encodes them in its own protocol. Pure, no I/O.

The core itself works in chat completions, the protocol every upstream speaks: an `Answer` keeps the completion
it was read from, and a relayed upstream event keeps its chunk, so that a front speaking that same protocol can
give its client exactly what the upstream sent (its extra fields included); every other front reads the neutral
fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.errors import ProxyError

Envelope = Mapping[str, Any]  # the upstream event's own fields (id, created, model, ...) an event was made under


@dataclass(frozen=True, slots=True)
class CallOut:
    """A validated call as the client gets it: its id, the tool's name, the arguments as JSON text."""

    id: str
    name: str
    arguments: str

    def input(self) -> dict[str, Any]:
        """The arguments as an object (they were validated as one; anything else reads as empty)."""
        try:
            value = json.loads(self.arguments)
        except (ValueError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Turn:
    """One choice of a finished answer: what the model said, thought and called, and why it stopped."""

    index: int
    text: str | None
    reasoning: str | None
    calls: tuple[CallOut, ...]
    finish: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the upstream reported them (None where it did not)."""

    input_tokens: int | None = None
    output_tokens: int | None = None

    @classmethod
    def of(cls, usage: Any) -> Usage | None:
        if not isinstance(usage, dict):
            return None
        return cls(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))


@dataclass(frozen=True, slots=True)
class Answer:
    """A finished answer: `completion` is the chat completion the core made (ids assigned, calls validated)."""

    completion: dict[str, Any]

    @property
    def model(self) -> str:
        return str(self.completion.get("model") or "")

    @property
    def usage(self) -> Usage | None:
        return Usage.of(self.completion.get("usage"))

    def turns(self) -> list[Turn]:
        return [_turn(position, choice) for position, choice in enumerate(self.completion.get("choices") or [])]


def _turn(position: int, choice: dict[str, Any]) -> Turn:
    message = choice.get("message") or {}
    calls = tuple(CallOut(str(call.get("id") or ""), str(call["function"].get("name") or ""),
                          str(call["function"].get("arguments") or "{}"))
                  for call in message.get("tool_calls") or [] if isinstance(call.get("function"), dict))
    index = choice.get("index")
    return Turn(index if isinstance(index, int) else position, message.get("content"),
                message.get("reasoning_content"), calls, str(choice.get("finish_reason") or "stop"))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# The events of a streamed answer. `index` is the choice's (n > 1 gives several).


@dataclass(frozen=True, slots=True)
class Opened:
    """The stream is committed before anything of the answer is known (a buffered answer is still on its way)."""

    choices: int


@dataclass(frozen=True, slots=True)
class Delta:
    """Text and reasoning that may go to the client now; `role`: the choice begins here."""

    index: int
    text: str = ""
    reasoning: str = ""
    role: str | None = None
    envelope: Envelope | None = None


@dataclass(frozen=True, slots=True)
class CallReady:
    """A call, complete and validated; `position`: its place among the choice's calls."""

    index: int
    position: int
    call: CallOut
    envelope: Envelope | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """The choice is over: `reason` as chat completions name it (stop, length, tool_calls, ...)."""

    index: int
    reason: str
    envelope: Envelope | None = None


@dataclass(frozen=True, slots=True)
class UsageReport:
    """The upstream's usage, after every choice has finished; `envelope`: the event it came in."""

    usage: Any
    envelope: Envelope | None = None


@dataclass(frozen=True, slots=True)
class Relayed:
    """An upstream event passed on unchanged in meaning (cleaned): a front that speaks chat completions sends
    the chunk as it is, any other reads what it means (`events_of`, only then: the chat path never pays)."""

    chunk: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Whole:
    """A buffered answer, complete: the rest of the stream at once."""

    answer: Answer


@dataclass(frozen=True, slots=True)
class Failed:
    """The stream ends with this error (the client hears it in its protocol's error event)."""

    error: ProxyError


class KeepAlive:
    """Nothing to say yet: something that keeps idle timeouts at bay and reveals a vanished client."""


class Done:
    """The stream is complete."""


KEEP_ALIVE = KeepAlive()
DONE = Done()

Event = Delta | CallReady | Finished | UsageReport
# What a stream hands a front end, a batch (one write) at a time. Bytes are events the front end's own shortcut
# already encoded (`Front.forward`): the core never writes a protocol's bytes itself.
Item = Event | Relayed | Opened | Whole | Failed | KeepAlive | Done | bytes


def events_of(chunk: dict[str, Any]) -> list[Event]:
    """What a relayed chunk means: per choice its role, text and reasoning, its finish; then the usage."""
    events: list[Event] = []
    for position, choice in enumerate(chunk.get("choices") or []):
        index = choice.get("index") if isinstance(choice.get("index"), int) else position
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        text, reasoning, role = delta.get("content"), delta.get("reasoning_content"), delta.get("role")
        if text or reasoning or role:
            events.append(Delta(index, text if isinstance(text, str) else "",
                                reasoning if isinstance(reasoning, str) else "",
                                role if isinstance(role, str) else None, chunk))
        if choice.get("finish_reason"):
            events.append(Finished(index, str(choice["finish_reason"]), chunk))
    if isinstance(chunk.get("usage"), dict):
        events.append(UsageReport(chunk["usage"], chunk))
    return events


def carries_content(item: Item) -> bool:
    """Whether the client learns something of the answer from this item (the time to its first byte)."""
    if isinstance(item, Delta):
        return bool(item.text)
    if isinstance(item, Relayed):
        return any(isinstance(choice, dict) and isinstance(choice.get("delta"), dict)
                   and (choice["delta"].get("content") or choice["delta"].get("tool_calls"))
                   for choice in item.chunk.get("choices") or [])
    return isinstance(item, (CallReady, Whole))
