"""A client's chat-completion request, checked: what is wrong is named with OpenAI's `param` style
(`messages.[2].role`), so the client sees a 400 it can act on instead of a confusing upstream failure."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import ToolIndex
from toolproxy.errors import InvalidRequest
from toolproxy.meaning import schema
from toolproxy.wire import jsonwire

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_CHOICES = 16
# All the tools of one request together: checking this many new subschemas costs a worker tens of milliseconds
# (one tool may hold schema_shape.MAX_SUBSCHEMAS; checked schemas are remembered, so an agent's next request that
# sends the same tools costs nothing).
MAX_REQUEST_SUBSCHEMAS = 10_000
PAUSE_SUBSCHEMAS = 1_000  # after a tool this large, others may run before the next is checked
Pause = Callable[[], None] | None  # lets the worker's other requests run between costly steps (never required)
_TEXT = (str, type(None))  # an optional string field: absent, null, or a string


@dataclass(frozen=True, slots=True)
class ChatRequest:
    body: dict[str, Any]
    model: str
    stream: bool
    include_usage: bool
    tools: ToolIndex
    choices: int

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body["messages"]
        return messages


def parse_chat_request(data: bytes, max_depth: int, max_containers: int = 100_000,
                       pause: Pause = None) -> ChatRequest:
    """A chat request as a client sent it: JSON within the limits, then checked (`chat_request`)."""
    return chat_request(load_object(data, max_depth, max_containers, keep_wire=True, pause=pause), pause)


def load_object(data: bytes, max_depth: int, max_containers: int, *, keep_wire: bool = False,
                pause: Pause = None) -> dict[str, Any]:
    """A request body that must be one JSON object within the limits (any protocol's)."""
    if not data.strip():
        raise InvalidRequest("the request body is empty; send a JSON object", code="invalid_json")
    try:
        body = jsonwire.loads(data, max_depth, max_containers, keep_wire=keep_wire, pause=pause)
    except jsonwire.JsonWireError as error:
        raise InvalidRequest(f"could not parse the request: {error}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_json")
    if pause is not None and len(data) > jsonwire.PAUSE_BYTES:
        pause()
    return body


def chat_request(body: dict[str, Any], pause: Pause = None) -> ChatRequest:
    """A chat-completions body checked as the core needs it: a client's own, or one a front end decoded from
    another protocol (an error then names the chat field; a front end checks its own fields first). `pause`
    lets others run between costly steps (checking a large tool schema for the first time)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("you must provide a model parameter (a non-empty string)", param="model",
                             code="missing_required_parameter" if model is None else "invalid_type")
    _check_messages(body.get("messages"))
    _check_tool_history(body["messages"])
    _check_options(body)
    stream_options = body.get("stream_options") or {}
    tools = _tool_index(body.get("tools"), pause)
    _check_tool_choice(body.get("tool_choice"), tools)
    return ChatRequest(
        body=body,
        model=model,
        stream=bool(body.get("stream")),
        include_usage=bool(stream_options.get("include_usage")),
        tools=tools,
        choices=body.get("n") or 1,
    )


def _check_messages(messages: Any) -> None:
    if messages is None:
        raise InvalidRequest("you must provide messages", param="messages", code="missing_required_parameter")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages must be a non-empty array", param="messages", code="invalid_type")
    for index, message in enumerate(messages):
        if not _is_sound(message):
            _check_message(message, f"messages.[{index}]")


def _is_sound(message: Any) -> bool:
    """What `_check_message` accepts, in one pass of plain tests: a transcript of hundreds of messages is checked
    without naming each one (only a message that fails here is checked again, to say what is wrong)."""
    if type(message) is not dict or message.get("role") not in ROLES:
        return False
    if not isinstance(message.get("content"), (str, list, type(None))):
        return False
    if not isinstance(message.get("tool_call_id"), _TEXT) or not isinstance(message.get("name"), _TEXT):
        return False
    calls = message.get("tool_calls")
    return calls is None or (type(calls) is list and all(_is_sound_call(call) for call in calls))


def _is_sound_call(call: Any) -> bool:
    if type(call) is not dict or not isinstance(call.get("id"), _TEXT) or not isinstance(call.get("type"), _TEXT):
        return False
    function = call.get("function")
    return function is None or (type(function) is dict and isinstance(function.get("name"), _TEXT)
                                and isinstance(function.get("arguments"), (str, dict, type(None))))


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise InvalidRequest(f"{where} must be an object", param=where, code="invalid_type")
    if message.get("role") not in ROLES:
        raise InvalidRequest(f"{where}.role must be one of {', '.join(ROLES)}; got {message.get('role')!r}",
                             param=f"{where}.role", code="invalid_value")
    if not isinstance(message.get("content"), (str, list, type(None))):
        raise InvalidRequest(f"{where}.content must be a string, an array of parts, or null",
                             param=f"{where}.content", code="invalid_type")
    calls = message.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(call, dict) for call in calls)):
        raise InvalidRequest(f"{where}.tool_calls must be an array of objects", param=f"{where}.tool_calls",
                             code="invalid_type")
    _check_typed(message, where, {"tool_call_id": (str,), "name": (str,)})
    for position, call in enumerate(calls or []):
        _check_call(call, f"{where}.tool_calls.[{position}]")


def _check_call(call: dict[str, Any], where: str) -> None:
    _check_typed(call, where, {"id": (str,), "type": (str,), "function": (dict,)})
    _check_typed(call.get("function") or {}, f"{where}.function", {"name": (str,), "arguments": (str, dict)})


def _check_typed(value: dict[str, Any], where: str, fields: dict[str, tuple[type, ...]]) -> None:
    """Optional fields the proxy reads: absent or null, or of the named types (never a 500 further on)."""
    for name, types in fields.items():
        field = value.get(name)
        if field is not None and not isinstance(field, types):
            kinds = " or ".join("a string" if kind is str else "an object" for kind in types)
            raise InvalidRequest(f"{where}.{name} must be {kinds}", param=f"{where}.{name}", code="invalid_type")


def _check_tool_history(messages: list[dict[str, Any]]) -> None:
    """A tool result must answer a call made earlier in the conversation (OpenAI's rule; an orphan result
    confuses every backend, and in prompt mode it could not be written back)."""
    called: set[str] = set()
    for index, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            called.add(str(call.get("id")))
        if message.get("role") != "tool":
            continue
        call_id = message.get("tool_call_id")
        if not called:
            raise InvalidRequest(f"messages.[{index}]: messages with role 'tool' must be a response to a preceding "
                                 "message with 'tool_calls'", param=f"messages.[{index}]", code="invalid_tool_call_id")
        if call_id not in called:
            raise InvalidRequest(f"messages.[{index}]: tool_call_id {call_id!r} does not answer any earlier tool "
                                 "call", param=f"messages.[{index}]", code="invalid_tool_call_id")


def _check_tool_choice(choice: Any, tools: dict[str, dict[str, Any]]) -> None:
    if choice is None or choice in ("none", "auto", "required"):
        return
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise InvalidRequest('tool_choice must be "none", "auto", "required" or {"type": "function", "function": '
                             '{"name": ...}}', param="tool_choice", code="invalid_value")
    if name not in tools:
        raise InvalidRequest(f"tool_choice names {name!r}, which is not one of the request's tools",
                             param="tool_choice", code="invalid_value")


def _check_options(body: dict[str, Any]) -> None:
    if not isinstance(body.get("stream", False), (bool, type(None))):
        raise InvalidRequest("stream must be true or false", param="stream", code="invalid_type")
    if not isinstance(body.get("stream_options") or {}, dict):
        raise InvalidRequest("stream_options must be an object", param="stream_options", code="invalid_type")
    choices = body.get("n")
    if choices is not None and (not _is_int(choices) or not 1 <= choices <= MAX_CHOICES):
        raise InvalidRequest(f"n must be a whole number from 1 to {MAX_CHOICES}", param="n", code="invalid_value")
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (not _is_int(value) or value < 1):
            raise InvalidRequest(f"{key} must be a whole number of at least 1", param=key, code="invalid_value")


def _tool_index(tools: Any, pause: Pause = None) -> dict[str, dict[str, Any]]:
    if tools is None:
        return {}
    if not isinstance(tools, list):
        raise InvalidRequest("tools must be an array", param="tools", code="invalid_type")
    index: dict[str, dict[str, Any]] = {}
    subschemas = 0
    for position, tool in enumerate(tools):
        where = f"tools.[{position}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type", "function") != "function":
            raise InvalidRequest(f"{where} must be {{\"type\": \"function\", \"function\": {{...}}}}", param=where,
                                 code="invalid_type")
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise InvalidRequest(f"{where}.function.name must be 1 to 64 letters, digits, _ or -; got {name!r}",
                                 param=f"{where}.function.name", code="invalid_value")
        index[name], count = check_parameters(function.get("parameters", {}), f"{where}.function.parameters", name)
        subschemas += count
        if pause is not None and count >= PAUSE_SUBSCHEMAS:
            pause()
        if subschemas > MAX_REQUEST_SUBSCHEMAS:
            raise InvalidRequest(f"{where} ({name!r}): the tools' schemas hold more than {MAX_REQUEST_SUBSCHEMAS} "
                                 "subschemas together, the most one request may", param=where,
                                 code="invalid_tool_schema")
    return index


def check_parameters(parameters: Any, where: str, name: str) -> tuple[dict[str, Any], int]:
    """An object schema that is valid JSON Schema, and its number of subschemas; never forwarded otherwise (bad
    schemas crash vLLM workers)."""
    if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
        raise InvalidRequest(f"{where} must be a JSON Schema of type object", param=where,
                             code="invalid_tool_schema")
    try:
        count = schema.check(parameters)
    except schema.SchemaProblem as problem:
        raise InvalidRequest(f"{where} ({name!r}): {problem}", param=where, code="invalid_tool_schema") from None
    return parameters, count


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
