"""Llama 3.1-3.3 calls after `<|python_tag|>`: `{"name": ..., "parameters": {...}}`, several joined by `;`.

The call ends at `<|eom_id|>` or `<|eot_id|>` when the server kept those tokens, or at the end of the JSON when it
did not (they are stop tokens, usually cut). A JSON list of calls after the tag is read too. Bare JSON calls with no
tag belong to the `json` dialect. The built-in tool form `<|python_tag|>brave_search.call(query="...")` is not
read: it is not one of the request's function tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.cursor import (
    OBJECT_LIST,
    SPACE,
    Cursor,
    Read,
    ahead,
    either,
    json_value,
    literal,
    marker,
    object_list,
    peek,
    space,
)
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner, calls_in

OPENER = "<|python_tag|>"
ENDS = ("<|eom_id|>", "<|eot_id|>")
_FOLLOW = ahead(SPACE, either(OBJECT_LIST, literal("{")))  # a list of calls, or the first call's object


class Llama3Dialect:
    name = "llama3"

    holds_only_markers = True

    markup = Markup(("<|python_tag|>",))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (OPENER,)

    def scanner(self, tools: ToolIndex) -> Llama3Scanner:
        return Llama3Scanner()

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return OPENER + json.dumps({"name": name, "parameters": dict(arguments)}, ensure_ascii=False)


class Llama3Scanner(TokenBlockScanner):
    def __init__(self) -> None:
        super().__init__(Llama3Dialect.name, (OPENER,), {OPENER: _FOLLOW})

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        yield from space(cursor)
        if (yield from peek(cursor)) == "[":
            listed = calls_in((yield from object_list(cursor)))
            return (yield from _end(cursor, listed)) if listed else None
        found: list[Found] = []
        while True:
            value = yield from json_value(cursor, "{")
            calls = calls_in([(value, cursor.offset())] if value is not None else None)
            if calls is None:
                return found  # the calls before a broken one stand; the rest is text
            found.extend(calls)
            yield from space(cursor)
            if (yield from marker(cursor, ";")) is None:
                return (yield from _end(cursor, found))
            yield from space(cursor)


def _end(cursor: Cursor, found: list[Found]) -> Read[list[Found]]:
    """An end-of-message token right after the last call belongs to it: it is markup, not content."""
    yield from space(cursor)
    if (yield from marker(cursor, *ENDS)) is not None:
        found[-1] = replace(found[-1], end=cursor.offset())
    return found
