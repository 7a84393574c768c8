"""An Anthropic Messages request as the core's chat request: its content as chat messages (messages_content.py),
tools and tool_choice, sampling fields and `thinking`, the model's alias resolved. What a chat upstream cannot
take (server tools, thinking from the history, documents) is left out with a note for the record, never refused.
Pure, no I/O.

Errors name Anthropic's fields (`messages.2.content.0.type`), checked before the chat request is built, so that
the client never reads a chat field's name for its own mistake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolproxy.config.settings import Settings
from toolproxy.errors import InvalidRequest
from toolproxy.fronts.messages_content import chat_messages, string
from toolproxy.routes import models
from toolproxy.transform.chat_request import TOOL_NAME, ChatRequest, Pause, chat_request
from toolproxy.transform.request_transform import with_reasoning_effort
from toolproxy.wire import jsonwire

SAMPLING = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}
TOOL_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
THINKING_ON = ("enabled", "adaptive")
EFFORTS = ("low", "medium", "high")
BUDGETS = (("low", 4096), ("medium", 16384))  # budget_tokens up to these: that effort; more: high


@dataclass(frozen=True, slots=True)
class MessagesRequest:
    """The chat request the core answers, and what the answer must say in Anthropic's terms."""

    chat: ChatRequest
    model: str  # as the client named it (an alias is the proxy's business): the answer names it so
    thinking: bool  # the client asked to see the model's thinking: reasoning goes out as thinking blocks
    notes: tuple[str, ...]  # what was left out of the upstream request, for the record


def decode(data: bytes, settings: Settings, pause: Pause = None) -> MessagesRequest:
    """`pause` lets the worker's other requests run between the costly steps of a large body (as the chat
    front's decode does): its JSON decode, its conversion, the chat request's checks."""
    if not data.strip():
        raise InvalidRequest("the request body is empty; send a JSON object", code="invalid_json")
    try:
        body = jsonwire.loads(data, settings.max_json_depth, settings.max_json_containers, pause=pause)
    except jsonwire.JsonWireError as error:
        raise InvalidRequest(f"could not parse the request: {error}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_json")
    large = pause if len(data) > jsonwire.PAUSE_BYTES else None
    return messages_request(body, settings, large)


def messages_request(body: dict[str, Any], settings: Settings, pause: Pause = None) -> MessagesRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("model: a non-empty string is required", param="model")
    notes: list[str] = []
    if pause is not None:
        pause()
    chat: dict[str, Any] = {"model": models.alias(settings, model),
                            "messages": chat_messages(body.get("system"), body.get("messages"), notes)}
    if pause is not None:
        pause()
    _add_tools(chat, body, notes)
    _add_options(chat, body)
    effort, shown = _thinking(body.get("thinking"), body.get("output_config"))
    chat = with_reasoning_effort(chat, effort, settings.for_model(chat["model"]).reasoning_switch)
    return MessagesRequest(chat_request(chat, pause), model, shown, tuple(notes))


def _add_tools(chat: dict[str, Any], body: dict[str, Any], notes: list[str]) -> None:
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequest("tools: an array of tools is required", param="tools")
    functions = [function for position, tool in enumerate(tools)
                 if (function := _function(tool, f"tools.{position}", notes)) is not None]
    if not functions:
        return
    chat["tools"] = functions
    choice = body.get("tool_choice")
    if choice is not None:
        _add_tool_choice(chat, choice)


def _function(tool: Any, where: str, notes: list[str]) -> dict[str, Any] | None:
    """A client tool as a chat function; a server tool (web search, code execution, Anthropic's own bash and
    editor schemas) has no schema a local model could follow: left out, with a note."""
    if not isinstance(tool, dict):
        raise InvalidRequest(f"{where}: each tool must be an object", param=where)
    name = tool.get("name")
    if tool.get("type") not in (None, "custom") or "input_schema" not in tool:
        notes.append(f"{where}: the {tool.get('type') or 'schema-less'} tool {name!r} was left out: "
                     "the upstream cannot run it")
        return None
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise InvalidRequest(f"{where}.name: 1 to 64 letters, digits, _ or -; got {name!r}", param=f"{where}.name")
    function: dict[str, Any] = {"name": name, "parameters": tool["input_schema"]}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _add_tool_choice(chat: dict[str, Any], choice: Any) -> None:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "tool":
        chat["tool_choice"] = {"type": "function", "function": {"name": string(choice, "name", "tool_choice")}}
    elif kind in TOOL_CHOICES:
        chat["tool_choice"] = TOOL_CHOICES[kind]
    else:
        raise InvalidRequest('tool_choice: {"type": "auto" | "any" | "tool" | "none"} is required',
                             param="tool_choice")
    if choice.get("disable_parallel_tool_use") is True:
        chat["parallel_tool_calls"] = False


def _add_options(chat: dict[str, Any], body: dict[str, Any]) -> None:
    """Sampling fields go on as chat names them; the rest of what Anthropic's API takes (metadata, betas,
    context_management, output_config, service_tier) means nothing to a chat upstream and is not sent."""
    max_tokens = body.get("max_tokens")
    if max_tokens is not None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise InvalidRequest("max_tokens: a whole number of at least 1 is required", param="max_tokens")
        chat["max_tokens"] = max_tokens
    for name, chat_name in SAMPLING.items():
        value = body.get(name)
        if value is not None:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise InvalidRequest(f"{name}: a number is required", param=name)
            chat[chat_name] = value
    stops = body.get("stop_sequences")
    if stops:
        if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
            raise InvalidRequest("stop_sequences: an array of strings is required", param="stop_sequences")
        chat["stop"] = stops
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequest("stream: true or false is required", param="stream")
    if stream:
        # The usage ends the stream: message_delta carries the real counts (message_start had to estimate).
        chat["stream"], chat["stream_options"] = True, {"include_usage": True}


def _thinking(thinking: Any, output: Any) -> tuple[str | None, bool]:
    """(the reasoning effort asked for, whether the thinking is to be shown); no effort when the client did not
    say (the model's default). Claude Code sends `adaptive` with `output_config.effort`, the SDKs `enabled` with
    `budget_tokens`; the model's `reasoning_switch` says how the upstream takes the effort."""
    if thinking is None:
        return None, False
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in (*THINKING_ON, "disabled"):
        raise InvalidRequest('thinking: {"type": "enabled" | "adaptive" | "disabled"} is required', param="thinking")
    if kind == "disabled":
        return "none", False
    effort = output.get("effort") if isinstance(output, dict) else None
    if effort not in EFFORTS:
        budget = thinking.get("budget_tokens")
        effort = next((name for name, most in BUDGETS if isinstance(budget, int) and budget <= most), "high") \
            if budget is not None else "medium"
    return effort, thinking.get("display") != "omitted"
