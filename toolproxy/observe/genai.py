"""Prompts and answers as the GenAI semantic conventions write them on a span (`gen_ai.input.messages`,
`gen_ai.output.messages`: messages of typed parts), for an operator who asked for content on spans. Each is
redacted and cut as the transform log's fields are. Pure: no I/O, no SDK."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolproxy.observe.record import redact_and_cut


@dataclass(frozen=True, slots=True)
class Content:
    """Whether prompts and answers go on spans (never by default), and how: redacted with these secrets (usable
    ones, record.usable_secrets), cut at `limit` characters."""

    capture: bool = False
    secrets: tuple[str, ...] = ()
    limit: int = 65536


def input_messages(messages: Any, content: Content) -> str:
    """The messages sent upstream."""
    found = [_message(message) for message in messages or [] if isinstance(message, dict)]
    return _text(found, content)


def output_messages(choices: list[dict[str, Any]], content: Content) -> str:
    """The answer's choices, one assistant message each with why it stopped."""
    found = [{**_message(choice.get("message") or {}), "finish_reason": str(choice.get("finish_reason") or "")}
             for choice in choices]
    return _text(found, content)


def _message(message: dict[str, Any]) -> dict[str, Any]:
    role = str(message.get("role") or "assistant")
    parts: list[dict[str, Any]] = []
    if isinstance(message.get("reasoning_content"), str) and message["reasoning_content"]:
        parts.append({"type": "reasoning", "content": message["reasoning_content"]})
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"),
                      "response": message.get("content")})
    else:
        parts += _content_parts(message.get("content"))
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                          "arguments": function.get("arguments")})
    return {"role": role, "parts": parts}


def _content_parts(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"type": "text", "content": value}] if value else []
    if not isinstance(value, list):
        return []
    # Text parts as they are; an image or a file by its kind only: its data is no prompt text.
    return [{"type": "text", "content": part.get("text")} if part.get("type") == "text"
            else {"type": str(part.get("type") or "unknown")} for part in value if isinstance(part, dict)]


def _text(messages: list[dict[str, Any]], content: Content) -> str:
    return redact_and_cut(json.dumps(messages, ensure_ascii=False), content.secrets, content.limit)
