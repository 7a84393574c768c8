"""Stops runaway agent loops before they reach the upstream: the same call again and again, or no end of tools."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

# Context that agent clients insert as `user` messages between tool calls; never the user's own instruction.
CONTEXT_ENVELOPES = (
    ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>", "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"),  # OpenClaw's runtime context
    ("<system-reminder>", "</system-reminder>"),  # Claude Code style reminders
    ("<environment_details>", "</environment_details>"),  # Cline, Roo Code and Kilo Code
)


def check(messages: list[dict[str, Any]], *, repeats: int, max_tool_messages: int) -> str | None:
    """Why this conversation should not go on, or None when it may."""
    tool_messages = sum(1 for message in messages if message.get("role") == "tool")
    if tool_messages >= max_tool_messages:
        return (f"Stopped by toolproxy's loop guard: this conversation already holds {tool_messages} tool results "
                f"(the limit is {max_tool_messages}). Start a new task or summarise before going on.")
    name, count = _trailing_repeats(_calls_backwards(messages))
    if name is not None and count >= repeats:
        return (f"Stopped by toolproxy's loop guard: the tool {name!r} was called {count} times in a row with the "
                "same arguments. Try a different approach or ask the user for help.")
    name, count = _trailing_repeats(_calls_and_results_backwards(messages))
    if name is not None and count >= repeats:
        return (f"Stopped by toolproxy's loop guard: the tool {name!r} was called {count} times with the same "
                "arguments and got the same result each time. Try a different approach or ask the user for help.")
    return None


def _trailing_repeats(calls: Iterator[tuple[str, ...]]) -> tuple[str | None, int]:
    """The last call and how many times in a row it was made, counting back from the end of the conversation."""
    last: tuple[str, ...] | None = None
    count = 0
    for key in calls:
        if last is None:
            last = key
        if key != last:
            break
        count += 1
    return (last[0] if last else None), count


def _calls_backwards(messages: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Calls from the newest back. A user instruction or an assistant answer without calls ends the run; tool
    results, system messages and context a client inserts as a user message (OpenClaw adds one after tool results)
    do not, so 125 identical calls with such messages between them still count as 125 in a row."""
    for message in reversed(messages):
        role = message.get("role")
        if role in ("tool", "system", "developer") or (role == "user" and not is_instruction(message)):
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        if not calls:
            return
        for call in reversed(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                yield str(function.get("name")), _canonical(function.get("arguments"))


def _calls_and_results_backwards(messages: list[dict[str, Any]]) -> Iterator[tuple[str, str, str]]:
    """Calls with the result each got, from the newest back, whatever messages sit between them: agents insert
    context in envelopes no list can know. Only an assistant answer without calls, or a user message with words
    of its own that it says once (a client's inserted context says the same thing again and again) ends the run.
    Going back, a call's results are the tool messages met since the assistant message before them."""
    said: Counter[str] | None = None  # how often each user text occurs: counted when first needed
    results: dict[Any, str] = {}
    for message in reversed(messages):
        role = message.get("role")
        if role == "tool":
            results[message.get("tool_call_id")] = _text(message.get("content"))
            continue
        if role == "user" and is_instruction(message):
            said = said or Counter(_text(item.get("content")).strip() for item in messages
                                   if item.get("role") == "user")
            if said[_text(message.get("content")).strip()] == 1:
                return
        if role != "assistant":
            continue
        calls = message.get("tool_calls")
        if not calls:
            return
        for call in reversed(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                result = results.get(call.get("id"), "")
                yield str(function.get("name")), _canonical(function.get("arguments")), result
        results = {}


def is_instruction(message: dict[str, Any]) -> bool:
    """A user message with words of its own, outside the envelopes clients wrap their inserted context in."""
    text = _text(message.get("content"))
    for begin, end in CONTEXT_ENVELOPES:
        text = _without_envelopes(text, begin, end)
    return bool(text.strip())


def _without_envelopes(text: str, begin: str, end: str) -> str:
    """`text` with every complete `begin ... end` span removed; linear (each find starts past the last)."""
    kept: list[str] = []
    position = 0
    while (start := text.find(begin, position)) >= 0 and (stop := text.find(end, start + len(begin))) >= 0:
        kept.append(text[position:start])
        position = stop + len(end)
    kept.append(text[position:])
    return "".join(kept)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _canonical(arguments: Any) -> str:
    """The same arguments written differently (key order, spacing) count as the same call."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return str(arguments)
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"))
