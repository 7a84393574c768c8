"""A Responses request (`POST /v1/responses`) as the core's chat request. The proxy keeps no state, so the
client sends the whole history (Codex does): `previous_response_id` and item references are refused with a
400 that says so. `instructions` and every system or developer message, wherever it stands, fold in order into
one leading system message; reasoning items stay out of the upstream request. Pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolproxy.config.settings import Settings
from toolproxy.errors import InvalidRequest
from toolproxy.fronts.responses_history import STATELESS, History
from toolproxy.fronts.responses_tools import ToolNames, chat_tool_choice, chat_tools
from toolproxy.transform.chat_request import ChatRequest, Pause, chat_request, load_object
from toolproxy.transform.request_transform import with_reasoning_effort

# Fields that name state kept on a server: refused rather than answered without the history they stand for.
STATEFUL = {"previous_response_id": "previous_response_id", "conversation": "a conversation",
            "prompt": "a stored prompt"}
# What a response object repeats of its request, with the default when the request left it out.
ECHOED: dict[str, Any] = {"instructions": None, "max_output_tokens": None, "metadata": {}, "parallel_tool_calls": True,
          "reasoning": {"effort": None, "summary": None}, "store": False, "temperature": 1.0,
          "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
          "truncation": "disabled", "user": None}


@dataclass(frozen=True, slots=True)
class Decoded:
    """The chat request the core answers, and what the answer needs to be told in Responses terms."""

    chat: ChatRequest
    names: ToolNames
    echo: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # what was left out, for the transform log


def decode_responses(data: bytes, settings: Settings, pause: Pause = None) -> Decoded:
    """The request checked and translated; `pause` lets the worker's other requests run between costly steps."""
    body = load_object(data, settings.max_json_depth, settings.max_json_containers, pause=pause)
    _refuse_state(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("you must provide a model parameter (a non-empty string)", param="model",
                             code="missing_required_parameter" if model is None else "invalid_type")
    names, notes = ToolNames(), list[str]()
    tools = chat_tools(body.get("tools"), names, notes)
    choice, allowed = chat_tool_choice(body.get("tool_choice"), names, notes)
    if allowed is not None:
        tools = [tool for tool in tools if tool["function"]["name"] in allowed]
    chat: dict[str, Any] = {"model": model, "messages": _messages(body, names, notes)}
    if tools:
        chat["tools"] = tools
        if choice is not None:
            chat["tool_choice"] = choice
        if isinstance(body.get("parallel_tool_calls"), bool):
            chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    chat.update(_sampling(body))
    chat.update(_stream(body.get("stream")))
    chat.update(_response_format(body.get("text")))
    chat = with_reasoning_effort(chat, _effort(body.get("reasoning")), settings.for_model(model).reasoning_switch)
    echo = {key: default if body.get(key) is None else body[key] for key, default in ECHOED.items()}
    return Decoded(chat_request(chat, pause), names, echo, notes)


def _refuse_state(body: dict[str, Any]) -> None:
    for key, what in STATEFUL.items():
        if body.get(key) is not None:
            raise InvalidRequest(f"{key}: this proxy cannot continue from {what}; {STATELESS}", param=key,
                                 code="unsupported_parameter")
    if body.get("background") is True:
        raise InvalidRequest(f"background responses must be stored, and {STATELESS}", param="background",
                             code="unsupported_parameter")


def _messages(body: dict[str, Any], names: ToolNames, notes: list[str]) -> list[dict[str, Any]]:
    instructions, items = body.get("instructions"), body.get("input")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest("instructions must be a string", param="instructions", code="invalid_type")
    if items is None:
        raise InvalidRequest("you must provide input", param="input", code="missing_required_parameter")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list):
        raise InvalidRequest("input must be a string or an array of items", param="input", code="invalid_type")
    history = History(names, notes)
    if instructions:
        history.system.append(instructions)
    for position, item in enumerate(items):
        history.add(item, f"input[{position}]")
    messages = history.messages()
    if not messages:
        raise InvalidRequest("input holds no message to answer", param="input", code="invalid_value")
    return messages


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    chat: dict[str, Any] = {}
    limit = body.get("max_output_tokens")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidRequest("max_output_tokens must be a whole number of at least 1", param="max_output_tokens",
                                 code="invalid_value")
        chat["max_tokens"] = limit
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidRequest(f"{key} must be a number", param=key, code="invalid_type")
            chat[key] = value
    return chat


def _stream(stream: Any) -> dict[str, Any]:
    if not isinstance(stream, (bool, type(None))):
        raise InvalidRequest("stream must be true or false", param="stream", code="invalid_type")
    # The usage goes into the last event (response.completed): the upstream is asked for it.
    return {"stream": True, "stream_options": {"include_usage": True}} if stream else {}


def _response_format(text: Any) -> dict[str, Any]:
    """`text.format` as the chat protocol's `response_format` (plain text needs none)."""
    if text is None:
        return {}
    text_format = text.get("format") if isinstance(text, dict) else None
    if text_format is None or (isinstance(text_format, dict) and text_format.get("type") == "text"):
        return {}
    kind = text_format.get("type") if isinstance(text_format, dict) else None
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    if kind == "json_schema" and isinstance(text_format, dict) and isinstance(text_format.get("schema"), dict):
        schema = {key: text_format[key] for key in ("name", "description", "schema", "strict") if key in text_format}
        schema.setdefault("name", "response")
        return {"response_format": {"type": "json_schema", "json_schema": schema}}
    raise InvalidRequest('text.format must be {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", '
                         '"name": ..., "schema": {...}}', param="text.format", code="invalid_value")


def _effort(reasoning: Any) -> str | None:
    if reasoning is None:
        return None
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else ...
    if effort is not None and not isinstance(effort, str):
        raise InvalidRequest("reasoning must be an object whose effort is a string", param="reasoning.effort",
                             code="invalid_type")
    return effort
