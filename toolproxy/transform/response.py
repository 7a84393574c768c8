"""From the upstream's answer to what the client receives: tool calls out of the text, the message's shape, ids,
finish_reason."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolproxy.dialects.base import Call, Segment, Text, ToolIndex
from toolproxy.meaning.access import AccessPolicy
from toolproxy.meaning.extraction import Extraction, Policy, accept, extract
from toolproxy.wire import jsonwire
from toolproxy.wire.cleaning import clean_completion
from toolproxy.wire.ids import random_id
from toolproxy.wire.shape import check_completion


def new_call_id(style: str = "openai") -> str:
    if style == "mistral":
        return random_id(9)
    return "call_" + random_id(24)


def new_completion_id() -> str:
    return "chatcmpl-" + random_id(24)


@dataclass(slots=True)
class Outcome:
    """What the transform did to one answer, for the log line (and later the dashboard)."""

    calls: list[str] = field(default_factory=list)
    dialects: list[str] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    repairs: int = 0
    details: list[dict[str, Any]] = field(default_factory=list)  # each returned call, for the transform log
    denied: list[str] = field(default_factory=list)  # the dialect of each call the access policy refused
    attempts: list[tuple[str, str, bool]] = field(default_factory=list)  # per call attempted (extraction.py)

    def add(self, extraction: Extraction) -> None:
        self.dialects.extend(call.dialect for call in extraction.calls)
        self.issues.extend(extraction.issues)
        self.failures.extend(extraction.failures)
        self.denied.extend(extraction.denied)
        self.attempts.extend(extraction.attempts)

    def returned(self, calls: Sequence[Call], wires: Sequence[str]) -> None:
        """The calls the client gets, named for the log line and detailed for the transform log; `wires`: the
        arguments as the client gets them, the very strings, by which its record refers to them."""
        self.calls.extend(call.name for call in calls)
        self.details.extend({"name": call.name, "arguments": call.arguments, "raw_arguments": call.source,
                             "source": call.source, "dialect": call.dialect, "wire": wire}
                            for call, wire in zip(calls, wires, strict=True))


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """What the client asked of tool calls, and the model's settings for finding them."""

    tools: ToolIndex  # the tools the answer may call (tool_choice may have narrowed them)
    dialects: Sequence[str] = ()
    policy: Policy = field(default_factory=Policy)
    parallel_calls: bool = True
    allow_calls: bool = True
    id_style: str = "openai"
    access: AccessPolicy = field(default_factory=AccessPolicy)


def transform_completion(completion: dict[str, Any], request: ToolRequest,
                         model: str | None = None) -> tuple[dict[str, Any], Outcome]:
    """Clean the answer and turn the tool calls written in its text into `tool_calls`."""
    check_completion(completion)
    answer = clean_completion(completion, request.policy.reasoning)
    if model is not None:
        answer["model"] = model
    outcome = Outcome()
    answer["choices"] = [_transform_choice(choice, request, outcome) for choice in answer["choices"]]
    if all(not choice["message"].get("content") and not choice["message"].get("tool_calls")
           for choice in answer["choices"]):
        outcome.issues.append(EMPTY_ANSWER)
    return answer, outcome


# Ollama answers a call it failed to parse with an empty message (ollama/ollama#17274), llama-cpp-python can answer
# `""` under its tool grammar: an answer with nothing in it is worth an issue, and is counted (observe/metrics.py).
EMPTY_ANSWER = "empty answer: the upstream returned neither text nor a tool call"


def _transform_choice(choice: dict[str, Any], request: ToolRequest, outcome: Outcome) -> dict[str, Any]:
    message = dict(choice["message"])
    content, thought = message.get("content"), message.pop("reasoning_content", None)
    native, malformed = _native_segments(message.get("tool_calls"))
    outcome.issues.extend(malformed)
    if not request.allow_calls:  # tool_choice "none": nothing is extracted and no call is ever returned
        text_part, native_part = Extraction([Text(content or "")]), Extraction([Text(s.source) for s in native])
        native_part.issues += [f"native: call to {s.name!r} dropped (tool_choice is none)" for s in native]
    else:
        policy = replace(request.policy, demanded=None) if native else request.policy  # the call came natively
        text_part = extract(content or "", request.tools, request.dialects, policy,
                            reasoning_field=None if native else thought)
        native_part = accept(list(native), request.tools, request.policy)
    combined = Extraction([*native_part.calls, *text_part.segments, *_texts(native_part)],
                          [*native_part.issues, *text_part.issues], [*native_part.failures, *text_part.failures],
                          _reasoning(text_part, thought, native, request), text_part.kept_reasoning)
    combined.attempts = [*native_part.attempts, *text_part.attempts]
    combined.lead = text_part.lead
    combined.segments = police(combined, request.access)
    outcome.add(combined)
    calls = _limit_calls([_wire_call(call) for call in combined.calls], request.parallel_calls, outcome)
    _assign_ids(calls, request.id_style)
    outcome.returned(combined.calls[:len(calls)], [call["function"]["arguments"] for call in calls])
    message["role"] = "assistant"
    message["content"] = combined.content() if content or combined.calls or native else content
    if combined.reasoning:
        message["reasoning_content"] = combined.reasoning
    if calls:
        message["tool_calls"] = calls
    else:
        message.pop("tool_calls", None)
    return {**choice, "message": message, "finish_reason": finish_reason(choice.get("finish_reason"), calls)}


