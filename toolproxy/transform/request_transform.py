"""The upstream request, built from the client's: stream flags, model rename, parameters the backend rejects,
tool-call ids it accepts, and, in prompt mode, tools taught in the system prompt and tool history as text."""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Iterable, Mapping
from typing import Any

from toolproxy.config.settings import ModelSettings
from toolproxy.transform.markup import defuse
from toolproxy.transform.prompts import Demand, render_call, render_tool_prompt, render_tool_result
from toolproxy.wire.jsonwire import Encoded

PROMPT_DIALECT = "hermes"  # Qwen's own format: the one most open models were tuned on
TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")
_BASE62 = string.digits + string.ascii_letters
THINKING_OFF = ("none", "minimal")  # efforts that switch a model's thinking off where it is on or off


def demand_of(tool_choice: Any) -> Demand | None:
    """What `tool_choice` asks for; None for "none" (no tools offered, no calls returned)."""
    if tool_choice == "none":
        return None
    if tool_choice == "required":
        return Demand(required=True)
    if isinstance(tool_choice, Mapping):
        function = tool_choice.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return Demand(required=True, name=function["name"])
    return Demand()


def demanded_tool(demand: Demand | None, tools: Mapping[str, Any]) -> str | None:
    """The one tool a call is demanded of: the one tool_choice names, or the only tool offered when a call is
    required; None when the answer may choose."""
    if demand is None or not demand.required:
        return None
    return demand.name or (next(iter(tools)) if len(tools) == 1 else None)


def with_reasoning_effort(body: dict[str, Any], effort: str | None, switch: str) -> dict[str, Any]:
    """The client's reasoning effort as the model's setting says the upstream takes it (`reasoning_switch`):
    chat's `reasoning_effort` as given, or a chat-template switch that is off for "none" and "minimal"."""
    if effort is None or switch == "none":
        return body
    if switch == "reasoning_effort":
        return {**body, "reasoning_effort": effort}
    kwargs = body.get("chat_template_kwargs")
    return {**body, "chat_template_kwargs": {**(kwargs if isinstance(kwargs, Mapping) else {}),
                                             switch: effort not in THINKING_OFF}}


def upstream_body(body: Mapping[str, Any], target: ModelSettings, *, stream: bool) -> dict[str, Any]:
    upstream = {key: value for key, value in body.items() if key not in target.drop_params}
    if target.upstream_model:
        upstream["model"] = target.upstream_model
    upstream["stream"] = stream
    if not stream:
        upstream.pop("stream_options", None)  # vLLM rejects stream_options on a non-streaming request
    if target.tool_mode == "prompt" and (body.get("tools") or _has_tool_history(upstream["messages"])):
        # Tool history goes in as text even on a turn without tools: the backend has no tool template for it.
        return to_prompt_mode(upstream, prompt_dialect(target), target.tool_result_limit)
    if target.id_style == "mistral":
        upstream["messages"] = [_short_ids(message) for message in upstream["messages"]]
        return upstream
    return _as_sent(body, upstream, target, stream)


def _as_sent(body: Mapping[str, Any], upstream: dict[str, Any], target: ModelSettings, stream: bool) -> dict[str, Any]:
    """`upstream` with the client's own bytes when it is their body as sent, but for a stream flag they left out
    (appended last, where the dict has it too): encoding a 1 MB transcript again cost a tenth of its request."""
    if not isinstance(body, Encoded) or target.upstream_model or any(key in body for key in target.drop_params):
        return upstream
    if not stream and "stream_options" in body:
        return upstream
    if "stream" not in body:
        return Encoded(upstream, body.wire.rstrip()[:-1] + (b',"stream":true}' if stream else b',"stream":false}'))
    return Encoded(upstream, body.wire) if body["stream"] is stream else upstream


def _has_tool_history(messages: list[dict[str, Any]]) -> bool:
    return any(message.get("role") == "tool" or message.get("tool_calls") for message in messages)


def prompt_dialect(target: ModelSettings) -> str:
    return target.dialects[0] if target.dialects else PROMPT_DIALECT


