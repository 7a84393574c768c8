"""Thinking Machines' Inkling (TML): `<|message_model|>NAME<|content_invoke_tool_json|>{"name": "NAME", "args":
{...}}<|end_message|>`, as SGLang's InklingDetector reads it, and the text variant `<|content_invoke_tool_text|>`
whose body is the tool's input as raw text.

The chat template puts `<|message_model|>` in the prompt, so a reply that opens with a call starts with the bare
header, `NAME<|content_invoke_tool_json|>`: servers then leak NAME into content (sgl-project/sglang#33181). A name
right before the marker, where a message may begin (the start of the reply, a line, or right after a token), is
read as the header and goes with the call; until the marker can no longer follow, such a name is held back, so a
stream and a whole reply agree. The payload's name must match the header; a payload without one takes the header.
A text body becomes the one property of the declared tool's schema that can hold it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex, decode_json, text_property
from toolproxy.dialects.cursor import SPACE, Cursor, Read, ahead, json_value, literal, marker, space, word
from toolproxy.dialects.gemma4_values import raw_until
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

MESSAGE = "<|message_model|>"
JSON, TEXT = "<|content_invoke_tool_json|>", "<|content_invoke_tool_text|>"
END = "<|end_message|>"
_LIMIT = 128
_NAME = re.compile(r"[\w.\-]*")
_HEADER = re.compile(rf"[\w.\-]{{1,{_LIMIT}}}\Z")
_MESSAGE_AHEAD = ahead(SPACE, r"[\w.\-]{1,128}+", SPACE, literal(JSON, TEXT))


class InklingDialect:
    name = "inkling"

    # It holds back a name that may be a call's header, not only the start of a marker.
    holds_only_markers = False

    markup = Markup((JSON, TEXT), (END,))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (JSON, TEXT)

    def scanner(self, tools: ToolIndex) -> InklingScanner:
        return InklingScanner(tools)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        payload = json.dumps({"name": name, "args": dict(arguments)}, ensure_ascii=False)
        return f"{MESSAGE}{name}{JSON}{payload}{END}"


class InklingScanner(TokenBlockScanner):
    def __init__(self, tools: ToolIndex) -> None:
        super().__init__(InklingDialect.name, (MESSAGE, JSON, TEXT), {MESSAGE: _MESSAGE_AHEAD})
        self._tools = tools
        self._last = ""  # the last character that went out: where a header may begin

    def _passed(self, text: str) -> None:
        self._last = text[-1:] or self._last

    def _find_opener(self) -> tuple[int, str] | None:
        """A content marker takes the header written right before it along."""
        found = self._search(self._cursor.position)
        if found is None:
            return None
        start = found.start()
        if found.group() != MESSAGE:
            start -= self._header_before(start)
        return start, self._cursor.text[start : found.end()]

    def _hold(self) -> int:
        """Besides a marker arriving, a name that may yet be followed by one waits."""
        held = super()._hold()
        return held + self._header_before(len(self._cursor.text) - held)

    def _header_before(self, end: int) -> int:
        """Length of the name that ends at `end`, when it stands where a message may begin; else 0."""
        cursor = self._cursor
        found = _HEADER.search(cursor.text, max(cursor.position, end - _LIMIT), end)
        if found is None:
            return 0
        before = cursor.text[found.start() - 1] if found.start() > cursor.position else self._last
        return end - found.start() if before in ("", "\n", ">") else 0

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        if opener == MESSAGE:
            yield from space(cursor)
            header = yield from word(cursor, _NAME, _LIMIT)
            yield from space(cursor)
            kind = yield from marker(cursor, JSON, TEXT)
        else:
            kind = JSON if opener.endswith(JSON) else TEXT
            header = opener[: len(opener) - len(kind)]
        if kind is None:
            return None
        if kind == TEXT:  # its body runs to the end marker, which it needs: without it the text was cut off
            call = yield from _text_body(cursor, header or "", self._tools)
            return [Found(call[0], call[1], cursor.offset())] if call else None
        call = yield from _json_body(cursor, header or "")
        if call is None:
            return None
        end = cursor.offset()
        yield from space(cursor)
        if (yield from marker(cursor, END)) is not None:
            end = cursor.offset()
        return [Found(call[0], call[1], end)]


def _json_body(cursor: Cursor, header: str) -> Read[tuple[str, Any] | None]:
    yield from space(cursor)
    body = yield from json_value(cursor, "{")
    if body is None:
        return None
    try:
        payload = decode_json(body)
    except ValueError:
        return None
    if isinstance(payload, dict) and isinstance(payload.get("name"), str) and set(payload) <= {"name", "args"}:
        name = payload["name"]
        return (name, payload.get("args")) if name and (not header or name == header) else None
    return (header, payload) if header and isinstance(payload, dict) else None


def _text_body(cursor: Cursor, header: str, tools: ToolIndex) -> Read[tuple[str, Any] | None]:
    raw = yield from raw_until(cursor, END)
    key = text_property(tools.get(header))
    return (header, {key: raw}) if isinstance(raw, str) and header and key else None

