"""Mistral's `[TOOL_CALLS]` calls, in the three shapes its tokenizer versions write.

Mistral 7B v0.3 and Nemo: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`, one marker before a JSON list.
Tokenizer v11 (Mistral Small 3.x): `[TOOL_CALLS]name{...}`; v13 (Magistral, Devstral, Ministral 3):
`[TOOL_CALLS]name[ARGS]{...}`, sometimes `name[CALL_ID]id[ARGS]{...}`. In the newer shapes every call has its own
marker, so a block is one call; its arguments stay JSON text for `extraction.py` to judge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
    run,
    space,
    word,
)
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner, calls_in

OPENER = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"
# Tool names and call ids: what OpenAI allows for names, plus dots and colons that namespaced tools use.
_NAME = re.compile(r"[\w.:\-]*")
_NAME_LIMIT = 128
# What `_read` needs after the marker: a list of objects, one object, or a name, an optional id and an object.
_NAMED = ahead(run(r"[\w.:\-]", _NAME_LIMIT),
               either(ahead(literal(CALL_ID), run(r"[\w.:\-]", _NAME_LIMIT), literal(ARGS)), literal(ARGS), ""),
               SPACE, literal("{"))
_FOLLOW = ahead(SPACE, either(OBJECT_LIST, literal("{"), _NAMED))


class MistralDialect:
    name = "mistral"

    holds_only_markers = True

    markup = Markup(("[TOOL_CALLS]",), ("[ARGS]",))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (OPENER,)

    def scanner(self, tools: ToolIndex) -> MistralScanner:
        return MistralScanner()

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """The v13 shape, the one current Mistral models are trained on."""
        return f"{OPENER}{name}{ARGS}{json.dumps(dict(arguments), ensure_ascii=False)}"


class MistralScanner(TokenBlockScanner):
    def __init__(self) -> None:
        super().__init__(MistralDialect.name, (OPENER,), {OPENER: _FOLLOW})

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        yield from space(cursor)
        first = yield from peek(cursor)
        if first == "[":
            return calls_in((yield from object_list(cursor)))
        if first == "{":  # some fine-tunes drop the list around a single call
            value = yield from json_value(cursor, "{")
            return calls_in([(value, cursor.offset())] if value is not None else None)
        name = yield from word(cursor, _NAME, _NAME_LIMIT)
        if name is None:
            return None
        if (yield from marker(cursor, CALL_ID, ARGS)) == CALL_ID and not (yield from _call_id(cursor)):
            return None
        yield from space(cursor)
        # v11 writes the JSON right after the name: with neither marker read, the object must come next.
        arguments = yield from json_value(cursor, "{")
        return [Found(name, arguments, cursor.offset())] if arguments is not None else None


def _call_id(cursor: Cursor) -> Read[bool]:
    """`id[ARGS]` after `[CALL_ID]`: the id is read and dropped, as the proxy gives every call its own."""
    return (yield from word(cursor, _NAME, _NAME_LIMIT)) is not None and (yield from marker(cursor, ARGS)) is not None