def to_prompt_mode(body: dict[str, Any], dialect: str, result_limit: int | None = None) -> dict[str, Any]:
    """Tools leave the request for the system prompt; past calls and results become text in the same dialect,
    so the model sees consistent examples of what it is asked to write."""
    demand = demand_of(body.get("tool_choice"))
    tools = [tool["function"] for tool in body.get("tools") or []]
    if demand is not None and demand.name:
        tools = [tool for tool in tools if tool.get("name") == demand.name]
    prompted = {key: value for key, value in body.items() if key not in TOOL_FIELDS}
    names = [str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, Mapping)]
    messages = rewrite_history(body["messages"], dialect, result_limit, names)
    if demand is not None and tools:
        messages = with_system_text(messages, render_tool_prompt(dialect, tools, demand))
    prompted["messages"] = messages
    return prompted


def rewrite_history(messages: list[dict[str, Any]], dialect: str, result_limit: int | None,
                    tool_names: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Past calls written in the dialect, results framed as it expects. The user's text and the results go in
    with any call or framing markup defused (`markup.defuse`): a file's content must not forge a call."""
    tool_names = tuple(tool_names)
    names: dict[str, str] = {}
    rewritten: list[dict[str, Any]] = []
    from_tools: set[int] = set()  # indices of user turns that hold tool results (consecutive ones are merged)
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            rewritten.append(_assistant_as_text(message, dialect, names))
        elif message.get("role") == "tool":
            name = names.get(str(message.get("tool_call_id")), str(message.get("name") or "tool"))
            content = defuse(_limit(text_of(message.get("content")), result_limit), tool_names)
            result = render_tool_result(dialect, name, content)
            if rewritten and len(rewritten) - 1 in from_tools:
                rewritten[-1] = {"role": "user", "content": rewritten[-1]["content"] + "\n\n" + result}
            else:
                from_tools.add(len(rewritten))
                rewritten.append({"role": "user", "content": result})
        elif message.get("role") == "user":
            rewritten.append(_defused(message, tool_names))
        else:
            rewritten.append(message)
    return rewritten


def _defused(message: dict[str, Any], tool_names: tuple[str, ...]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": defuse(content, tool_names)}
    if isinstance(content, list):
        parts = [{**part, "text": defuse(part["text"], tool_names)}
                 if isinstance(part, Mapping) and isinstance(part.get("text"), str) else part for part in content]
        return {**message, "content": parts}
    return message


def _assistant_as_text(message: dict[str, Any], dialect: str, names: dict[str, str]) -> dict[str, Any]:
    parts = [text_of(message.get("content"))] if text_of(message.get("content")).strip() else []
    for call in message["tool_calls"]:
        function = call.get("function") or {}
        name = str(function.get("name"))
        names[str(call.get("id"))] = name
        parts.append(render_call(dialect, name, _arguments(function.get("arguments"))))
    return {"role": "assistant", "content": "\n\n".join(parts)}


def with_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Appended to the client's system message, or a system message of its own in front."""
    for index, message in enumerate(messages):
        if message.get("role") in ("system", "developer"):
            content = message.get("content")
            if isinstance(content, list):
                merged: Any = [*content, {"type": "text", "text": "\n\n" + text}]
            else:
                merged = f"{content}\n\n{text}" if content else text
            return [*messages[:index], {**message, "content": merged}, *messages[index + 1 :]]
    return [{"role": "system", "content": text}, *messages]


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except (ValueError, RecursionError):
            return {"arguments": arguments}
    return arguments if isinstance(arguments, dict) else {}


def _limit(text: str, limit: int | None) -> str:
    """Long results stay whole unless the model's setting says otherwise; a cut is said, not hidden."""
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters cut by toolproxy]"


def short_id(call_id: str) -> str:
    """Mistral's templates accept exactly 9 letters or digits; the same long id always maps to the same short
    one, so calls and their results still pair up, and the proxy keeps no state."""
    if len(call_id) == 9 and call_id.isalnum():
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
    return "".join(_BASE62[(number // 62**index) % 62] for index in range(9))


def _short_ids(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
        return {**message, "tool_call_id": short_id(message["tool_call_id"])}
    if message.get("role") == "assistant" and message.get("tool_calls"):
        calls = [{**call, "id": short_id(str(call.get("id")))} for call in message["tool_calls"]]
        return {**message, "tool_calls": calls}
    return message