def police(extraction: Extraction, access: AccessPolicy) -> list[Segment]:
    """Calls the access policy refuses are replaced by the sentence saying which rule refused them."""
    policed: list[Segment] = []
    for segment in extraction.segments:
        refusal = access.refusal(segment.name, segment.arguments) if isinstance(segment, Call) else None
        if isinstance(segment, Call) and refusal is not None:
            extraction.issues.append(f"access policy: {refusal}")
            extraction.denied.append(segment.dialect)
            policed.append(Text(f"\n\n{refusal}\n\n"))
        else:
            policed.append(segment)
    return policed


def _reasoning(text_part: Extraction, thought: Any, native: list[Call], request: ToolRequest) -> str | None:
    """The reasoning for `reasoning_content`. With native calls the server's reasoning field was not given to the
    extraction (no call is rescued from it), so it is kept here, unless the model's setting drops reasoning."""
    if not request.allow_calls or (native and thought):
        if request.policy.reasoning == "drop":
            return text_part.reasoning
        return "\n\n".join(piece for piece in (thought, text_part.reasoning) if piece) or None
    return text_part.reasoning


def _texts(extraction: Extraction) -> list[Text]:
    return [segment for segment in extraction.segments if isinstance(segment, Text)]


def _native_segments(calls: Any) -> tuple[list[Call], list[str]]:
    """Calls the upstream's own parser returned, judged like any other: the same policies and schema typing; a
    refused one goes back as text (its JSON), never silently away. One that is no call at all (`5`, a null
    function, a name that is no string) was never text the model wrote: it is dropped, and an issue says so."""
    if not isinstance(calls, list):
        return [], []
    found, malformed = [], []
    for call in calls:
        if not is_call_shaped(call):
            malformed.append(f"native: malformed native call dropped: {json.dumps(call, ensure_ascii=False)[:200]}")
            continue
        function = call["function"]
        name, arguments = function["name"], function.get("arguments")
        # The arguments exactly as the server sent them, so a refused call reads as the model wrote it.
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        source = f'{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {raw}}}'
        found.append(Call(name, arguments, source, "native"))
    return found, malformed


def is_call_shaped(call: Any) -> bool:
    """A tool call as chat completions shape one: an object whose `function` has a name, arguments optional."""
    function = call.get("function") if isinstance(call, dict) else None
    return (isinstance(function, dict) and isinstance(function.get("name"), str) and bool(function["name"])
            and isinstance(function.get("arguments"), (str, dict, type(None))))


def _limit_calls(calls: list[dict[str, Any]], parallel: bool, outcome: Outcome) -> list[dict[str, Any]]:
    """`parallel_tool_calls: false` gets the first call only; the client asked for one at a time."""
    if parallel or len(calls) <= 1:
        return calls
    outcome.issues.append(f"parallel_tool_calls is false: {len(calls) - 1} further call(s) dropped")
    return calls[:1]


def finish_reason(upstream: Any, calls: Sequence[object]) -> Any:
    """`tool_calls` whenever calls are returned (clients drop calls under `stop`); never with none."""
    if calls:
        return "tool_calls"
    if upstream == "tool_calls" or upstream is None:
        return "stop"
    return upstream


def _wire_call(call: Call) -> dict[str, Any]:
    arguments = jsonwire.dumps_text(call.arguments)
    return {"id": "", "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _assign_ids(calls: list[dict[str, Any]], style: str) -> None:
    """Fresh ids, unique in the answer, in the model's style: `call_` + 24 letters or digits, or Mistral's
    exactly 9 letters or digits (its templates break on anything else). Servers' own ids (vLLM's
    `chatcmpl-tool-...`) are replaced too: clients only ever see one shape."""
    seen: set[str] = set()
    for call in calls:
        call["id"] = new_call_id(style)
        while call["id"] in seen:
            call["id"] = new_call_id(style)
        seen.add(call["id"])


def assistant_completion(text: str, model: str) -> dict[str, Any]:
    """A complete answer the proxy writes itself (the loop guard's)."""
    return {
        "id": new_completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
