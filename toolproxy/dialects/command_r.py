"""Cohere Command R7B and Command A calls: `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": ..., "parameters":
{...}}, ...]<|END_ACTION|>`; and the first Command R and R+, which write the same list as a fenced block after
`Action:` (`Action: ```json\n[{"tool_name": ..., "parameters": {...}}]\n````).

The list's JSON decides where it ends; `<|END_ACTION|>` or the closing fence right after it goes with the last
call. The thinking and response spans around it (`<|START_THINKING|>`, `<|START_RESPONSE|>`) stay text: this room
owns the calls (meaning/reasoning.py takes the thinking span as reasoning).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.cursor import OBJECT_LIST, SPACE, ahead, literal, marker, object_list, space
from toolproxy.dialects.token_block import Script, TokenBlockScanner, calls_in

OPENER = "<|START_ACTION|>"
CLOSER = "<|END_ACTION|>"
ACTION, FENCE, FENCE_END = "Action:", "```json", "```"
_KEYS = {"tool_call_id", "tool_name", "parameters"}


class CommandRDialect:
    name = "command_r"

    holds_only_markers = True

    markup = Markup(("<|START_ACTION|>",), ("<|END_ACTION|>",))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (OPENER, ACTION)

    def scanner(self, tools: ToolIndex) -> CommandRScanner:
        return CommandRScanner()

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = {"tool_call_id": "0", "tool_name": name, "parameters": dict(arguments)}
        return f"{OPENER}[{json.dumps(call, ensure_ascii=False)}]{CLOSER}"


class CommandRScanner(TokenBlockScanner):
    def __init__(self) -> None:
        super().__init__(CommandRDialect.name, (OPENER, ACTION), {
            OPENER: ahead(SPACE, OBJECT_LIST), ACTION: ahead(SPACE, literal(FENCE), SPACE, OBJECT_LIST)})

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        yield from space(cursor)
        if opener == ACTION and (yield from marker(cursor, FENCE)) is None:
            return None
        yield from space(cursor)
        found = calls_in((yield from object_list(cursor)), _shape)
        if found:
            yield from space(cursor)
            if (yield from marker(cursor, CLOSER if opener == OPENER else FENCE_END)) is not None:
                found[-1] = replace(found[-1], end=cursor.offset())
        return found


def _shape(value: Any) -> tuple[str, Any] | None:
    """(name, raw arguments) of one element of the action list, or None when it is not one."""
    if not isinstance(value, dict) or set(value) - _KEYS:
        return None
    name, arguments = value.get("tool_name"), value.get("parameters")
    if not isinstance(name, str) or not name or not (arguments is None or isinstance(arguments, (dict, str))):
        return None
    return name, arguments
