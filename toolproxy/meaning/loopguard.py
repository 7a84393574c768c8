"""Stops runaway agent loops before they reach the upstream: the same call again and again, or no end of tools."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def check(messages: list[dict[str, Any]], *, repeats: int, max_tool_messages: int) -> str | None:
    """Why this conversation should not go on, or None when it may."""
    tool_messages = sum(1 for message in messages if message.get("role") == "tool")
    if tool_messages >= max_tool_messages:
        return (f"Stopped by toolproxy's loop guard: this conversation already holds {tool_messages} tool results "
                f"(the limit is {max_tool_messages}). Start a new task or summarise before going on.")
    name, count = _trailing_repeats(messages)
    if name is not None and count >= repeats:
        return (f"Stopped by toolproxy's loop guard: the tool {name!r} was called {count} times in a row with the "
                "same arguments. Try a different approach or ask the user for help.")
    return None


def _trailing_repeats(messages: list[dict[str, Any]]) -> tuple[str | None, int]:
    """The last call and how many times in a row it was made, counting back from the end of the conversation."""
    last: tuple[str, str] | None = None
    count = 0
    for key in _calls_backwards(messages):
        if last is None:
            last = key
        if key != last:
            break
        count += 1
    return (last[0] if last else None), count


def _calls_backwards(messages: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Calls from the newest back; a user turn or an assistant answer without calls ends the run."""
    for message in reversed(messages):
        role = message.get("role")
        if role == "tool":
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        if not calls:
            return
        for call in reversed(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                yield str(function.get("name")), _canonical(function.get("arguments"))


def _canonical(arguments: Any) -> str:
    """The same arguments written differently (key order, spacing) count as the same call."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return str(arguments)
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"))
